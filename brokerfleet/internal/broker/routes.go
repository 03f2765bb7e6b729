package broker

// The route registry: every API key this broker serves is registered once,
// by its handler file's init, with the versions it serves, its handler and
// its authorization rule. ApiVersions is built from it, requests are
// parsed and dispatched through it, and a key registered without a rule
// cannot be served: register refuses it, and dispatch answers such a key as
// if it were unknown (fail closed).

import (
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// route is one API key as this broker serves it.
type route struct {
	key      int16
	min, max int16
	// serve runs the handler, filling p; it reports false when the
	// request gets no response (acks=0 produce).
	serve func(b *Broker, cc *clientConn, req kmsg.Request, p *pending) bool
	// authorize is the ACL check, run before serve when ACLs are on: a
	// complete denying answer, or a fix applied to serve's answer (resources
	// taken out of the request answered with their authorization errors),
	// or neither.
	authorize func(a access, req kmsg.Request) (deny kmsg.Response, fix func(kmsg.Response))
	// public routes (ApiVersions and the SASL requests) are served before
	// authentication and need no authorization.
	public bool
	// resolve, when set, runs before the rule: it names what the request
	// gives by id (Fetch v13+ topic ids), so the rule and the handler see
	// names as in older versions, and returns a fix answering what it took
	// out (ids this broker does not know), or nil.
	resolve func(b *Broker, req kmsg.Request) func(kmsg.Response)
}

// routes holds the registered routes by key.
var routes = map[int16]*route{}

// handler and rule are the typed shapes of a route's parts.
type (
	handler[R kmsg.Request] func(b *Broker, cc *clientConn, req R, p *pending) bool
	rule[R kmsg.Request]    func(a access, req R) (deny kmsg.Response, fix func(kmsg.Response))
)

// answer adapts a handler that answers at once.
func answer[R kmsg.Request](fn func(b *Broker, cc *clientConn, req R) kmsg.Response) handler[R] {
	return func(b *Broker, cc *clientConn, req R, p *pending) bool {
		p.resp = fn(b, cc, req)
		return true
	}
}

// later adapts a handler whose answer waits (a long poll, acks=all, a
// rebalance): the returned function runs in the connection's writer, in
// request order. A nil function means no response.
func later[R kmsg.Request](fn func(b *Broker, cc *clientConn, req R) func() kmsg.Response) handler[R] {
	return func(b *Broker, cc *clientConn, req R, p *pending) bool {
		p.wait = fn(b, cc, req)
		return p.wait != nil
	}
}

// register adds the route of key, serving versions lo..hi, with its
// handler and authorization rule. It panics on a second registration of a
// key, a key kmsg does not know, or a missing rule: an API cannot be
// served unauthorized by accident.
func register[R kmsg.Request](key, lo, hi int16, serve handler[R], authorize rule[R]) {
	add(key, lo, hi, serve, authorize, false)
}

// registerPublic adds a route served before authentication and without
// authorization (ApiVersions, SaslHandshake, SaslAuthenticate).
func registerPublic[R kmsg.Request](key, lo, hi int16, serve handler[R]) {
	add(key, lo, hi, serve, nil, true)
}

func add[R kmsg.Request](key, lo, hi int16, serve handler[R], authorize rule[R], public bool) {
	name := kmsg.NameForKey(key)
	switch {
	case routes[key] != nil:
		panic(fmt.Sprintf("broker: API key %d (%s) registered twice", key, name))
	case kmsg.RequestForKey(key) == nil:
		panic(fmt.Sprintf("broker: API key %d is unknown to kmsg", key))
	case serve == nil:
		panic(fmt.Sprintf("broker: API key %d (%s) has no handler", key, name))
	case authorize == nil && !public:
		panic(fmt.Sprintf("broker: API key %d (%s) has no authorization rule", key, name))
	case lo < 0 || hi < lo:
		panic(fmt.Sprintf("broker: API key %d (%s): bad versions %d-%d", key, name, lo, hi))
	}
	r := &route{key: key, min: lo, max: hi, public: public,
		serve: func(b *Broker, cc *clientConn, req kmsg.Request, p *pending) bool { return serve(b, cc, req.(R), p) },
	}
	if authorize != nil {
		r.authorize = func(a access, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return authorize(a, req.(R)) }
	}
	routes[key] = r
}

// resolveWith sets the resolve step of key, registered before.
func resolveWith[R kmsg.Request](key int16, fn func(b *Broker, req R) func(kmsg.Response)) {
	routes[key].resolve = func(b *Broker, req kmsg.Request) func(kmsg.Response) { return fn(b, req.(R)) }
}

// servable reports whether r may be served: a handler, and a rule unless
// it is public.
func (r *route) servable() bool {
	return r != nil && r.serve != nil && (r.authorize != nil || r.public)
}

// supportedVersions returns the range served for key.
func supportedVersions(key int16) (lo, hi int16, ok bool) {
	r := routes[key]
	if !r.servable() {
		return 0, 0, false
	}
	return r.min, r.max, true
}

// apiVersions lists the servable keys and their ranges, by key, built at
// first use (after every handler file's init registered its route).
var apiVersions = sync.OnceValue(func() []kmsg.ApiVersionsResponseApiKey { return advertised(routes) })

// advertised lists the servable routes of rs as ApiVersions entries.
func advertised(rs map[int16]*route) []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for key, r := range rs {
		if r.servable() {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: r.min, MaxVersion: r.max})
		}
	}
	slices.SortFunc(out, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return out
}

// checkRoutes reports every route of rs that lacks a handler or a rule
// (TestEveryAdvertisedKeyHasAHandlerAndARule runs it).
func checkRoutes(rs map[int16]*route) []error {
	var errs []error
	for key, r := range rs {
		switch {
		case r == nil || r.serve == nil:
			errs = append(errs, fmt.Errorf("API key %d (%s) has no handler", key, kmsg.NameForKey(key)))
		case r.authorize == nil && !r.public:
			errs = append(errs, fmt.Errorf("API key %d (%s) has no authorization rule", key, kmsg.NameForKey(key)))
		}
	}
	return errs
}
