package broker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// TestQuietPartitionsSeeEveryChange: a follower's incremental fetches
// skip the partitions they found quiet without looking at them, and learn
// of a change to one only from the leader's change log (the periodic full
// look is set to an hour here). Each kind of change must reach the next
// fetches: records appended, a high watermark moved by another replica,
// DeleteRecords and retention moving the log start.
//
// The follower is the test, speaking for a real broker whose own link to
// the leader is cut (as in TestFollowerFetchOffsetsAreChecked).
func TestQuietPartitionsSeeEveryChange(t *testing.T) {
	meta := brokertest.NewMeta(t)
	links := brokertest.NewLinks()
	var bs []*brokertest.Broker
	for id := int32(0); id < 3; id++ {
		bs = append(bs, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.DialPeer = meta, id, links.Dialer(strconv.Itoa(int(id)))
			c.ReplicaLagMax = time.Minute                              // a cut follower stays in the ISR
			c.ReplicaBalanceInterval, c.LeaderRebalanceInterval = 0, 0 // leaders stay put
			c.MaintenanceInterval = 20 * time.Millisecond
			broker.SetQuietFullLook(c, time.Hour)
		}))
	}
	waitFor(t, "three brokers registered", func() bool { return len(metadataOnConn(t, bs[0].Addr).Brokers) == 3 })
	cl := brokertest.Client(t, bs[0].Addr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), namedFetches())
	createTopicOn(t, cl, "noted", 6, 3)
	str := func(s string) *string { return &s }
	createTopicOnWithConfig(t, cl, "expiring", 1, 3, map[string]*string{
		"segment.bytes": str("1024"), "retention.ms": str("2000"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The leader of expiring-0 and the partitions it leads; the test
	// speaks for one of its followers (faked) while the other (real)
	// replicates.
	type tp struct {
		topic string
		part  int32
	}
	md := metadataVia(t, cl, "noted", "expiring")
	leaderOf, epochOf := map[tp]int32{}, map[tp]int32{}
	for _, mt := range md.Topics {
		for _, mp := range mt.Partitions {
			leaderOf[tp{*mt.Topic, mp.Partition}], epochOf[tp{*mt.Topic, mp.Partition}] = mp.Leader, mp.LeaderEpoch
		}
	}
	lid := leaderOf[tp{"expiring", 0}]
	fake, other := (lid+1)%3, (lid+2)%3
	leader := bs[lid]
	var led []tp
	for k, l := range leaderOf {
		if l == lid {
			led = append(led, k)
		}
	}
	var noted tp // a "noted" partition the leader leads
	for _, k := range led {
		if k.topic == "noted" {
			noted = k
		}
	}
	require.NotEmpty(t, noted.topic, "the leader of expiring-0 leads no partition of noted")
	expiring := tp{"expiring", 0}
	links.Cut(strconv.Itoa(int(fake)), leader.Addr)

	// The fake follower's state: what it holds and what it was told.
	type state struct{ offset, logStart, hwm int64 }
	held := map[tp]*state{}
	sent := map[tp]state{}
	for _, k := range led {
		leo, _, _, _ := broker.LocalLog(bs[fake].Broker, k.topic, k.part)
		held[k] = &state{offset: leo, logStart: 0, hwm: -1}
	}
	var sessionID, sessionEpoch int32
	lb := cl.Broker(int(lid))
	fetch := func() map[tp]kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = fake, 1<<20, 0
		req.SessionID, req.SessionEpoch = sessionID, sessionEpoch
		byTopic := map[string]int{}
		for _, k := range led {
			h := held[k]
			if s, ok := sent[k]; ok && sessionEpoch > 0 && s.offset == h.offset && s.logStart == h.logStart {
				continue // unchanged: the session has it
			}
			sent[k] = *h
			i, ok := byTopic[k.topic]
			if !ok {
				i = len(req.Topics)
				byTopic[k.topic] = i
				req.Topics = append(req.Topics, kmsg.FetchRequestTopic{Topic: k.topic})
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, kmsg.FetchRequestTopicPartition{
				Partition: k.part, FetchOffset: h.offset, LogStartOffset: h.logStart,
				PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: epochOf[k], LastFetchedEpoch: -1,
			})
		}
		raw, err := lb.RetriableRequest(ctx, req)
		require.NoError(t, err)
		resp := raw.(*kmsg.FetchResponse)
		require.Zero(t, resp.ErrorCode)
		if sessionEpoch == 0 {
			require.NotZero(t, resp.SessionID, "a follower's fetch gets a session")
			sessionID = resp.SessionID
		}
		sessionEpoch++
		got := map[tp]kmsg.FetchResponseTopicPartition{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				k := tp{rt.Topic, rp.Partition}
				require.Zero(t, rp.ErrorCode, "%v", k)
				got[k] = rp
				h := held[k]
				if rp.LogStartOffset > h.logStart {
					h.logStart = rp.LogStartOffset
					h.offset = max(h.offset, h.logStart)
				}
				h.offset = max(h.offset, batchesEnd(t, rp.RecordBatches))
				h.hwm = rp.HighWatermark
			}
		}
		return got
	}
	// settle fetches until an answer is empty: every partition is quiet,
	// noted, and the notes trusted.
	settle := func() {
		t.Helper()
		for i := 0; ; i++ {
			require.Less(t, i, 200, "the session never went quiet")
			if len(fetch()) == 0 && i > 2 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// until fetches until cond holds of what the answers told.
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			fetch()
			if cond() {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s never reached the follower's fetches", what)
			time.Sleep(10 * time.Millisecond)
		}
	}
	produce := func(k tp, n int) {
		t.Helper()
		for range n {
			r := &kgo.Record{Topic: k.topic, Partition: k.part, Value: make([]byte, 700)}
			require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
		}
	}
	settle()
	h := held[noted]

	// Records appended, then committed once the other follower has them.
	leo := h.offset
	produce(noted, 1)
	until("an append", func() bool { return h.offset == leo+1 })
	until("the commit", func() bool { return h.hwm == leo+1 })
	settle()

	// The high watermark moved by the other follower alone: it is behind
	// (cut off) while the fake follower fetches the new record, then
	// catches up.
	links.Cut(strconv.Itoa(int(other)), leader.Addr)
	produce(noted, 1)
	until("an append", func() bool { return h.offset == leo+2 })
	settle()
	require.Equal(t, leo+1, h.hwm, "committed only once the cut follower has it")
	links.Restore(strconv.Itoa(int(other)), leader.Addr)
	until("a high watermark move", func() bool { return h.hwm == leo+2 })
	settle()

	// DeleteRecords moves the log start (it may wait for the followers to
	// follow, so it runs beside the fetches).
	deleted := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 10000
		req.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: noted.topic,
			Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: noted.part, Offset: leo + 1}}}}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
		deleted <- err
	}()
	until("DeleteRecords", func() bool { return h.logStart == leo+1 })
	require.NoError(t, <-deleted)
	settle()

	// Retention moves the log start: three records, each in a segment of
	// its own; the closed two expire after retention.ms.
	e := held[expiring]
	produce(expiring, 3)
	until("appends", func() bool { return e.offset == 3 })
	settle()
	require.Zero(t, e.logStart)
	until("retention", func() bool { return e.logStart >= 2 })
}
