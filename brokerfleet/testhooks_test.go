package main

import (
	"context"
	"flag"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

// TestTestHookFlags: serve refuses the test-only flags unless
// STRATA_TEST_HOOKS=1, and with it they set the broker's config.
func TestTestHookFlags(t *testing.T) {
	t.Setenv(testHooksEnv, "")
	for _, f := range []string{"-test-unsafe-ack", "-test-unsafe-share-ack"} {
		err := runServe(context.Background(), []string{f}, io.Discard, io.Discard)
		var ue usageError
		require.ErrorAs(t, err, &ue, "test-only flag %s without %s=1", f, testHooksEnv)
	}

	t.Setenv(testHooksEnv, "1")
	cfg := broker.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	testHookFlags(fs, &cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, fs.Parse([]string{"-test-unsafe-ack", "-test-unsafe-share-ack", "-test-peer-dial", "peer.invalid:9092=" + ln.Addr().String(), "-test-clock-skew", "-1h"}))
	require.True(t, cfg.UnsafeAckBeforeReplication)
	require.True(t, cfg.UnsafeShareAckBeforeStore)
	c, err := cfg.DialPeer(context.Background(), "peer.invalid:9092")
	require.NoError(t, err, "the peer address is rewritten to the listener's")
	c.Close()
	require.WithinDuration(t, time.Now().Add(-time.Hour), cfg.Clock.Now(), time.Minute)
	require.Error(t, fs.Parse([]string{"-test-peer-dial", "no-equals-sign"}))
	require.Error(t, fs.Parse([]string{"-test-clock-skew", "soon"}))
}
