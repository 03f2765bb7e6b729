package broker_test

// Share groups (KIP-932) with franz-go's share consumer: jobs of uneven
// length on one partition spread over eight consumers (against a classic
// group on the same topic), a consumer that vanishes while holding
// records, a record that always fails going to the dead-letter topic,
// the protocol's errors for bad input, and leader failover during
// acknowledgements.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/functions/dlqconsole"
	"github.com/stratamq/strata/pkg/objstore/objstoretest"
	"github.com/stratamq/strata/pkg/objstore/s3store"
	"github.com/stratamq/strata/pkg/retry"
)

// setGroupConfigs sets group configs with IncrementalAlterConfigs on the
// GROUP resource.
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	for _, r := range resp.Resources {
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "group configs of %s", group)
	}
}

// produceKeys produces n records keyed 0..n-1 to one partition.
func produceKeys(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("job")}, nil)
	}
	require.NoError(t, cl.Flush(context.Background()))
}

// shareStart is the group's share start offset of partition 0.
func shareStart(t *testing.T, cl *kgo.Client, group, topic string) int64 {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
		return -2
	}
	return resp.Groups[0].Topics[0].Partitions[0].StartOffset
}

// jobTime is how long record key takes to handle: 1-100 ms, fixed per key
// so the share and the classic run do the same work.
func jobTime(key int) time.Duration {
	r := rand.New(rand.NewPCG(uint64(key), 42))
	return time.Duration(1+r.IntN(100)) * time.Millisecond
}

func TestShareGroupUnevenJobs(t *testing.T) {
	const n, consumers = 300, 8
	b := brokertest.Start(t)
	admin := brokertest.Client(t, b.Addr)
	brokertest.CreateTopic(t, b.Addr, "jobs", 1, nil)
	produceKeys(t, admin, "jobs", n)
	var total time.Duration
	for k := range n {
		total += jobTime(k)
	}

	// Share group: eight consumers on one partition, two records at a time.
	setGroupConfigs(t, admin, "workers", "share.auto.offset.reset", "earliest")
	var mu sync.Mutex
	accepted := map[int]int{}
	perConsumer := make([]int, consumers)
	done := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := brokertest.Client(t, b.Addr, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ShareMaxRecords(2),
				kgo.FetchMaxWait(200*time.Millisecond))
			defer cl.Close()
			for ctx.Err() == nil {
				fs := cl.PollRecords(ctx, 2)
				for _, r := range fs.Records() {
					k, _ := strconv.Atoi(string(r.Key))
					time.Sleep(jobTime(k))
					r.Ack(kgo.AckAccept)
					mu.Lock()
					accepted[k]++
					perConsumer[c]++
					if len(accepted) == n {
						once.Do(func() { close(done) })
					}
					mu.Unlock()
				}
				if len(fs.Records()) > 0 {
					fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
					_ = cl.FlushAcks(fctx)
					fcancel()
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		mu.Lock()
		t.Fatalf("share group handled %d of %d records", len(accepted), n)
	}
	shareTook := time.Since(start)
	waitFor(t, "every acknowledgement stored (share start offset at the end)", func() bool { return shareStart(t, admin, "workers", "jobs") == n })
	writes, acked := shareStats(t, b)
	t.Logf("share state writes: %.0f for %.0f acknowledged records (%.0f per 1,000; acknowledgements of 2 records from 8 consumers)", writes, acked, float64(writes)*1000/float64(acked))
	cancel()
	wg.Wait()
	mu.Lock()
	for k := range n {
		require.Equal(t, 1, accepted[k], "record %d acknowledged %d times", k, accepted[k])
	}
	for c, got := range perConsumer {
		require.Greater(t, got*100, n*5, "consumer %d handled %d of %d records (at most 5%%)", c, got, n)
	}
	mu.Unlock()

	// Classic group: eight members, one partition: one of them works.
	var classicDone atomic.Int64
	cdone := make(chan struct{})
	var conce sync.Once
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	start = time.Now()
	var cwg sync.WaitGroup
	for range consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			cl := brokertest.Client(t, b.Addr, kgo.ConsumerGroup("classic-workers"), kgo.ConsumeTopics("jobs"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
			defer cl.Close()
			for cctx.Err() == nil {
				fs := cl.PollRecords(cctx, 2)
				for _, r := range fs.Records() {
					k, _ := strconv.Atoi(string(r.Key))
					time.Sleep(jobTime(k))
					if classicDone.Add(1) >= n {
						conce.Do(func() { close(cdone) })
					}
				}
			}
		}()
	}
	select {
	case <-cdone:
	case <-time.After(90 * time.Second):
		t.Fatalf("classic group handled %d of %d records", classicDone.Load(), n)
	}
	classicTook := time.Since(start)
	ccancel()
	cwg.Wait()
	t.Logf("%d jobs of 1-100 ms (%v of work) on one partition: share group of %d %v (per consumer %v), classic group %v: %.1fx faster",
		n, total.Round(time.Millisecond), consumers, shareTook.Round(time.Millisecond), perConsumer, classicTook.Round(time.Millisecond),
		float64(classicTook)/float64(shareTook))
}

// shareFetchRaw is one ShareFetch of a member's session on broker 0.
func shareFetchRaw(t *testing.T, cl *kgo.Client, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	t.Helper()
	resp, err := req.RequestWith(context.Background(), cl.Broker(0))
	require.NoError(t, err)
	return resp
}

// rawMember joins group as a share member and returns its id and the
// topic's id.
func shareRawMember(t *testing.T, cl *kgo.Client, group, topic string) (string, [16]byte) {
	t.Helper()
	member := "raw-" + strconv.Itoa(rand.IntN(1<<30))
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, member, 0, []string{topic}
	resp, err := hb.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	require.NotNil(t, resp.Assignment)
	require.Len(t, resp.Assignment.TopicPartitions, 1)
	return member, resp.Assignment.TopicPartitions[0].TopicID
}

func shareFetchReq(group, member string, epoch int32, topicID [16]byte, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	req.MaxWaitMillis, req.MaxBytes, req.MaxRecords = 500, 1<<20, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.AcknowledgementBatches = 0, 1<<20, acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// A member that vanishes (its connection closes, no final ShareAcknowledge,
// as after kill -9) keeps its records until their locks expire; then
// another member gets them with the delivery count raised, none lost.
func TestShareGroupVanishedMemberRedelivered(t *testing.T) {
	const n = 20
	b := brokertest.Start(t)
	admin := brokertest.Client(t, b.Addr)
	brokertest.CreateTopic(t, b.Addr, "held", 1, nil)
	produceKeys(t, admin, "held", n)
	setGroupConfigs(t, admin, "holders", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "2000")

	raw := brokertest.Client(t, b.Addr)
	member, tid := shareRawMember(t, raw, "holders", "held")
	resp := shareFetchRaw(t, raw, shareFetchReq("holders", member, 0, tid))
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	require.EqualValues(t, 2000, resp.AcquisitionLockTimeoutMillis)
	acquiredAt := time.Now()
	var held int64
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			for _, ar := range p.AcquiredRecords {
				require.EqualValues(t, 1, ar.DeliveryCount)
				held += ar.LastOffset - ar.FirstOffset + 1
			}
		}
	}
	require.EqualValues(t, n, held, "the first member acquired every record")
	raw.Close() // vanishes holding them
	backlog := func(name string) float64 {
		return sum(gather(t, b.Gatherer()), name, map[string]string{"group": "holders", "topic": "held", "partition": "0"})
	}
	require.EqualValues(t, n, backlog("strata_share_records_acquired"), "backlog while held")
	require.EqualValues(t, 0, backlog("strata_share_records_available"), "backlog while held")

	cl := brokertest.Client(t, b.Addr, kgo.ShareGroup("holders"), kgo.ConsumeTopics("held"), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[int]int32{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < n && ctx.Err() == nil {
		for _, r := range cl.PollFetches(ctx).Records() {
			k, _ := strconv.Atoi(string(r.Key))
			if _, dup := got[k]; !dup {
				got[k] = r.DeliveryCount()
			}
			// The broker never releases a lock early.
			require.GreaterOrEqual(t, time.Since(acquiredAt), 2*time.Second, "record %d redelivered before its lock expired", k)
			r.Ack(kgo.AckAccept)
		}
	}
	require.Len(t, got, n, "records lost")
	for k, dc := range got {
		require.EqualValues(t, 2, dc, "record %d: delivery count", k)
	}
	waitFor(t, "backlog empty", func() bool {
		return backlog("strata_share_records_acquired") == 0 && backlog("strata_share_records_available") == 0
	})
}

// A record that always fails is archived after exactly
// share.delivery.count.limit deliveries and lands in <topic>.dlq with
// Strata's dead-letter headers; the others are acknowledged.
func TestShareGroupPoisonRecordDeadLettered(t *testing.T) {
	const n, limit = 10, 3
	b := brokertest.Start(t)
	admin := brokertest.Client(t, b.Addr)
	brokertest.CreateTopic(t, b.Addr, "orders", 1, nil)
	produceKeys(t, admin, "orders", n)
	setGroupConfigs(t, admin, "order-workers", "share.auto.offset.reset", "earliest",
		"share.delivery.count.limit", strconv.Itoa(limit), "errors.deadletterqueue.enable", "true")

	cl := brokertest.Client(t, b.Addr, kgo.ShareGroup("order-workers"), kgo.ConsumeTopics("orders"), kgo.FetchMaxWait(200*time.Millisecond))
	deliveries := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for shareStart(t, admin, "order-workers", "orders") < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, r := range fs.Records() {
			if string(r.Key) == "4" {
				deliveries++
				require.LessOrEqual(t, r.DeliveryCount(), int32(limit))
				r.Ack(kgo.AckRelease) // it always fails
				continue
			}
			r.Ack(kgo.AckAccept)
		}
		if len(fs.Records()) > 0 {
			require.NoError(t, cl.FlushAcks(ctx))
		}
	}
	require.Equal(t, limit, deliveries, "deliveries of the failing record")
	require.EqualValues(t, 0, sum(gather(t, b.Gatherer()), "strata_share_records_available", map[string]string{"group": "order-workers"}))

	dlq := brokertest.Client(t, b.Addr, kgo.ConsumeTopics("orders.dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	var letter *kgo.Record
	for letter == nil && ctx.Err() == nil {
		for _, r := range dlq.PollFetches(ctx).Records() {
			letter = r
		}
	}
	require.NotNil(t, letter, "no dead letter")
	require.Equal(t, "4", string(letter.Key))
	require.Equal(t, "job", string(letter.Value))
	st, ok, err := retry.Parse(letter.Headers)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, limit, st.Attempts)
	require.Equal(t, "orders", st.OriginTopic)
	require.EqualValues(t, 0, st.OriginPartition)
	require.EqualValues(t, 4, st.OriginOffset)
	require.NoError(t, st.CheckOrigin("orders.dlq"))
	require.Contains(t, st.LastError, "share.delivery.count.limit")

	// The DLQ console lists it and replays it to its origin partition,
	// where the share group delivers it afresh.
	console, err := dlqconsole.New(dlqconsole.Options{Seeds: []string{b.Addr}, BasePath: "/console"})
	require.NoError(t, err)
	defer dlqconsole.Close(console)
	srv := httptest.NewServer(console)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/console/api/topics/orders.dlq/replay", "application/json",
		strings.NewReader(fmt.Sprintf(`{"letters":[{"partition":%d,"offset":%d}]}`, letter.Partition, letter.Offset)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "replay: %s", body)
	var replayed *kgo.Record
	for replayed == nil && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, r := range fs.Records() {
			r.Ack(kgo.AckAccept)
			if string(r.Key) == "4" {
				replayed = r
			}
		}
		if len(fs.Records()) > 0 {
			require.NoError(t, cl.FlushAcks(ctx))
		}
	}
	require.NotNil(t, replayed, "the replayed letter reached the share group")
	require.EqualValues(t, 1, replayed.DeliveryCount(), "a new record: its first delivery")
	rst, ok, err := retry.Parse(replayed.Headers)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, rst.Replays, "the replay is recorded in its headers")
	require.EqualValues(t, 4, rst.OriginOffset)
}

// Bad input gets Kafka's error codes.
func TestShareGroupBadInput(t *testing.T) {
	b := brokertest.Start(t)
	admin := brokertest.Client(t, b.Addr)
	brokertest.CreateTopic(t, b.Addr, "bad", 1, nil)
	produceKeys(t, admin, "bad", 5)
	setGroupConfigs(t, admin, "bad-group", "share.auto.offset.reset", "earliest")
	code := func(resp *kmsg.ShareFetchResponse) int16 { return resp.ErrorCode }
	ackCode := func(resp *kmsg.ShareFetchResponse) int16 { return resp.Topics[0].Partitions[0].AcknowledgeErrorCode }

	// Heartbeats.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch = "bad-group", "m", 0
	resp, err := hb.RequestWith(context.Background(), admin)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode, "a join without a subscription")
	hb.MemberEpoch, hb.SubscribedTopicNames = 3, []string{"bad"}
	resp, err = hb.RequestWith(context.Background(), admin)
	require.NoError(t, err)
	require.Equal(t, kerr.GroupIDNotFound.Code, resp.ErrorCode, "a heartbeat to a group that does not exist")
	a, tid := shareRawMember(t, admin, "bad-group", "bad")
	hb.MemberID, hb.MemberEpoch = "stranger", 1
	resp, _ = hb.RequestWith(context.Background(), admin)
	require.Equal(t, kerr.UnknownMemberID.Code, resp.ErrorCode)
	hb.MemberID, hb.MemberEpoch = a, 99
	resp, _ = hb.RequestWith(context.Background(), admin)
	require.Equal(t, kerr.FencedMemberEpoch.Code, resp.ErrorCode)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "bad", Partition: 0, At: 1, LeaderEpoch: -1})
	_, err = kadm.NewClient(admin).CommitOffsets(context.Background(), "classic-one", offs)
	require.NoError(t, err)
	hb.GroupID, hb.MemberID, hb.MemberEpoch = "classic-one", "x", 0
	resp, _ = hb.RequestWith(context.Background(), admin)
	require.Equal(t, kerr.GroupIDNotFound.Code, resp.ErrorCode, "a share heartbeat to a classic group")

	// Sessions.
	require.Equal(t, kerr.ShareSessionNotFound.Code, code(shareFetchRaw(t, admin, shareFetchReq("bad-group", a, 1, tid))))
	first := shareFetchRaw(t, admin, shareFetchReq("bad-group", a, 0, tid))
	require.Zero(t, first.ErrorCode)
	require.Len(t, first.Topics[0].Partitions[0].AcquiredRecords, 1)
	require.Equal(t, kerr.InvalidShareSessionEpoch.Code, code(shareFetchRaw(t, admin, shareFetchReq("bad-group", a, 5, tid))))
	accept := func(f, l int64) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
		return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: f, LastOffset: l, AcknowledgeTypes: []int8{1}}
	}
	require.Equal(t, kerr.InvalidRequest.Code, code(shareFetchRaw(t, admin, shareFetchReq("bad-group", a, 0, tid, accept(0, 0)))),
		"acknowledgements opening a session")

	// Acknowledgements: another member's records, overlapping ranges.
	other, _ := shareRawMember(t, admin, "bad-group", "bad")
	o0 := shareFetchRaw(t, admin, shareFetchReq("bad-group", other, 0, tid))
	require.Zero(t, o0.ErrorCode)
	require.Equal(t, kerr.InvalidRecordState.Code, ackCode(shareFetchRaw(t, admin, shareFetchReq("bad-group", other, 1, tid, accept(0, 0)))),
		"acknowledging another member's record")
	require.Equal(t, kerr.InvalidRequest.Code, ackCode(shareFetchRaw(t, admin, shareFetchReq("bad-group", a, 1, tid, accept(0, 2), accept(1, 3)))),
		"overlapping acknowledgement batches")
	ok := shareFetchRaw(t, admin, shareFetchReq("bad-group", a, 2, tid, accept(0, 4)))
	require.Zero(t, ok.ErrorCode)
	require.Zero(t, ackCode(ok))

	// ShareAcknowledge cannot open a session.
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("bad-group"), kmsg.StringPtr(a), 0
	aresp, err := ack.RequestWith(context.Background(), admin.Broker(0))
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidShareSessionEpoch.Code, aresp.ErrorCode)
}

// The partition's leader shuts down while consumers acknowledge: the new
// leader continues from the stored state, so a record whose
// acknowledgement was answered is never delivered again, and every record
// is acknowledged.
func TestShareGroupLeaderFailover(t *testing.T) { testShareFailover(t, false) }

// The group's coordinator shuts down instead: its shard moves, the
// membership is read from the metastore, members keep their
// assignments, and the same holds.
func TestShareGroupCoordinatorFailover(t *testing.T) { testShareFailover(t, true) }

func testShareFailover(t *testing.T, coordinator bool) {
	const n, consumers = 1000, 3
	bs := startClusterWith(t, 3)
	addrs := []string{bs[0].Addr, bs[1].Addr, bs[2].Addr}
	admin := brokertest.Client(t, bs[0].Addr, kgo.SeedBrokers(addrs...))
	brokertest.CreateTopicRF(t, bs[0].Addr, "failover", 1, 3, nil)
	produceKeys(t, admin, "failover", n)
	md, err := kadm.NewClient(admin).Metadata(context.Background(), "failover")
	require.NoError(t, err)
	leader := md.Topics["failover"].Partitions[0].Leader
	group, victim, what := "failover-workers", leader, "partition leader"
	if coordinator {
		// A group coordinated by another broker than the leader (the
		// controller spreads the shards over the brokers as they join).
		waitFor(t, "a group coordinated away from the leader", func() bool {
			for i := range 64 {
				g := fmt.Sprintf("failover-workers-%d", i)
				c, ok := kadm.NewClient(admin).FindGroupCoordinators(context.Background(), g)[g]
				if ok && c.Err == nil && c.NodeID != leader {
					group, victim, what = g, c.NodeID, "group coordinator"
					return true
				}
			}
			time.Sleep(200 * time.Millisecond)
			return false
		})
	}
	setGroupConfigs(t, admin, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "3000")

	var mu sync.Mutex
	confirmed := map[int]bool{} // acknowledged, and the broker said so
	accepted := map[int]bool{}
	var violations []string
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var failed atomic.Bool // an acknowledgement of this round was refused or not delivered
			cl := brokertest.Client(t, bs[0].Addr, kgo.SeedBrokers(addrs...), kgo.ShareGroup(group),
				kgo.ConsumeTopics("failover"), kgo.ShareMaxRecords(20), kgo.FetchMaxWait(200*time.Millisecond),
				kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
					if !rs.Ok() {
						failed.Store(true)
					}
				}))
			defer cl.Close()
			for ctx.Err() == nil {
				recs := cl.PollRecords(ctx, 20).Records()
				var keys []int
				for _, r := range recs {
					k, _ := strconv.Atoi(string(r.Key))
					mu.Lock()
					if confirmed[k] {
						violations = append(violations, fmt.Sprintf("record %d delivered again (count %d) after its acknowledgement was answered", k, r.DeliveryCount()))
					}
					mu.Unlock()
					time.Sleep(time.Millisecond)
					r.Ack(kgo.AckAccept)
					keys = append(keys, k)
				}
				if len(keys) == 0 {
					continue
				}
				failed.Store(false)
				fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
				err := cl.FlushAcks(fctx)
				fcancel()
				if failed.Load() {
					err = errors.New("an acknowledgement failed")
				}
				mu.Lock()
				for _, k := range keys {
					accepted[k] = true
					if err == nil {
						confirmed[k] = true
					}
				}
				mu.Unlock()
			}
		}()
	}
	count := func(m map[int]bool) int { mu.Lock(); defer mu.Unlock(); return len(m) }
	waitFor(t, "a third acknowledged", func() bool { return count(confirmed) >= n/3 })
	for _, b := range bs {
		if b.Cfg.NodeID == victim {
			require.NoError(t, b.Broker.Close())
		}
	}
	t.Logf("closed broker %d (the %s; leader %d) after %d acknowledged", victim, what, leader, count(confirmed))
	for count(accepted) < n && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, violations)
	require.Len(t, accepted, n, "records never acknowledged")
}

// The metastore cost of acknowledgements: consumers acknowledging whole
// polls cost a handful of writes per 1,000 records (group commit); the
// bound is loose, the number is logged.
func TestShareGroupWritesPerThousandAcks(t *testing.T) {
	const n, consumers = 5000, 4
	b := brokertest.Start(t)
	admin := brokertest.Client(t, b.Addr)
	brokertest.CreateTopic(t, b.Addr, "bulk", 1, nil)
	for i := range n {
		admin.Produce(context.Background(), &kgo.Record{Topic: "bulk", Value: []byte(strconv.Itoa(i))}, nil)
	}
	require.NoError(t, admin.Flush(context.Background()))
	setGroupConfigs(t, admin, "bulk-workers", "share.auto.offset.reset", "earliest")
	var got atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := brokertest.Client(t, b.Addr, kgo.ShareGroup("bulk-workers"), kgo.ConsumeTopics("bulk"), kgo.FetchMaxWait(200*time.Millisecond))
			defer cl.Close()
			for ctx.Err() == nil && shareStart(t, admin, "bulk-workers", "bulk") < n {
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				got.Add(int64(len(cl.PollFetches(pctx).Records()))) // the next poll accepts them
				pcancel()
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, n, shareStart(t, admin, "bulk-workers", "bulk"), "not every record acknowledged")
	writes, acked := shareStats(t, b)
	perK := float64(writes) * 1000 / float64(acked)
	t.Logf("share state writes: %.0f for %.0f acknowledged records (%.1f per 1,000), %d deliveries", writes, acked, perK, got.Load())
	require.Less(t, perK, 100.0)
}

// shareStats reads a broker's share state writes and acknowledged
// offsets from its metrics.
func shareStats(t *testing.T, b *brokertest.Broker) (writes, acked float64) {
	s := gather(t, b.Gatherer())
	return sum(s, "strata_share_state_writes_total", nil), sum(s, "strata_share_acknowledged_total", nil)
}

// A share group that starts at the earliest offset of a topic whose old
// segments are only in S3 reads them from the tier.
func TestShareGroupReadsTheTier(t *testing.T) {
	const n = 500
	s3 := objstoretest.StartS3(t, "")
	tc := startTiered(t, s3.Store(t, s3store.Options{}))
	addr := tc.brokers[0].Addr
	brokertest.CreateTopicRF(t, addr, "archive", 1, 3, map[string]*string{
		"segment.bytes": kadm.StringPtr("2048"), "local.retention.ms": kadm.StringPtr("0"),
	})
	cl := brokertest.Client(t, addr, kgo.DefaultProduceTopic("archive"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("%080d", i))}).FirstErr())
	}
	adm := brokertest.Admin(t, addr)
	waitFor(t, "most of the log only in S3", func() bool {
		resp, err := adm.ListOffsetsAfterMilli(ctx, -4, "archive") // local log start
		if err != nil {
			return false
		}
		o, _ := resp.Lookup("archive", 0)
		return o.Offset > 300
	})
	setGroupConfigs(t, cl, "archivists", "share.auto.offset.reset", "earliest")
	sc := brokertest.Client(t, addr, kgo.ShareGroup("archivists"), kgo.ConsumeTopics("archive"), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[int]bool{}
	for len(got) < n && ctx.Err() == nil {
		for _, r := range sc.PollFetches(ctx).Records() {
			k, _ := strconv.Atoi(string(r.Key))
			got[k] = true
			r.Ack(kgo.AckAccept)
		}
	}
	require.Len(t, got, n, "records read")
}

// With share.isolation.level=read_committed a share group gets the
// committed transactions' records only; aborted ones and the markers are
// archived undelivered, so the share start offset passes them.
func TestShareGroupReadCommitted(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "txn-share", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod := brokertest.Client(t, b.Addr, kgo.TransactionalID("txn-share-p"), kgo.DefaultProduceTopic("txn-share"))
	send := func(tag string, n int, commit bool) {
		require.NoError(t, prod.BeginTransaction())
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("%s-%d", tag, i))}, nil)
		}
		require.NoError(t, prod.Flush(ctx))
		require.NoError(t, prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	send("c1", 10, true)
	send("a1", 10, false)
	send("c2", 10, true)
	admin := brokertest.Client(t, b.Addr)
	setGroupConfigs(t, admin, "committed-readers", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")
	sc := brokertest.Client(t, b.Addr, kgo.ShareGroup("committed-readers"), kgo.ConsumeTopics("txn-share"), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[string]bool{}
	for shareStart(t, admin, "committed-readers", "txn-share") < 33 && ctx.Err() == nil { // 30 records, 3 markers
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		for _, r := range sc.PollFetches(pctx).Records() {
			got[string(r.Key)] = true
			r.Ack(kgo.AckAccept)
		}
		pcancel()
	}
	require.Len(t, got, 20, "records delivered: %v", got)
	for k := range got {
		require.NotContains(t, k, "a1", "an aborted record was delivered")
	}
}
