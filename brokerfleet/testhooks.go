package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/pkg/clock"
)

// testHooksEnv must be "1" for serve to accept the test-only flags below;
// without it they are unknown flags (and absent from -h). They exist for
// the fault-injection suite (e2e/chaos) and must never be set in a real
// deployment.
const testHooksEnv = "STRATA_TEST_HOOKS"

// testHookFlags registers serve's test-only flags on fs when
// STRATA_TEST_HOOKS=1:
//
//	-test-unsafe-ack          acks=all answers before replication (loses
//	                          acknowledged writes on failover, on purpose)
//	-test-unsafe-share-ack    share-group acknowledgements answered before
//	                          they are stored (a leader's death hands
//	                          acknowledged records out again, on purpose)
//	-test-peer-dial A=B,...   dial B whenever a peer at A is dialed (a
//	                          proxy per broker-to-broker link)
//	-test-clock-skew D        the broker's wall clock runs D ahead (or
//	                          behind, negative); leases use monotonic time
func testHookFlags(fs *flag.FlagSet, cfg *broker.Config) {
	if os.Getenv(testHooksEnv) != "1" {
		return
	}
	fs.BoolVar(&cfg.UnsafeAckBeforeReplication, "test-unsafe-ack", false, "TEST ONLY ("+testHooksEnv+"=1): acknowledge acks=all produce before replication")
	fs.BoolVar(&cfg.UnsafeShareAckBeforeStore, "test-unsafe-share-ack", false, "TEST ONLY ("+testHooksEnv+"=1): answer share-group acknowledgements before they are stored")
	fs.Func("test-peer-dial", "TEST ONLY ("+testHooksEnv+"=1): peer address rewrites host:port=host:port,... for broker-to-broker dials", func(s string) error {
		m := map[string]string{}
		for _, kv := range strings.Split(s, ",") {
			from, to, ok := strings.Cut(kv, "=")
			if !ok || from == "" || to == "" {
				return fmt.Errorf("%q is not host:port=host:port", kv)
			}
			m[from] = to
		}
		cfg.DialPeer = func(ctx context.Context, addr string) (net.Conn, error) {
			if to, ok := m[addr]; ok {
				addr = to
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
		return nil
	})
	fs.Func("test-clock-skew", "TEST ONLY ("+testHooksEnv+"=1): offset added to the broker's wall clock", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		cfg.Clock = clock.Offset(clock.Real(), d)
		return nil
	})
}
