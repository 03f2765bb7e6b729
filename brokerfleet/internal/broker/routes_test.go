package broker

import (
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every advertised API key has a handler and an authorization rule (or is
// one of the public ones), and ApiVersions lists exactly the servable keys.
func TestEveryAdvertisedKeyHasAHandlerAndARule(t *testing.T) {
	require.Empty(t, checkRoutes(routes))
	adv := apiVersions()
	require.NotEmpty(t, adv)
	for _, k := range adv {
		r := routes[k.ApiKey]
		require.NotNil(t, r, "key %d advertised without a route", k.ApiKey)
		require.NotNil(t, r.serve, "key %d (%s) has no handler", k.ApiKey, kmsg.NameForKey(k.ApiKey))
		if r.public {
			require.Contains(t, []int16{17, 18, 36}, k.ApiKey, "only ApiVersions and SASL are public")
			continue
		}
		require.NotNil(t, r.authorize, "key %d (%s) has no authorization rule", k.ApiKey, kmsg.NameForKey(k.ApiKey))
	}
	require.Len(t, adv, len(routes))
}

// Removing one rule is caught three times over: checkRoutes names it, the
// key is no longer advertised, and register refuses a route without one.
func TestAKeyWithoutARuleIsNotServed(t *testing.T) {
	rs := maps.Clone(routes)
	stripped := *rs[3] // Metadata
	stripped.authorize = nil
	rs[3] = &stripped

	errs := checkRoutes(rs)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "Metadata")
	require.Contains(t, errs[0].Error(), "no authorization rule")
	for _, k := range advertised(rs) {
		require.NotEqual(t, int16(3), k.ApiKey, "a key without a rule is advertised")
	}
	require.False(t, stripped.servable())

	saved := routes[3]
	delete(routes, 3)
	defer func() { routes[3] = saved }()
	require.PanicsWithValue(t, "broker: API key 3 (Metadata) has no authorization rule", func() {
		register[*kmsg.MetadataRequest](3, 0, 12, answer(handleMetadata), nil)
	})
	require.Panics(t, func() {
		register(18, 0, 4, handleApiVersions, func(access, *kmsg.ApiVersionsRequest) (kmsg.Response, func(kmsg.Response)) { return nil, nil })
	}, "a key registered twice")
}

// A route the registry cannot serve is refused at dispatch, whatever the
// request (fail closed): the connection gets UNSUPPORTED_VERSION and
// closes.
func TestDispatchRefusesARouteWithoutARule(t *testing.T) {
	saved := routes[3]
	stripped := *saved
	stripped.authorize = nil
	routes[3] = &stripped
	defer func() { routes[3] = saved }()
	var p pending
	b := &Broker{}
	require.True(t, b.dispatch(&clientConn{}, kmsg.NewPtrMetadataRequest(), &p))
	require.True(t, p.last)
	require.Nil(t, p.resp)
	require.NotNil(t, p.raw)
	require.True(t, strings.HasSuffix(string(p.raw), "\x00\x23"), "UNSUPPORTED_VERSION (35)")
}
