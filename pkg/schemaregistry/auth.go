package schemaregistry

// Authentication and authorization of the REST API. Protect puts a handler
// (a Registry) behind HTTP basic authentication, which Confluent clients
// send with basic.auth.credentials.source=USER_INFO, and records who asks
// in the request's context; every route of the Registry then checks its
// rule (http.go) against Kafka ACLs through an Authorizer. Subjects are
// guarded by the topic they are named after (TopicNameStrategy):
//
//	<topic>-value, <topic>-key    the topic
//	any other subject             the cluster ("kafka-cluster")
//
// Reading a subject needs DESCRIBE on its resource (implied by READ,
// WRITE, ALTER and DELETE, so producers and consumers of the topic have
// it), registering WRITE, deleting or changing its config or mode ALTER;
// on the cluster every change needs ALTER. See routes for the whole table.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrBadCredentials is returned by an Authenticator when the password is
// wrong or the user unknown (the two are not told apart).
var ErrBadCredentials = errors.New("schemaregistry: bad user name or password")

// Authenticator checks the user name and password of HTTP basic
// authentication.
type Authenticator interface {
	// Authenticate returns nil when password is user's, an error wrapping
	// ErrBadCredentials when it is not (or there is no such user), and any
	// other error when it cannot tell (the store failed).
	Authenticate(ctx context.Context, user, password string) error
}

// Authorizer decides, with Kafka's ACL semantics, whether principal
// ("User:alice"), connecting from host (an IP address), may do op on the
// resource of type rt named name. The broker's ACL cache (security.ACLs)
// is one.
type Authorizer interface {
	Allowed(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
}

// ClusterName is the name of Kafka's one cluster resource, which guards
// the global config and mode and the subjects named after no topic.
const ClusterName = "kafka-cluster"

// AnonymousPrincipal is who a request is without an Authenticator.
const AnonymousPrincipal = "User:ANONYMOUS"

// Security says who may use the API. The zero value lets everyone do
// everything.
type Security struct {
	// Authenticator turns on HTTP basic authentication: a request without
	// valid credentials is answered 401 with error code 40101, and the
	// principal is "User:" + the user name. Nil: every request is
	// AnonymousPrincipal and credentials are ignored.
	Authenticator Authenticator
	// Authorizer turns on authorization: a request its rule refuses is
	// answered 403 with error code 40301, and lists hold only what the
	// principal may describe. Nil: every principal may do everything.
	Authorizer Authorizer
	// Realm is the realm of the WWW-Authenticate challenge ("" means
	// "Strata Schema Registry").
	Realm string
}

// Confluent's codes for authentication and authorization failures.
const (
	codeUnauthorized = 40101
	codeForbidden    = 40301
)

// Protect serves h, a Registry, to the principals sec admits. With a zero
// Security it returns h.
func Protect(h http.Handler, sec Security) http.Handler {
	if sec.Authenticator == nil && sec.Authorizer == nil {
		return h
	}
	if sec.Realm == "" {
		sec.Realm = "Strata Schema Registry"
	}
	return &guard{next: h, sec: sec}
}

type guard struct {
	next http.Handler
	sec  Security
}

func (g *guard) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	principal := AnonymousPrincipal
	if g.sec.Authenticator != nil {
		user, pass, ok := req.BasicAuth()
		if !ok {
			g.challenge(w, "Unauthorized: HTTP basic authentication is required")
			return
		}
		if err := g.sec.Authenticator.Authenticate(req.Context(), user, pass); err != nil {
			if errors.Is(err, ErrBadCredentials) {
				g.challenge(w, "Unauthorized: bad user name or password")
				return
			}
			writeError(w, storeError("authenticate", err))
			return
		}
		principal = "User:" + user
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	c := &caller{principal: principal, host: host, authz: g.sec.Authorizer}
	g.next.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), callerKey{}, c)))
}

func (g *guard) challenge(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q, charset=\"UTF-8\"", g.sec.Realm))
	writeError(w, newError(http.StatusUnauthorized, codeUnauthorized, "%s", msg))
}

// caller is who sent a request through Protect.
type caller struct {
	principal, host string
	authz           Authorizer // nil: allowed everything
}

type callerKey struct{}

// callerOf returns the caller of a request that came through an
// authorizing Protect, or nil: then everything is allowed.
func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	if c == nil || c.authz == nil {
		return nil
	}
	return c
}

// Allowed reports whether the caller of a request that came through
// Protect may do op on the resource rt/name: always without an
// Authorizer. Handlers served beside the registry, under the same
// Protect, use it for their own rules.
func Allowed(ctx context.Context, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	c := callerOf(ctx)
	return c == nil || c.authz.Allowed(c.principal, c.host, op, rt, name)
}

// subjectResource names the resource that guards subject: topic T for
// T-value and T-key, else the cluster.
func subjectResource(subject string) (kmsg.ACLResourceType, string) {
	for _, suffix := range []string{"-value", "-key"} {
		if t, ok := strings.CutSuffix(subject, suffix); ok && t != "" {
			return kmsg.ACLResourceTypeTopic, t
		}
	}
	return kmsg.ACLResourceTypeCluster, ClusterName
}

// check answers 403 unless the caller may do op on rt/name; subject, when
// set, is named in the message.
func (c *caller) check(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name, subject string) error {
	if c == nil || c.authz.Allowed(c.principal, c.host, op, rt, name) {
		return nil
	}
	what := fmt.Sprintf("%s %q", strings.ToLower(rt.String()), name)
	if rt == kmsg.ACLResourceTypeCluster {
		what = "the cluster"
	}
	if subject != "" {
		what += fmt.Sprintf(" (which guards subject %q)", subject)
	}
	return newError(http.StatusForbidden, codeForbidden, "%s is not authorized to %s %s", c.principal, op, what)
}

// checkSubject answers 403 unless the caller may do op on subject: op on
// its topic, or DESCRIBE (reads) or ALTER (any change) on the cluster for
// a subject named after no topic.
func (c *caller) checkSubject(op kmsg.ACLOperation, subject string) error {
	if c == nil {
		return nil
	}
	rt, name := subjectResource(subject)
	if rt == kmsg.ACLResourceTypeCluster && op != kmsg.ACLOperationDescribe {
		op = kmsg.ACLOperationAlter
	}
	return c.check(op, rt, name, subject)
}

// mayDescribe reports whether the caller may read subject (lists hold
// only those).
func (c *caller) mayDescribe(subject string) bool {
	return c.checkSubject(kmsg.ACLOperationDescribe, subject) == nil
}

// checkSchemaID answers 403 unless the caller may read schema id: with
// DESCRIBE on the cluster, or on the resource of a subject that has a
// version (soft-deleted ones too: old records still name them) with it.
// An unknown id is refused alike, so ids cannot be probed.
func (r *Registry) checkSchemaID(ctx context.Context, c *caller, id int64) error {
	if c == nil {
		return nil
	}
	err := c.check(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, ClusterName, "")
	if err == nil {
		return nil
	}
	uses, serr := r.meta.SchemaUses(ctx, id)
	if serr != nil {
		return storeError("read schema uses", serr)
	}
	for _, u := range uses {
		if c.mayDescribe(u.Subject) {
			return nil
		}
	}
	return newError(http.StatusForbidden, codeForbidden,
		"%s is not authorized to read schema %d: it needs DESCRIBE on the cluster or on the topic of a subject using it", c.principal, id)
}
