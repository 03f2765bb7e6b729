package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// TestClientsAcrossALeaderChange: Sarama and kcat (librdkafka) keep
// producing while the partition's leader shuts down and hands leadership
// to another replica; they see only retriable errors, which they retry,
// and every message is stored once.
func TestClientsAcrossALeaderChange(t *testing.T) {
	rc := startReplCluster(t, 10*time.Second)
	brokertest.CreateTopicRF(t, rc.brokers[0].Addr, "handover", 1, 3, map[string]*string{"min.insync.replicas": strp("2")})
	pm, _ := rc.partitionMeta(t, "handover", 0)
	leader := pm.Leader
	var survivors []string
	for _, b := range rc.brokers {
		if b.Cfg.NodeID != leader {
			survivors = append(survivors, b.Addr)
		}
	}
	all := make([]string, 0, 3)
	for _, b := range rc.brokers {
		all = append(all, b.Addr)
	}

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 50
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	prod, err := sarama.NewSyncProducer(all, cfg)
	require.NoError(t, err)
	defer prod.Close()

	send := func(from, to int) {
		for i := from; i < to; i++ {
			_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "handover", Value: sarama.StringEncoder(fmt.Sprintf("sarama-%05d", i))})
			require.NoError(t, err, "sarama message %d", i)
		}
	}
	send(0, 200)

	// kcat produces lines from stdin: half before the leader goes away,
	// half after.
	kcat := brokertest.RequireTool(t, "kcat")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", strings.Join(all, ","), "-t", "handover", "-P",
		"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "queue.buffering.max.ms=5")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var kout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &kout, &kout
	require.NoError(t, cmd.Start())
	for i := 0; i < 1500; i++ {
		fmt.Fprintf(stdin, "kcat-%05d\n", i)
	}
	time.Sleep(300 * time.Millisecond) // let kcat deliver the first half

	require.NoError(t, rc.brokers[leader].Broker.Close()) // hands leadership over
	for i := 1500; i < 3000; i++ {
		fmt.Fprintf(stdin, "kcat-%05d\n", i)
	}
	send(200, 400)
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait(), "kcat: %s", kout.String())

	pmAfter, _ := rc.partitionMetaFrom(t, survivors[0], "handover", 0)
	require.NotEqual(t, leader, pmAfter.Leader, "leadership moved")

	cons := brokertest.Client(t, survivors[0], kgo.ConsumeTopics("handover"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	for len(seen) < 3400 {
		fs := cons.PollFetches(cctx)
		require.NoError(t, cctx.Err(), "read %d distinct of 3400", len(seen))
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v, n := range seen {
		require.Equal(t, 1, n, "%s stored %d times", v, n)
	}
	require.Len(t, seen, 3400)
}
