package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// brokerfleet dlq against the console a dev process serves: list, show,
// replay (and its refusal the second time), purge.
func TestDLQCommands(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	p := startProcess(t, "dev", "-brokers", "1", "-listen", "127.0.0.1:0", "-http", "", "-registry", addr, "-tier=false", "-data", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for topic, n := range map[string]int32{"orders": 2, "orders.dlq": 1} {
		r, err := adm.CreateTopic(ctx, n, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, r.Err)
	}
	st := retry.State{Attempts: 3, OriginTopic: "orders", OriginPartition: 1, OriginOffset: 4,
		FirstFailure: time.Now(), LastError: "card declined", Function: "billing"}
	for i := 0; i < 2; i++ {
		r := &kgo.Record{Topic: "orders.dlq", Partition: 0, Key: []byte(fmt.Sprint("order-", i)), Value: []byte(fmt.Sprint("payload-", i)), Headers: st.Headers(nil)}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}
	console := "http://" + addr + "/console"
	dlq := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(append(append([]string{"dlq"}, args...), "-console", console), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := dlq("list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "orders.dlq")
	code, out, errOut = dlq("list", "orders.dlq")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "card declined")
	code, out, errOut = dlq("show", "orders.dlq", "0", "1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "payload-1")

	code, _, errOut = dlq("replay", "orders.dlq", "0:0")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = dlq("replay", "orders.dlq", "0:0")
	require.Equal(t, 1, code, "a second replay needs -force")
	require.Contains(t, errOut, "force")

	// The replayed record is back on its origin partition.
	c2, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {1: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer c2.Close()
	var got *kgo.Record
	for got == nil {
		fs := c2.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		if recs := fs.Records(); len(recs) > 0 {
			got = recs[0]
		}
	}
	require.Equal(t, "payload-0", string(got.Value))

	code, _, errOut = dlq("purge", "orders.dlq", "-all")
	require.Equal(t, 0, code, errOut)
	code, out, errOut = dlq("list", "orders.dlq")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "card declined", "purged letters are gone")
}
