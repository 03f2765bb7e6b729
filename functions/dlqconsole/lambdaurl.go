package dlqconsole

import (
	"context"
	"encoding/base64"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// FunctionURLHandler adapts h to a Lambda Function URL (payload format 2.0,
// buffered): the request becomes an *http.Request, the recorded response a
// LambdaFunctionURLResponse. Binary bodies travel base64-encoded both ways.
func FunctionURLHandler(h http.Handler) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		r, err := functionURLRequest(ctx, ev)
		if err != nil {
			return textResponse(http.StatusBadRequest, `{"error":"malformed Function URL request: `+jsonEscape(err.Error())+`"}`), nil
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return functionURLResponse(rec), nil
	}
}

func functionURLRequest(ctx context.Context, ev events.LambdaFunctionURLRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, err
		}
		body = b
	}
	path := ev.RawPath
	if path == "" {
		path = "/"
	}
	target := path
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	r, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	for k, v := range ev.Headers {
		r.Header.Set(k, v) // Function URLs join repeated headers with commas
	}
	for _, c := range ev.Cookies {
		r.Header.Add("Cookie", c)
	}
	r.Host = ev.Headers["host"]
	if r.Host == "" {
		r.Host = ev.RequestContext.DomainName
	}
	r.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	r.RequestURI = target
	r.ContentLength = int64(len(body))
	return r, nil
}

func functionURLResponse(rec *httptest.ResponseRecorder) events.LambdaFunctionURLResponse {
	res := events.LambdaFunctionURLResponse{StatusCode: rec.Code, Headers: map[string]string{}}
	for k, vs := range rec.Header() {
		if http.CanonicalHeaderKey(k) == "Set-Cookie" {
			res.Cookies = append(res.Cookies, vs...)
			continue
		}
		res.Headers[k] = strings.Join(vs, ",")
	}
	b := rec.Body.Bytes()
	if textual(rec.Header().Get("Content-Type")) && utf8.Valid(b) {
		res.Body = string(b)
	} else {
		res.Body, res.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	return res
}

func textual(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}

func textResponse(status int, body string) events.LambdaFunctionURLResponse {
	return events.LambdaFunctionURLResponse{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: body}
}

func jsonEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return r.Replace(s)
}
