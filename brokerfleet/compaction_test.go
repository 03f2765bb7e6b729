package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cleanerFiles returns the rewrite files (<base>.cleaned, <base>.swap)
// under dir.
func cleanerFiles(t *testing.T, dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".cleaned") || strings.HasSuffix(p, ".swap")) {
			out = append(out, filepath.Base(p))
		}
		return nil
	})
	return out
}

// TestKill9DuringCleaning kills a `brokerfleet serve` process with SIGKILL
// four times while its cleaner is rewriting segments of a compacted topic
// (a <base>.cleaned file is on disk; the cleaner is throttled so a pass
// takes a while) and an idempotent producer overwrites 200 keys: each
// restart opens the segment set (finishing or dropping the interrupted
// swap), and in the end a consumer from offset 0 reads increasing offsets
// with no duplicate and, for every key, its last acknowledged value or a
// later one that was sent.
func TestKill9DuringCleaning(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a broker process four times")
	}
	dir := t.TempDir()
	args := []string{"serve", "-node-id", "0", "-data", dir, "-log-level", "warn",
		"-cleaner-io-max-bytes-per-second", "1000000", "-cleaner-backoff", "50ms", "-maintenance-interval", "100ms"}
	p := startProcess(t, append(args, "-listen", "127.0.0.1:0")...)
	addr := p.addr
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("table"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(time.Minute))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": kadm.StringPtr("131072"),
		"segment.ms": kadm.StringPtr("500"), "min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
	}, "table")
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	const keys = 200
	var mu sync.Mutex
	acked := map[string]int{} // key -> last acknowledged version
	sent := map[string]int{}  // key -> last version sent
	var failures []error
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pad := strings.Repeat("x", 500)
		for v := 0; ctx.Err() == nil; v++ {
			for k := 0; k < keys && ctx.Err() == nil; k++ {
				key := fmt.Sprintf("key-%03d", k)
				mu.Lock()
				sent[key] = v
				mu.Unlock()
				cl.Produce(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("%06d %s", v, pad))}, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failures = append(failures, err)
						return
					}
					var got int
					fmt.Sscanf(string(r.Value), "%d", &got)
					acked[string(r.Key)] = max(acked[string(r.Key)], got)
				})
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	for kill := 0; kill < 4; kill++ {
		deadline := time.Now().Add(time.Minute)
		for len(cleanerFiles(t, dir)) == 0 {
			require.True(t, time.Now().Before(deadline), "kill %d: no cleaning pass rewriting a segment within a minute\n%s", kill, tail(p.stderr.String(), 30))
			time.Sleep(2 * time.Millisecond)
		}
		files := cleanerFiles(t, dir)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.exited
		t.Logf("kill %d during a rewrite (%v on disk)", kill, files)
		p = startProcess(t, append(args, "-listen", addr)...)
		require.Empty(t, cleanerFiles(t, dir), "kill %d: the restart finished or dropped the interrupted swap", kill)
		time.Sleep(time.Second) // producers resume, the log grows
	}
	stop()
	wg.Wait()
	require.NoError(t, cl.Flush(context.Background()))

	// Read the table from offset 0 up to the end.
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(context.Background(), "table")
	require.NoError(t, err)
	end, _ := ends.Lookup("table", 0)
	require.NoError(t, end.Err)
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"table": {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	deadline := time.Now().Add(time.Minute)
	final := map[string]int{}
	last, read := int64(-1), 0
	for {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			require.Greater(t, r.Offset, last, "offsets increase, none twice")
			last = r.Offset
			read++
			n++
			var v int
			fmt.Sscanf(string(r.Value), "%d", &v)
			final[string(r.Key)] = v
		})
		if n == 0 && last >= 0 {
			break // the whole log read: a poll found nothing more
		}
		require.True(t, time.Now().Before(deadline), "reading from 0: at offset %d of %d", last, end.Offset)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, failures, "an idempotent producer with retries loses nothing to a kill")
	require.Len(t, final, keys)
	for k, v := range acked {
		require.GreaterOrEqual(t, final[k], v, "key %s: its last acknowledged value is not lost", k)
		require.LessOrEqual(t, final[k], sent[k], "key %s: a value that was sent", k)
	}
	t.Logf("%d versions of each of %d keys acknowledged; a consumer from 0 read %d records, offsets up to %d",
		func() int {
			m := 0
			for _, v := range acked {
				m = max(m, v+1)
			}
			return m
		}(), keys, read, end.Offset)
}
