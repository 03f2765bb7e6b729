//go:build chaos

package chaos

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/segment"
)

// The compaction scenario's topic: a table of keys overwritten and
// deleted, compacted (segments roll within a second, any dirty share is
// cleaned, tombstones go 5 s after the cleaner first passed them).
const (
	tableTopic           = "compacted" // not "chaos-...": replica globs match "chaos-<id>"
	tableKeysPerProducer = 30
	// tableDeleteEvery: every this many writes of a key, one deletes it.
	tableDeleteEvery = 7
	tableRetention   = 5 * time.Second
)

var tableConfigs = map[string]*string{
	"cleanup.policy":            kadm.StringPtr("compact"),
	"min.insync.replicas":       kadm.StringPtr("2"),
	"segment.bytes":             kadm.StringPtr("16384"),
	"segment.ms":                kadm.StringPtr("1000"),
	"min.cleanable.dirty.ratio": kadm.StringPtr("0.1"),
	"delete.retention.ms":       kadm.StringPtr(strconv.Itoa(int(tableRetention.Milliseconds()))),
}

// tableWorkload is idempotent acks=all producers overwriting and
// deleting their own keys of tableTopic, recording into the history.
type tableWorkload struct {
	t    *testing.T
	c    *cluster
	h    *History
	stop chan struct{}
	wg   sync.WaitGroup
	prod []*kgo.Client
}

func startTableWorkload(t *testing.T, c *cluster, h *History) *tableWorkload {
	w := &tableWorkload{t: t, c: c, h: h, stop: make(chan struct{})}
	for p := range producers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic(tableTopic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordDeliveryTimeout(45*time.Second), kgo.ProduceRequestTimeout(2*time.Second),
			kgo.RequestTimeoutOverhead(time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.MetadataMinAge(250*time.Millisecond), kgo.ClientID(fmt.Sprintf("chaos-table-producer-%d", p)))
		require.NoError(t, err)
		w.prod = append(w.prod, cl)
		w.wg.Add(1)
		go w.produce(20+p, p, cl)
	}
	return w
}

// produce writes key k's values "<key>:<n>", n = 0, 1, ..., every
// tableDeleteEvery-th a delete.
func (w *tableWorkload) produce(process, p int, cl *kgo.Client) {
	defer w.wg.Done()
	var mu sync.Mutex
	inFlight := make([]int, tableKeysPerProducer)
	seq := make([]int, tableKeysPerProducer)
	tick := time.NewTicker(sendEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		k := i % tableKeysPerProducer
		mu.Lock()
		full := inFlight[k] >= maxInFlightPerKey
		if !full {
			inFlight[k]++
		}
		mu.Unlock()
		if full {
			continue
		}
		key := fmt.Sprintf("t%d-k%02d", p, k)
		value := fmt.Sprintf("%s:%d", key, seq[k])
		tomb := seq[k]%tableDeleteEvery == tableDeleteEvery-1
		seq[k]++
		r := &kgo.Record{Key: []byte(key)}
		if !tomb {
			r.Value = []byte(value)
		}
		w.h.Add(Op{Process: process, Type: Invoke, F: FTableSend, Key: key, Value: value, Tomb: tomb})
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			mu.Lock()
			inFlight[k]--
			mu.Unlock()
			if err != nil {
				typ := Info
				if definiteRejection(err) {
					typ = Fail
				}
				w.h.Add(Op{Process: process, Type: typ, F: FTableSend, Key: key, Value: value, Tomb: tomb, Error: err.Error()})
				return
			}
			w.h.Add(Op{Process: process, Type: OK, F: FTableSend, Key: key, Value: value, Tomb: tomb, Partition: r.Partition, Offset: r.Offset})
		})
	}
}

// Finish stops writing and waits up to a minute and a half for answers.
func (w *tableWorkload) Finish() {
	close(w.stop)
	w.wg.Wait()
	for _, cl := range w.prod {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := cl.Flush(ctx); err != nil {
			w.t.Logf("table producer flush: %v (the unanswered writes stay indeterminate)", err)
		}
		cancel()
		cl.Close()
	}
}

// readTableTopic reads every partition of tableTopic from its start to
// its end offset, or until nothing more comes for two seconds (a
// compacted log may end past its last record). It returns the records
// and the end offsets.
func readTableTopic(t *testing.T, c *cluster) (map[int32][]Rec, map[int32]int64) {
	t.Helper()
	adm, done := c.admin()
	defer done()
	var lends kadm.ListedOffsets
	waitFor(t, time.Minute, "end offsets of "+tableTopic, func() bool {
		var err error
		lends, err = adm.ListEndOffsets(context.Background(), tableTopic)
		return err == nil && lends.Error() == nil && len(lends[tableTopic]) == partitions
	})
	ends := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	lends.Each(func(o kadm.ListedOffset) {
		ends[o.Partition] = o.Offset
		offsets[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tableTopic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ClientID("chaos-table-final"))
	require.NoError(t, err)
	defer cl.Close()
	recs := map[int32][]Rec{}
	next := map[int32]int64{}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		complete := true
		for p, e := range ends {
			complete = complete && next[p] >= e
		}
		if complete {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			n++
			recs[r.Partition] = append(recs[r.Partition], Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Tomb: r.Value == nil})
			next[r.Partition] = r.Offset + 1
		})
		if n == 0 {
			break
		}
	}
	for p := range ends {
		if recs[p] == nil {
			recs[p] = []Rec{}
		}
	}
	return recs, ends
}

// tableFinalRead records the final read of tableTopic.
func tableFinalRead(t *testing.T, c *cluster, h *History) map[int32]int64 {
	recs, ends := readTableTopic(t, c)
	for p, e := range ends {
		h.Add(Op{Process: 101, Type: OK, F: FTableFinal, Partition: p, End: e, Recs: recs[p]})
	}
	return ends
}

// tableCleanRead waits, up to two minutes, for a read of tableTopic that
// holds each key once and no tombstone (the cleaner's work once
// delete.retention.ms passed), and returns it (the last read if none
// did).
func tableCleanRead(t *testing.T, c *cluster) map[int32][]Rec {
	time.Sleep(tableRetention)
	var recs map[int32][]Rec
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		recs, _ = readTableTopic(t, c)
		ok := true
		for _, rs := range recs {
			seen := map[string]bool{}
			for _, r := range rs {
				ok = ok && !r.Tomb && !seen[r.Key]
				seen[r.Key] = true
			}
		}
		if ok {
			return recs
		}
	}
	return recs
}

// compareTableReplicas reads each stopped broker's replica of every
// partition of tableTopic up to ends[p]: wherever two replicas hold a
// record at the same offset it must be the same record, and every
// replica must leave each key with the same last value (each replica
// compacts its own log, so they may have removed different records).
func (c *cluster) compareTableReplicas(ends map[int32]int64) []string {
	var diffs []string
	for p := int32(0); p < partitions; p++ {
		type replica struct {
			at    map[int64]Rec
			state map[string]string
		}
		var reps []replica
		for i := range brokers {
			matches, _ := filepath.Glob(filepath.Join(c.dir, fmt.Sprintf("data-%d", i), "logs", tableTopic+"-*", strconv.Itoa(int(p))))
			if len(matches) != 1 {
				diffs = append(diffs, fmt.Sprintf("table partition %d: %d logs on broker %d", p, len(matches), i))
				continue
			}
			recs, err := readReplica(matches[0], ends[p])
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("table partition %d on broker %d: %v", p, i, err))
				continue
			}
			rep := replica{at: map[int64]Rec{}, state: map[string]string{}}
			for _, r := range recs {
				rep.at[r.Offset] = r
				if r.Tomb {
					delete(rep.state, r.Key)
				} else {
					rep.state[r.Key] = r.Value
				}
			}
			reps = append(reps, rep)
		}
		for i := 1; i < len(reps); i++ {
			for off, r := range reps[i].at {
				if o, ok := reps[0].at[off]; ok && o != r {
					diffs = append(diffs, fmt.Sprintf("table partition %d: offset %d holds %+v on one replica, %+v on another", p, off, o, r))
				}
			}
			if a, b := fmt.Sprint(sorted(reps[0].state)), fmt.Sprint(sorted(reps[i].state)); a != b {
				diffs = append(diffs, fmt.Sprintf("table partition %d: replicas end with other values per key", p))
			}
		}
	}
	return diffs
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// readReplica decodes the records of a stopped replica's log, from its
// start up to end.
func readReplica(dir string, end int64) ([]Rec, error) {
	lg, err := segment.Open(segment.Options{FS: segment.OS(), Dir: dir})
	if err != nil {
		return nil, err
	}
	defer lg.Close()
	start := lg.StartOffset()
	data, err := lg.Read(nil, start, 1<<30, end)
	if err != nil {
		return nil, err
	}
	var out []Rec
	dec := kgo.DefaultDecompressor()
	err = segment.Split(data, func(h segment.Header, raw []byte) error {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			return err
		}
		body, err := dec.Decompress(b.Records, kgo.CompressionCodecType(b.Attributes&7))
		if err != nil {
			return err
		}
		for range b.NumRecords {
			length, n := binary.Varint(body)
			if n <= 0 || int(length) > len(body)-n {
				return fmt.Errorf("batch at %d: bad record length", h.BaseOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(body[:n+int(length)]); err != nil {
				return err
			}
			body = body[n+int(length):]
			off := h.BaseOffset + int64(r.OffsetDelta)
			if off < start || off >= end {
				continue
			}
			out = append(out, Rec{Offset: off, Key: string(r.Key), Value: string(r.Value), Tomb: r.Value == nil})
		}
		return nil
	})
	return out, err
}
