package dlqconsole

import (
	"context"
	"net/http"
)

// The read-only pages of the console beside the dead letters: each loads
// its data within the request's Kafka time bound and renders one template,
// or the error page with the error's status (400 for bad parameters, 404
// for unknown topics, groups and subjects, 502/503 when Kafka or the
// registry fails).

type loader func(ctx context.Context, r *http.Request) (data any, title string, err error)

func (c *Console) view(tmpl, nav string, load loader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
		defer cancel()
		data, title, err := load(ctx, r)
		if err != nil {
			c.render(w, r, statusOf(err), "error.html", pageData{Title: "Error", Nav: nav, Error: err.Error()})
			return
		}
		c.render(w, r, http.StatusOK, tmpl, pageData{Title: title, Nav: nav, Data: data})
	}
}

func (c *Console) viewRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /{$}", c.view("brokers.html", "brokers", func(ctx context.Context, r *http.Request) (any, string, error) {
		p, err := c.brokersPage(ctx)
		return p, "Brokers", err
	}))
	m.HandleFunc("GET /topics", c.view("topics.html", "topics", func(ctx context.Context, r *http.Request) (any, string, error) {
		p, err := c.topicsPage(ctx)
		return p, "Topics", err
	}))
	m.HandleFunc("GET /topics/{topic}", c.view("topic.html", "topics", func(ctx context.Context, r *http.Request) (any, string, error) {
		t := r.PathValue("topic")
		p, err := c.topicPage(ctx, t)
		return p, t, err
	}))
	m.HandleFunc("GET /topics/{topic}/messages", c.view("messages.html", "topics", func(ctx context.Context, r *http.Request) (any, string, error) {
		t := r.PathValue("topic")
		mq, from, err := parseMessageQuery(r.URL.Query())
		if err != nil {
			return nil, "", err
		}
		p, err := c.messagesPage(ctx, t, mq, from)
		return p, t + " messages", err
	}))
	m.HandleFunc("GET /groups", c.view("groups.html", "groups", func(ctx context.Context, r *http.Request) (any, string, error) {
		p, err := c.groupsPage(ctx)
		return p, "Consumer groups", err
	}))
	m.HandleFunc("GET /groups/{group}", c.view("group.html", "groups", func(ctx context.Context, r *http.Request) (any, string, error) {
		g := r.PathValue("group")
		p, err := c.groupPage(ctx, g)
		return p, g, err
	}))
	m.HandleFunc("GET /schemas", c.view("schemas.html", "schemas", func(ctx context.Context, r *http.Request) (any, string, error) {
		p, err := c.schemasPage(ctx)
		return p, "Schemas", err
	}))
	m.HandleFunc("GET /schemas/{subject}", c.view("subject.html", "schemas", func(ctx context.Context, r *http.Request) (any, string, error) {
		s := r.PathValue("subject")
		p, err := c.subjectPage(ctx, s)
		return p, s, err
	}))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error.html", pageData{Title: "Not found", Error: "no page " + r.URL.Path})
	})
}
