package dlqconsole

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

//go:embed templates/*.html templates/style.css
var assets embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"ids":        ids,
	"pathEscape": url.PathEscape,
	"sub":        func(a, b int64) int64 { return a - b },
	"short": func(s string, n int) string {
		if len(s) <= n {
			return s
		}
		return Shown{Data: s}.truncate(n).Data + "…"
	},
}).ParseFS(assets, "templates/*.html"))

// csrfCookie holds the token HTML forms must repeat (double submit).
const csrfCookie = "strata_dlq_csrf"

// pageData is what every page template gets.
type pageData struct {
	Base    string
	Title   string
	CSRF    string
	Message string
	Error   string

	Nav string // the section the page belongs to: brokers, topics, groups, schemas or dlq

	Topics   []TopicSummary // dead letters: index
	DLQTopic string         // dead letters: topic and letter pages
	Page     LetterPage     // dead letters: topic page
	Letter   Letter         // dead letters: letter page

	Data any // the other pages' own data (brokers.html: BrokersPage, ...)
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	d.Base = c.opts.BasePath
	d.CSRF = c.csrfToken(w, r)
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, d); err != nil {
		// A template bug: the tests render every page, so this is not
		// reached in practice.
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) renderError(w http.ResponseWriter, r *http.Request, topic string, err error) {
	nav := ""
	if topic != "" {
		nav = "dlq"
	}
	c.render(w, r, statusOf(err), "error.html", pageData{Title: "Error", Nav: nav, DLQTopic: topic, Error: err.Error()})
}

// csrfToken returns the request's token cookie, setting a new one when it
// has none.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 32 {
		return ck.Value
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: tok, Path: c.opts.BasePath + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
	return tok
}

func checkCSRF(r *http.Request) error {
	if err := checkSameOrigin(r); err != nil {
		return err
	}
	ck, err := r.Cookie(csrfCookie)
	form := r.PostFormValue("csrf")
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(form)) != 1 {
		return errorf(http.StatusForbidden, "missing or stale form token; reload the page and try again")
	}
	return nil
}

func (c *Console) pageIndex(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	s, err := c.topicSummaries(ctx)
	if err != nil {
		c.renderError(w, r, "", err)
		return
	}
	c.render(w, r, 200, "dlq.html", pageData{Title: "Dead letters", Nav: "dlq", Topics: s})
}

func (c *Console) pageTopic(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	limit, after, err := parseListQuery(r.URL.Query())
	if err != nil {
		c.renderError(w, r, topic, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	page, err := c.letterPage(ctx, topic, limit, after)
	if err != nil {
		c.renderError(w, r, topic, err)
		return
	}
	c.render(w, r, 200, "dlqtopic.html", pageData{Title: topic, Nav: "dlq", DLQTopic: topic, Page: page, Message: r.URL.Query().Get("msg")})
}

func (c *Console) pageLetter(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	l, err := c.oneLetter(ctx, topic, r.PathValue("partition"), r.PathValue("offset"))
	if err != nil {
		c.renderError(w, r, topic, err)
		return
	}
	c.render(w, r, 200, "dlqletter.html", pageData{Title: fmt.Sprintf("%s %d@%d", topic, l.Partition, l.Offset), Nav: "dlq", DLQTopic: topic, Letter: l})
}

// pageAction runs a form's replay or purge and goes back to the topic page.
func (c *Console) pageAction(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, topic, errorf(400, "malformed form: %v", err))
		return
	}
	if err := checkCSRF(r); err != nil {
		c.renderError(w, r, topic, err)
		return
	}
	var refs []LetterRef
	for _, v := range r.PostForm["letter"] {
		ps, os, _ := strings.Cut(v, ":")
		ref, err := parseRef(ps, os)
		if err != nil {
			c.renderError(w, r, topic, err)
			return
		}
		refs = append(refs, ref)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*c.timeout)
	defer cancel()
	var msg string
	switch op := r.PostFormValue("op"); op {
	case "replay":
		if len(refs) == 0 {
			c.renderError(w, r, topic, errorf(400, "select the letters to replay"))
			return
		}
		res, err := c.replay(ctx, topic, refs, r.PostFormValue("force") != "")
		if err != nil {
			c.renderError(w, r, topic, err)
			return
		}
		msg = fmt.Sprintf("replayed %d letter(s)", len(res))
	case "purge":
		if len(refs) == 0 {
			c.renderError(w, r, topic, errorf(400, "select the letters to purge"))
			return
		}
		if err := c.purge(ctx, topic, PurgeRequest{Letters: refs}); err != nil {
			c.renderError(w, r, topic, err)
			return
		}
		msg = fmt.Sprintf("purged %d letter(s)", len(refs))
	case "purge-all":
		if err := c.purge(ctx, topic, PurgeRequest{All: true}); err != nil {
			c.renderError(w, r, topic, err)
			return
		}
		msg = "purged every letter"
	default:
		c.renderError(w, r, topic, errorf(400, "unknown action %q: want replay, purge or purge-all", op))
		return
	}
	http.Redirect(w, r, c.opts.BasePath+"/dlq/topics/"+url.PathEscape(topic)+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

func (c *Console) serveStyle(w http.ResponseWriter, r *http.Request) {
	b, _ := assets.ReadFile("templates/style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}
