package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// A changelog restore as Kafka Streams does it. The store process (this
// test binary, re-run with changelogChildEnv set) keeps a keyed state
// store in memory and writes every change to a compacted changelog topic
// (a null value deletes the key); after each batch of changes it flushes
// the producer, writes the store to a checkpoint file and says "commit"
// on stdout, then pauses briefly. The test kills it with SIGKILL after a
// few commits, rebuilds the store from offset 0 of the changelog, and
// compares.

const changelogChildEnv = "STRATA_CHANGELOG_STORE"

// changelogChild is the store process: STRATA_CHANGELOG_STORE holds
// "<bootstrap>,<topic>,<checkpoint file>".
func changelogChild() int {
	parts := strings.Split(os.Getenv(changelogChildEnv), ",")
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "store process: want bootstrap,topic,checkpoint")
		return 2
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(parts[0]), kgo.DefaultProduceTopic(parts[1]), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cl.Close()
	store := map[string]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	produced := 0
	for round := 0; ; round++ {
		for i := 0; i < 500; i++ {
			key := fmt.Sprintf("customer-%03d", rng.IntN(150))
			r := &kgo.Record{Key: []byte(key)}
			if rng.IntN(10) == 0 {
				delete(store, key) // a tombstone
			} else {
				v := fmt.Sprintf("balance=%d round=%d", rng.IntN(1_000_000), round)
				store[key] = v
				r.Value = []byte(v)
			}
			cl.Produce(context.Background(), r, nil)
			produced++
		}
		if err := cl.Flush(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		b, _ := json.Marshal(store)
		tmp := parts[2] + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil || os.Rename(tmp, parts[2]) != nil {
			fmt.Fprintln(os.Stderr, "checkpoint:", err)
			return 1
		}
		fmt.Printf("commit %d %d\n", round, produced)
		time.Sleep(300 * time.Millisecond)
	}
}

// TestChangelogRestoreAfterKill: the store rebuilt from offset 0 of its
// compacted changelog after its process was killed equals the store
// before the kill, and the restore reads far fewer records than were
// produced.
func TestChangelogRestoreAfterKill(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var bs []*brokertest.Broker
	for id := 0; id < 3; id++ {
		bs = append(bs, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID = meta, int32(id)
			c.Cleaner.Backoff, c.MaintenanceInterval = 50*time.Millisecond, 50*time.Millisecond
		}))
	}
	addr := bs[0].Addr
	waitUntil(t, 30*time.Second, "three brokers", func() bool {
		md, err := brokertest.Admin(t, addr).Metadata(context.Background())
		return err == nil && len(md.Brokers) == 3
	})
	// The configs Kafka Streams gives a changelog topic, with quick rolls.
	brokertest.CreateTopicRF(t, addr, "store-changelog", 3, 3, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "min.insync.replicas": kadm.StringPtr("2"),
		"segment.bytes": kadm.StringPtr("32768"), "segment.ms": kadm.StringPtr("300"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.1"), "delete.retention.ms": kadm.StringPtr("1000"),
	})

	checkpoint := filepath.Join(t.TempDir(), "store.json")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), changelogChildEnv+"="+strings.Join([]string{addr, "store-changelog", checkpoint}, ","))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	produced := 0
	for commits := 0; commits < 12; commits++ {
		require.True(t, sc.Scan(), "store process ended: %s", stderr.String())
		f := strings.Fields(sc.Text())
		require.Len(t, f, 3, sc.Text())
		produced, _ = strconv.Atoi(f[2])
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL, during its pause after a commit
	_ = cmd.Wait()
	var before map[string]string
	b, err := os.ReadFile(checkpoint)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &before))

	restore := func() (map[string]string, int) {
		adm := brokertest.Admin(t, addr)
		ends, err := adm.ListEndOffsets(context.Background(), "store-changelog")
		require.NoError(t, err)
		offsets := map[int32]kgo.Offset{}
		want := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) {
			offsets[o.Partition] = kgo.NewOffset().At(0)
			want[o.Partition] = o.Offset
		})
		cl := brokertest.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"store-changelog": offsets}),
			kgo.FetchMaxWait(100*time.Millisecond))
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		store, n := map[string]string{}, 0
		// Kafka Streams restores each partition up to its end offset; a
		// compacted log may end past its last record, so a poll that
		// finds nothing more ends the restore too.
		at := map[int32]int64{}
		for {
			done := true
			for p, end := range want {
				done = done && at[p] >= end
			}
			if done {
				break
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			require.NoError(t, ctx.Err())
			got := 0
			fs.EachRecord(func(r *kgo.Record) {
				got++
				n++
				at[r.Partition] = r.Offset + 1
				if r.Value == nil {
					delete(store, string(r.Key))
				} else {
					store[string(r.Key)] = string(r.Value)
				}
			})
			if got == 0 {
				break
			}
		}
		return store, n
	}
	got, n := restore()
	require.Equal(t, before, got, "the restored store equals the store before the kill")
	t.Logf("restore right after the kill: %d records read, %d produced, %d keys", n, produced, len(got))
	waitUntil(t, 30*time.Second, "a restore reading far fewer records than produced", func() bool {
		got, n = restore()
		require.Equal(t, before, got)
		return n*10 < produced
	})
	t.Logf("restore once the cleaner caught up: %d records read of %d produced, %d keys", n, produced, len(got))
}
