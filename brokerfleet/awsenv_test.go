package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// A stand-in for the ECS task metadata endpoint (v4).
func fakeECS(t *testing.T, body string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v4/abc/task" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	t.Setenv("ECS_CONTAINER_METADATA_URI_V4", srv.URL+"/v4/abc")
}

func TestRackAndAdvertiseFromECSMetadata(t *testing.T) {
	fakeECS(t, `{"Cluster":"strata","AvailabilityZone":"eu-west-1b","Containers":[{"Name":"broker","Networks":[{"NetworkMode":"awsvpc","IPv4Addresses":["10.0.3.17"]}]}]}`)
	ctx := context.Background()
	rack, err := autoRack(ctx)
	require.NoError(t, err)
	require.Equal(t, "eu-west-1b", rack)

	adv, err := advertiseFor(ctx, &net.TCPAddr{IP: net.IPv4zero, Port: 9092})
	require.NoError(t, err)
	require.Equal(t, "10.0.3.17:9092", adv)
	// A specific listen address is advertised as it is.
	adv, err = advertiseFor(ctx, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9093})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9093", adv)
}

func TestRackAutoOutsideECSNamesTheFlag(t *testing.T) {
	t.Setenv("ECS_CONTAINER_METADATA_URI_V4", "")
	_, err := autoRack(context.Background())
	require.ErrorContains(t, err, "flag -rack auto")
	fakeECS(t, `{"Cluster":"strata"}`)
	_, err = autoRack(context.Background())
	require.ErrorContains(t, err, "no AvailabilityZone")
}

// Without ECS metadata a wildcard listener advertises an interface
// address, never 0.0.0.0 or loopback.
func TestAdvertiseWildcardWithoutECS(t *testing.T) {
	t.Setenv("ECS_CONTAINER_METADATA_URI_V4", "")
	adv, err := advertiseFor(context.Background(), &net.TCPAddr{IP: net.IPv4zero, Port: 9092})
	if err != nil {
		require.ErrorContains(t, err, "set -advertise", "only when the machine has no non-loopback IPv4 address")
		return
	}
	host, port, err := net.SplitHostPort(adv)
	require.NoError(t, err)
	require.Equal(t, "9092", port)
	ip := net.ParseIP(host)
	require.NotNil(t, ip)
	require.False(t, ip.IsUnspecified() || ip.IsLoopback(), adv)
}
