package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/brokerfleet/internal/offsetlog"
)

// TestOffsetsTopicCopiesCommits: with OffsetsTopicPartitions set, the
// broker creates __consumer_offsets (internal in Metadata) and writes each
// commit there as Kafka would: an OffsetCommitKey v1 and value v3, in the
// group's partition by Kafka's hash.
func TestOffsetsTopicCopiesCommits(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) { c.OffsetsTopicPartitions = 4 })
	brokertest.CreateTopic(t, b.Addr, "work", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := brokertest.Admin(t, b.Addr)
	waitFor(t, "the offsets topic", func() bool {
		resp := metadataOnConn(t, b.Addr)
		for _, tp := range resp.Topics {
			if *tp.Topic == offsetlog.Topic {
				require.True(t, tp.IsInternal)
				require.Len(t, tp.Partitions, 4)
				return true
			}
		}
		return false
	})
	type commit struct {
		group string
		part  int32
		at    int64
	}
	commitOffset := func(c commit) {
		t.Helper()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "work", Partition: c.part, At: c.at, LeaderEpoch: -1, Metadata: "m"})
		resp, err := adm.CommitOffsets(ctx, c.group, offs)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	cl := brokertest.Client(t, b.Addr, kgo.ConsumeTopics(offsetlog.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	read := func(wait time.Duration) []commit {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, wait)
		defer pcancel()
		var got []commit
		fs := cl.PollFetches(pctx)
		fs.EachRecord(func(r *kgo.Record) {
			k := kmsg.NewOffsetCommitKey()
			require.NoError(t, k.ReadFrom(r.Key))
			require.Equal(t, int16(1), k.Version)
			require.Equal(t, "work", k.Topic)
			v := kmsg.NewOffsetCommitValue()
			require.NoError(t, v.ReadFrom(r.Value))
			require.Equal(t, int16(3), v.Version)
			require.Equal(t, "m", v.Metadata)
			require.InDelta(t, time.Now().UnixMilli(), v.CommitTimestamp, float64(time.Minute.Milliseconds()))
			require.Equal(t, offsetlog.Partition(k.Group, 4), r.Partition, "group %s", k.Group)
			got = append(got, commit{k.Group, k.Partition, v.Offset})
		})
		return got
	}
	// The feed starts once the broker sees the topic: commit a warm-up
	// group's moving offset until its records come through.
	for i := int64(1); len(read(100*time.Millisecond)) == 0; i++ {
		require.Less(t, i, int64(200), "no commit record in the offsets topic")
		commitOffset(commit{"warm-up", 0, i})
	}
	commits := []commit{{"billing", 0, 5}, {"billing", 1, 7}, {"search", 0, 3}, {"billing", 0, 9}}
	for _, c := range commits {
		commitOffset(c)
	}
	var got []commit
	for deadline := time.Now().Add(20 * time.Second); len(got) < len(commits) && time.Now().Before(deadline); {
		for _, c := range read(time.Second) {
			if c.group != "warm-up" {
				got = append(got, c)
			}
		}
	}
	// Per group, in commit order (one partition of the topic each).
	byGroup := map[string][]commit{}
	for _, c := range got {
		byGroup[c.group] = append(byGroup[c.group], c)
	}
	require.Equal(t, []commit{{"billing", 0, 5}, {"billing", 1, 7}, {"billing", 0, 9}}, byGroup["billing"])
	require.Equal(t, []commit{{"search", 0, 3}}, byGroup["search"])
}
