package dlqconsole

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/functions/internal/testlambda"
)

func urlRequest(method, path, query, body string, b64 bool, headers map[string]string) events.LambdaFunctionURLRequest {
	h := map[string]string{"host": "abc123.lambda-url.eu-west-1.on.aws", "x-forwarded-proto": "https"}
	for k, v := range headers {
		h[k] = v
	}
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: path, RawQueryString: query, Headers: h, Body: body, IsBase64Encoded: b64,
		RequestContext: events.LambdaFunctionURLRequestContext{
			DomainName: "abc123.lambda-url.eu-west-1.on.aws",
			HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: path, SourceIP: "127.0.0.1"},
		},
	}
}

func invoke(t *testing.T, h lambda.Handler, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	t.Helper()
	payload, err := json.Marshal(req)
	require.NoError(t, err)
	out, err := h.Invoke(context.Background(), payload)
	require.NoError(t, err)
	var res events.LambdaFunctionURLResponse
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	return res
}

func body(t *testing.T, res events.LambdaFunctionURLResponse) string {
	t.Helper()
	if !res.IsBase64Encoded {
		return res.Body
	}
	b, err := base64.StdEncoding.DecodeString(res.Body)
	require.NoError(t, err)
	return string(b)
}

// TestFunctionURL serves the console through the Function URL adapter, in
// process through lambda.NewHandler(...).Invoke.
func TestFunctionURL(t *testing.T) {
	c := startCluster(t)
	s := seed(t, c)
	con, err := New(Options{Seeds: []string{c.bootstrap}, RegistryURL: c.registry})
	require.NoError(t, err)
	defer Close(con)
	h := lambda.NewHandler(FunctionURLHandler(con))

	res := invoke(t, h, urlRequest("GET", "/dlq/", "", "", false, nil))
	require.Equal(t, 200, res.StatusCode, body(t, res))
	require.Contains(t, res.Headers["Content-Type"], "text/html")
	require.Contains(t, body(t, res), "orders.dlq")
	require.Contains(t, res.Headers["Content-Security-Policy"], "default-src 'self'")
	require.Len(t, res.Cookies, 1, "the form token cookie")
	require.Contains(t, res.Cookies[0], "Secure", "behind https")

	// A replay through the JSON API, the body base64-encoded as Function
	// URLs send it.
	replay := fmt.Sprintf(`{"letters":[{"partition":%d,"offset":%d}]}`, s.binary.Partition, s.binary.Offset)
	res = invoke(t, h, urlRequest("POST", "/api/topics/orders.dlq/replay", "", base64.StdEncoding.EncodeToString([]byte(replay)), true,
		map[string]string{"content-type": "application/json", "origin": "https://abc123.lambda-url.eu-west-1.on.aws"}))
	require.Equal(t, 200, res.StatusCode, body(t, res))
	require.Contains(t, body(t, res), `"originPartition": 2`)
	recs := consumeOrigin(t, c, 1)
	require.Equal(t, []byte{0xff, 0x00, 0x01, 0x02}, recs[0].Value)
	require.EqualValues(t, 2, recs[0].Partition)

	// A replay from the HTML form: cookie and form token from the page.
	res = invoke(t, h, urlRequest("GET", "/dlq/topics/orders.dlq", "", "", false, nil))
	require.Equal(t, 200, res.StatusCode)
	page := body(t, res)
	require.NotContains(t, page, fmt.Sprintf(`value="%d:%d"`, s.binary.Partition, s.binary.Offset), "replayed letters are gone")
	i := strings.Index(page, `name="csrf" value="`)
	require.Positive(t, i)
	tok := page[i+len(`name="csrf" value="`):]
	tok = tok[:strings.IndexByte(tok, '"')]
	form := fmt.Sprintf("csrf=%s&op=replay&letter=%d%%3A%d", tok, s.script.Partition, s.script.Offset)
	req := urlRequest("POST", "/dlq/topics/orders.dlq/action", "", form, false, map[string]string{"content-type": "application/x-www-form-urlencoded"})
	req.Cookies = []string{csrfCookie + "=" + tok}
	res = invoke(t, h, req)
	require.Equal(t, 303, res.StatusCode, body(t, res))
	require.Contains(t, res.Headers["Location"], "/dlq/topics/orders.dlq?msg=")

	// The console's pages come through the adapter too.
	res = invoke(t, h, urlRequest("GET", "/", "", "", false, nil))
	require.Equal(t, 200, res.StatusCode, body(t, res))
	require.Contains(t, body(t, res), "Cluster strata-dev")
	res = invoke(t, h, urlRequest("GET", "/topics/orders/messages", "offset=x", "", false, nil))
	require.Equal(t, 400, res.StatusCode, body(t, res))
	require.Contains(t, body(t, res), "invalid offset")

	// Errors stay JSON through the adapter.
	res = invoke(t, h, urlRequest("GET", "/api/topics/nope.dlq/letters", "limit=5", "", false, nil))
	require.Equal(t, 404, res.StatusCode)
	require.Contains(t, body(t, res), `"error"`)
	res = invoke(t, h, urlRequest("POST", "/api/topics/orders.dlq/purge", "", "%%%", true, map[string]string{"content-type": "application/json"}))
	require.Equal(t, 400, res.StatusCode)
}

// TestBootstrapBinary runs the built Lambda binary under a fake Runtime
// API and asks it for the topic list.
func TestBootstrapBinary(t *testing.T) {
	c := startCluster(t)
	seed(t, c)
	bin := testlambda.Build(t, "github.com/stratamq/strata/functions/dlqconsole/cmd")
	rt := testlambda.NewRuntime(t)
	rt.Start(t, bin, "STRATA_BOOTSTRAP="+c.bootstrap, "STRATA_REGISTRY_URL="+c.registry)
	payload, err := json.Marshal(urlRequest("GET", "/api/topics", "", "", false, nil))
	require.NoError(t, err)
	out, err := rt.Invoke(payload, time.Now().Add(20*time.Second), 5*time.Second)
	require.NoError(t, err)
	require.False(t, out.Error, "%s", out.Body)
	var res events.LambdaFunctionURLResponse
	require.NoError(t, json.Unmarshal(out.Body, &res))
	require.Equal(t, 200, res.StatusCode, res.Body)
	require.Contains(t, res.Body, `"topic": "orders.dlq"`)
	require.Contains(t, res.Body, `"letters": 4`)
}
