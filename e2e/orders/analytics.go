package orders

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RunAnalytics consumes Topic in group GroupAnalytics until ctx ends,
// loading each poll's orders into ClickHouse's order facts in one INSERT
// (LoadFacts) and committing the poll's offsets after it. There is no
// transaction: a crash between the INSERT and the commit, a failed commit
// or a rewind writes records again, and the table's engine collapses the
// copies by order id (MigrateFacts), so the collapsed view is the same as
// if each record had been loaded once. loaded counts records loaded.
func RunAnalytics(ctx context.Context, cfg ConsumerConfig, loaded *atomic.Int64) error {
	if err := cfg.validate(true); err != nil {
		return err
	}
	conn, err := OpenClickHouse(ctx, cfg.ClickHouseURL)
	if err != nil {
		return fmt.Errorf("orders: analytics: %w", err)
	}
	defer conn.Close()
	if v, err := conn.ServerVersion(); err == nil {
		cfg.Logger.Info("analytics: ClickHouse", "version", v.Version.String(), "revision", v.Revision, "database", cfg.AnalyticsDB)
	}
	if err := MigrateFacts(ctx, conn, cfg.AnalyticsDB); err != nil {
		return err
	}
	codec, err := NewCodec(cfg.Registries...)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Seeds...),
		kgo.ClientID("orders-analytics"),
		kgo.ConsumerGroup(GroupAnalytics),
		kgo.ConsumeTopics(Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(), // nothing is committed for a partition that moved mid-poll
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, cfg.Timing.opts()...)...)
	if err != nil {
		return fmt.Errorf("orders: analytics client: %w", err)
	}
	defer cl.Close() // leaves the group
	cfg.Logger.Info("analytics: consuming", "topic", Topic, "group", GroupAnalytics)
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 1000)
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				cfg.Logger.Warn("analytics: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		err := analyticsPoll(ctx, cfg, conn, codec, cl, fs, loaded)
		cl.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
	}
	return nil
}

func analyticsPoll(ctx context.Context, cfg ConsumerConfig, conn driver.Conn, codec *Codec, cl *kgo.Client, fs kgo.Fetches, loaded *atomic.Int64) error {
	recs := fs.Records()
	if len(recs) == 0 {
		return nil
	}
	facts := make([]Fact, 0, len(recs))
	for _, r := range recs {
		o, err := codec.Decode(ctx, r.Value)
		if err != nil {
			return fmt.Errorf("orders: analytics: %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		facts = append(facts, Fact{Order: o, Partition: r.Partition, Offset: r.Offset})
	}
	if err := LoadFacts(ctx, conn, cfg.AnalyticsDB, facts); err != nil {
		return err // nothing of this poll committed: it all comes again
	}
	if loaded != nil {
		loaded.Add(int64(len(recs)))
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := cl.CommitRecords(cctx, recs...); err != nil {
		// Loaded but not committed: the records come again and collapse
		// with their copies. Not worth stopping for.
		cfg.Logger.Warn("analytics: commit failed; the records will come again and collapse", "records", len(recs), "err", err)
	}
	return nil
}
