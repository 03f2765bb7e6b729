package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	dto "github.com/prometheus/client_model/go"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
)

// shareRun measures share groups (KIP-932) on the dev target against
// classic consumer groups: it fills a 12-partition topic of RF t.RF with
// logBytes of 1 KiB records (keyed, so the partitions hold about the
// same), then for each consumer count in counts reads all of it with a
// fresh share group of that many consumers and then with a fresh classic
// group of as many (each consumer its own client). Every consumer polls,
// acknowledges what it got and polls again: a share consumer ACCEPTs each
// record and waits for FlushAcks, a classic one waits for
// CommitUncommittedOffsets; that wait is the acknowledgement latency. The
// metastore writes come from the brokers' metrics, scraped before the
// consumers start and after the last acknowledgement is confirmed.
func shareRun(ctx context.Context, t *benchTarget, counts []int, logBytes int64, timeout time.Duration, stderr io.Writer) (*bench.Share, error) {
	const topic = "bench-share"
	if len(t.Metrics) == 0 {
		return nil, errors.New("share: the dev target serves no metrics")
	}
	cfg := bench.DefaultConfig()
	cfg.TotalBytes, cfg.Keyed, cfg.Partitions, cfg.Timeout = logBytes, true, 12, timeout
	res := &bench.Share{Target: t.Name, Partitions: int(cfg.Partitions), RF: t.RF, RecordBytes: cfg.RecordBytes}

	prod, value, err := bench.Producer(cfg, topic, t.Addrs...)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)
	if err := bench.CreateTopic(ctx, cfg, adm, topic, t.RF); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "share: writing %s to %s (%d partitions, RF %d)\n", bench.Size(logBytes), topic, cfg.Partitions, t.RF)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	_, err = bench.Produce(pctx, cfg, prod, value, cfg.Records(), nil, nil)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("share: produce: %w", err)
	}
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("share: end offsets: %w", err)
	}
	ends := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) {
		ends[o.Partition] = o.Offset
		res.Records += o.Offset
	})
	if res.Records != cfg.Records() {
		return nil, fmt.Errorf("share: %s holds %d records, %d were produced", topic, res.Records, cfg.Records())
	}

	for _, n := range counts {
		for _, share := range []bool{true, false} {
			kind := "classic"
			group := fmt.Sprintf("bench-classic-%d", n)
			if share {
				kind, group = "share", fmt.Sprintf("bench-share-%d", n)
				if err := setShareEarliest(ctx, prod, group); err != nil {
					return res, err
				}
			}
			fmt.Fprintf(stderr, "share: %s group of %d reading %d records\n", kind, n, res.Records)
			r, err := groupRead(ctx, t, topic, group, share, n, ends, timeout)
			if err != nil {
				return res, fmt.Errorf("share: %s group of %d: %w", kind, n, err)
			}
			res.Runs = append(res.Runs, r)
		}
	}
	return res, nil
}

// setShareEarliest sets share.auto.offset.reset=earliest on group (a
// share group starts at the log end otherwise).
func setShareEarliest(ctx context.Context, cl *kgo.Client, group string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		for _, rr := range resp.Resources {
			err = errors.Join(err, kerr.ErrorForCode(rr.ErrorCode))
		}
	}
	if err != nil {
		return fmt.Errorf("share.auto.offset.reset of %s: %w", group, err)
	}
	return nil
}

// readTally is what the consumers of one groupRead have read: each
// partition's offsets confirmed so far, once each.
type readTally struct {
	mu         sync.Mutex
	seen       map[int32][]bool
	distinct   int64
	total      int64
	bytes      int64
	lat        *bench.Hist
	first, end time.Time
	done       context.CancelFunc
}

// confirmed counts recs, whose acknowledgement took took, except those of
// the partitions in failed; the last one ends the read.
func (t *readTally) confirmed(recs []*kgo.Record, took time.Duration, failed map[int32]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lat.Record(took)
	for _, r := range recs {
		s := t.seen[r.Partition]
		if failed[r.Partition] || r.Offset < 0 || r.Offset >= int64(len(s)) || s[r.Offset] {
			continue
		}
		s[r.Offset] = true
		t.distinct++
		t.bytes += int64(len(r.Value))
	}
	if t.distinct == t.total && t.end.IsZero() {
		t.end = time.Now()
		t.done()
	}
}

func (t *readTally) polled() {
	t.mu.Lock()
	if t.first.IsZero() {
		t.first = time.Now()
	}
	t.mu.Unlock()
}

// groupRead reads the whole topic (ends: each partition's end offset)
// with n consumers of group, a share group or a classic one.
func groupRead(ctx context.Context, t *benchTarget, topic, group string, share bool, n int, ends map[int32]int64, timeout time.Duration) (bench.ShareRun, error) {
	res := bench.ShareRun{Group: "classic", Consumers: n}
	if share {
		res.Group = "share"
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tally := &readTally{seen: map[int32][]bool{}, lat: bench.NewHist(), done: cancel}
	for p, end := range ends {
		tally.seen[p] = make([]bool, end)
		tally.total += end
	}
	before, err := scrapeDev(ctx, t.Metrics)
	if err != nil {
		return res, err
	}
	var deliveries, ackErrors atomic.Int64
	var active atomic.Int32
	var wg sync.WaitGroup
	var clients []*kgo.Client
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for range n {
		var mu sync.Mutex
		failed := map[int32]bool{} // partitions whose acknowledgement the broker refused since the last poll
		opts := []kgo.Opt{kgo.SeedBrokers(t.Addrs...), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500 * time.Millisecond)}
		if share {
			opts = append(opts, kgo.ShareGroup(group), kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range rs {
					if r.Err != nil {
						failed[r.Partition] = true
						ackErrors.Add(1)
					}
				}
			}))
		} else {
			opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return res, err
		}
		clients = append(clients, cl)
		wg.Go(func() {
			got := false
			for {
				fs := cl.PollFetches(rctx)
				if fs.IsClientClosed() || rctx.Err() != nil {
					return
				}
				recs := fs.Records()
				if len(recs) == 0 {
					continue
				}
				tally.polled()
				deliveries.Add(int64(len(recs)))
				if !got {
					got = true
					active.Add(1)
				}
				t0 := time.Now()
				var err error
				if share {
					for _, r := range recs {
						r.Ack(kgo.AckAccept)
					}
					err = cl.FlushAcks(rctx)
				} else {
					// A commit refused in a rebalance is covered by the
					// next one, or the partition's next owner reads the
					// records again.
					err = cl.CommitUncommittedOffsets(rctx)
				}
				took := time.Since(t0)
				if rctx.Err() != nil {
					return
				}
				if err != nil {
					ackErrors.Add(1)
				}
				mu.Lock()
				refused := failed
				failed = map[int32]bool{}
				mu.Unlock()
				tally.confirmed(recs, took, refused)
			}
		})
	}
	<-rctx.Done()
	after, err := scrapeDev(ctx, t.Metrics) // before the consumers leave
	wg.Wait()
	if err != nil {
		return res, err
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	if tally.end.IsZero() {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("%d of %d records acknowledged within %v (-timeout)", tally.distinct, tally.total, timeout)
	}
	res.Active, res.Records, res.Deliveries = int(active.Load()), tally.distinct, deliveries.Load()
	res.Seconds = tally.end.Sub(tally.first).Seconds()
	res.MBps = float64(tally.bytes) / 1e6 / res.Seconds
	res.RecordsPerSec = float64(tally.distinct) / res.Seconds
	res.AckLatency = tally.lat.Summary()
	res.AckErrors = ackErrors.Load()
	res.MetastoreWrites = int64(after.metaWrites - before.metaWrites)
	res.WritesPerThousand = float64(res.MetastoreWrites) * 1000 / float64(res.Records)
	if share {
		res.ShareStateWrites = int64(after.shareWrites - before.shareWrites)
		res.BrokerAcked = int64(after.shareAcked - before.shareAcked)
	}
	return res, nil
}

// devCounts are counters summed over the dev target's brokers.
type devCounts struct {
	metaWrites  float64 // strata_metastore_requests_total of the writing operations
	shareWrites float64 // strata_share_state_writes_total
	shareAcked  float64 // strata_share_acknowledged_total
}

// metastoreWriteOps are the metastore operations that write
// (metastore.OpNamePut, …), as strata_metastore_requests_total labels them.
var metastoreWriteOps = map[string]bool{"put": true, "add": true, "delete": true, "transact": true}

// scrapeDev sums the counters devCounts holds over the brokers' /metrics.
func scrapeDev(ctx context.Context, urls []string) (devCounts, error) {
	var c devCounts
	scraped, err := bench.Scrape(ctx, urls)
	if err != nil {
		return c, err
	}
	sum := func(fam *dto.MetricFamily, keep func(*dto.Metric) bool) (v float64) {
		for _, m := range fam.GetMetric() {
			if keep == nil || keep(m) {
				v += m.GetCounter().GetValue()
			}
		}
		return v
	}
	for _, fams := range scraped {
		c.metaWrites += sum(fams["strata_metastore_requests_total"], func(m *dto.Metric) bool { return metastoreWriteOps[bench.Label(m, "op")] })
		c.shareWrites += sum(fams["strata_share_state_writes_total"], nil)
		c.shareAcked += sum(fams["strata_share_acknowledged_total"], nil)
	}
	return c, nil
}

// parseShareCounts parses -share: consumer counts, each from 1 to 64.
func parseShareCounts(list string) ([]int, error) { return parseCounts(list, "consumer", 64) }
