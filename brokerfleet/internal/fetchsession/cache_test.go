package fetchsession

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/clock"
)

var (
	consumer = Owner{Principal: "User:alice", Replica: -1}
	follower = Owner{Principal: "User:broker", Replica: 2}
)

// fetch builds a request of session id and epoch listing topic's
// partitions at offset, forgetting forget.
func fetch(id, epoch int32, topic string, parts []int32, offset int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = 12, id, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answer is the response a broker would build for f: every partition
// with high watermark hwm, records for those in data.
func answer(f *Fetch, hwm int64, data ...int32) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	for _, p := range f.Parts {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != p.Topic {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = p.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LogStartOffset = p.Partition, hwm, 0
		for _, d := range data {
			if d == p.Partition {
				rp.RecordBatches = []byte("batch")
			}
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return resp
}

func partitionsOf(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s-%d", t.Topic, p.Partition))
		}
	}
	return out
}

func order(f *Fetch) []int32 {
	var out []int32
	for _, p := range f.Parts {
		out = append(out, p.Partition)
	}
	return out
}

func TestSessionLifecycle(t *testing.T) {
	c := New(Options{Slots: 10})
	// A full fetch with epoch 0 creates a session and is answered whole.
	f, err := c.Begin(fetch(0, 0, "t", []int32{0, 1, 2}, 5), consumer)
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, 2}, order(f))
	resp := answer(f, 10)
	f.Finish(resp)
	id := resp.SessionID
	require.NotZero(t, id)
	require.Len(t, partitionsOf(resp), 3, "a full answer keeps every partition")

	// An idle incremental fetch lists nothing, reads everything, and is
	// answered with nothing.
	f, err = c.Begin(fetch(id, 1, "t", nil, 0), consumer)
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, 2}, order(f))
	require.EqualValues(t, 5, f.Parts[1].FetchOffset, "the offsets the session holds")
	resp = answer(f, 10)
	require.False(t, f.News(resp))
	f.Finish(resp)
	require.Equal(t, id, resp.SessionID)
	require.Empty(t, resp.Topics)

	// A moved high watermark, records, or an error are news.
	f, err = c.Begin(fetch(id, 2, "t", []int32{1}, 7), consumer)
	require.NoError(t, err)
	require.EqualValues(t, 7, f.Parts[1].FetchOffset, "the updated offset")
	resp = answer(f, 10, 1)
	resp.Topics[0].Partitions[2].HighWatermark = 11
	require.True(t, f.News(resp))
	f.Finish(resp)
	require.Equal(t, []string{"t-1", "t-2"}, partitionsOf(resp))

	// Partitions that returned records go last next time.
	f, err = c.Begin(fetch(id, 3, "t", nil, 0), consumer)
	require.NoError(t, err)
	require.Equal(t, []int32{0, 2, 1}, order(f))
	resp = answer(f, 10)
	resp.Topics[0].Partitions[1].HighWatermark = 11
	resp.Topics[0].Partitions[0].ErrorCode = 6
	f.Finish(resp)
	require.Equal(t, []string{"t-0"}, partitionsOf(resp), "an error is always answered")

	// The error cleared: the partition is answered again, even unchanged.
	f, err = c.Begin(fetch(id, 4, "t", nil, 0), consumer)
	require.NoError(t, err)
	resp = answer(f, 10)
	resp.Topics[0].Partitions[1].HighWatermark = 11
	f.Finish(resp)
	require.Equal(t, []string{"t-0"}, partitionsOf(resp))

	// Added and forgotten partitions.
	f, err = c.Begin(fetch(id, 5, "t", []int32{3}, 0, 0, 2), consumer)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 3}, order(f))
	resp = answer(f, 10)
	f.Finish(resp)
	require.Equal(t, []string{"t-3"}, partitionsOf(resp), "a new partition is answered once")
	sessions, parts, _ := c.Stats()
	require.Equal(t, 1, sessions)
	require.Equal(t, 2, parts)

	// Errors: a wrong epoch, an unknown id, another owner.
	_, err = c.Begin(fetch(id, 5, "t", nil, 0), consumer)
	require.ErrorIs(t, err, ErrInvalidEpoch, "an epoch used before")
	_, err = c.Begin(fetch(id, 9, "t", nil, 0), consumer)
	require.ErrorIs(t, err, ErrInvalidEpoch)
	_, err = c.Begin(fetch(id+1, 6, "t", nil, 0), consumer)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = c.Begin(fetch(id, 6, "t", nil, 0), Owner{Principal: "User:mallory", Replica: -1})
	require.ErrorIs(t, err, ErrNotFound, "another principal's session does not exist for it")
	_, err = c.Begin(fetch(id, 6, "t", nil, 0), Owner{Principal: "User:alice", Replica: 3})
	require.ErrorIs(t, err, ErrNotFound, "nor for the same principal fetching as a replica")
	f, err = c.Begin(fetch(id, 0, "t", []int32{9}, 0), Owner{Principal: "User:mallory", Replica: -1})
	require.NoError(t, err)
	f.Finish(answer(f, 0))
	_, err = c.Begin(fetch(id, 6, "t", nil, 0), consumer)
	require.NoError(t, err, "a full fetch naming another's session does not close it")

	// Epoch -1 closes the session and is served sessionless.
	f, err = c.Begin(fetch(id, -1, "t", []int32{1}, 0), consumer)
	require.NoError(t, err)
	resp = answer(f, 10)
	f.Finish(resp)
	require.Zero(t, resp.SessionID)
	require.Len(t, partitionsOf(resp), 1)
	_, err = c.Begin(fetch(id, 7, "t", nil, 0), consumer)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestEpochZeroReplacesTheSessionNamed(t *testing.T) {
	c := New(Options{Slots: 10})
	f, err := c.Begin(fetch(0, 0, "t", []int32{0}, 0), follower)
	require.NoError(t, err)
	resp := answer(f, 0)
	f.Finish(resp)
	old := resp.SessionID
	f, err = c.Begin(fetch(old, 0, "t", []int32{0, 1}, 0), follower)
	require.NoError(t, err)
	resp = answer(f, 0)
	f.Finish(resp)
	require.NotEqual(t, old, resp.SessionID)
	sessions, parts, _ := c.Stats()
	require.Equal(t, 1, sessions, "the old session is closed")
	require.Equal(t, 2, parts)
	_, err = c.Begin(fetch(old, 1, "t", nil, 0), follower)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestSessionsOff(t *testing.T) {
	c := New(Options{})
	f, err := c.Begin(fetch(0, 0, "t", []int32{0}, 0), consumer)
	require.NoError(t, err)
	resp := answer(f, 0)
	f.Finish(resp)
	require.Zero(t, resp.SessionID, "no session: the client goes on sessionless")
	_, err = c.Begin(fetch(5, 1, "t", nil, 0), consumer)
	require.ErrorIs(t, err, ErrNotFound)
}

// create makes a session of o with n partitions at the fake time.
func create(t *testing.T, c *Cache, o Owner, n int) int32 {
	t.Helper()
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	f, err := c.Begin(fetch(0, 0, "t", parts, 0), o)
	require.NoError(t, err)
	resp := answer(f, 0)
	f.Finish(resp)
	return resp.SessionID
}

func alive(c *Cache, id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id] != nil
}

func TestEvictionRules(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	c := New(Options{Slots: 2, EvictAfter: time.Minute, Clock: clk})
	small := create(t, c, consumer, 1)
	big := create(t, c, consumer, 5)

	// Full, nothing stale or old: a new consumer session gets none, even
	// a larger one.
	require.Zero(t, create(t, c, consumer, 10))
	// A follower's session displaces the least valuable consumer one.
	f1 := create(t, c, follower, 1)
	require.NotZero(t, f1)
	require.False(t, alive(c, small))
	require.True(t, alive(c, big))

	// Once sessions are older than EvictAfter, a larger session of the
	// same kind displaces a smaller one, an equal one does not.
	clk.Advance(30 * time.Second)
	for _, s := range []struct {
		id int32
		o  Owner
	}{{big, consumer}, {f1, follower}} {
		f, err := c.Begin(fetch(s.id, 1, "t", nil, 0), s.o) // both in use: not stale
		require.NoError(t, err)
		f.Finish(answer(f, 0))
	}
	clk.Advance(40 * time.Second)
	require.Zero(t, create(t, c, consumer, 5), "not worth more than the consumer session of 5")
	require.NotZero(t, create(t, c, consumer, 6), "worth more than the old consumer session of 5")
	require.False(t, alive(c, big))
	require.True(t, alive(c, f1), "a consumer's session never displaces a follower's that is used")

	// A session idle for EvictAfter goes for anyone.
	clk.Advance(61 * time.Second)
	require.NotZero(t, create(t, c, consumer, 1))
	_, _, evictions := c.Stats()
	require.EqualValues(t, 3, evictions)
}

func TestPartitionBudget(t *testing.T) {
	c := New(Options{Slots: 10, MaxPartitions: 10})
	require.Zero(t, create(t, c, consumer, 11), "larger than the whole budget: sessionless")
	a := create(t, c, consumer, 6)
	require.NotZero(t, a)
	require.Zero(t, create(t, c, consumer, 5), "no room and nothing to displace")
	// Growing past the budget closes the session; the client starts over.
	_, err := c.Begin(fetch(a, 1, "u", []int32{0, 1, 2, 3, 4}, 0), consumer)
	require.ErrorIs(t, err, ErrNotFound)
	sessions, parts, _ := c.Stats()
	require.Zero(t, sessions)
	require.Zero(t, parts)
}

// TestQuietNotesAndAux: a fetch's quiet notes land in the session at
// once, the last for a part winning and nil dropping one; a part the
// client sent anew meanwhile (a second fetch of the session, on another
// connection) keeps what it has. The broker's own state of a session is
// made once and lives with it.
func TestQuietNotesAndAux(t *testing.T) {
	c := New(Options{Slots: 10})
	f, err := c.Begin(fetch(0, 0, "t", []int32{0, 1, 2, 3}, 5), follower)
	require.NoError(t, err)
	resp := answer(f, 5)
	f.Finish(resp)
	id := resp.SessionID

	made := 0
	aux := func() any { made++; return &made }
	f1, err := c.Begin(fetch(id, 1, "t", nil, 0), follower)
	require.NoError(t, err)
	require.Same(t, &made, f1.Aux(aux))
	f2, err := c.Begin(fetch(id, 2, "t", []int32{1}, 9), follower)
	require.NoError(t, err)
	require.Same(t, &made, f2.Aux(aux))
	require.Equal(t, 1, made, "made at its first use only")
	f2.Finish(answer(f2, 5))
	f1.NoteQuiet([]int{0, 1, 2, 3, 3}, []any{"a", "b", "c", "d", nil})
	f1.Finish(answer(f1, 5))

	f, err = c.Begin(fetch(id, 3, "t", nil, 0), follower)
	require.NoError(t, err)
	notes := map[int32]any{}
	for _, p := range f.Parts {
		notes[p.Partition] = p.Quiet
	}
	require.Equal(t, map[int32]any{0: "a", 1: nil, 2: "c", 3: nil}, notes,
		"t-1 was sent anew after f1 began; t-3's last note was nil")
	// Records for two parts: both go last, in the order answered.
	f.Finish(answer(f, 5, 2, 0))
	f, err = c.Begin(fetch(id, 4, "t", nil, 0), follower)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 3, 0, 2}, order(f))
	f.Finish(answer(f, 5))

	f, err = c.Begin(fetch(0, -1, "t", []int32{0}, 0), follower)
	require.NoError(t, err)
	require.Nil(t, f.Aux(aux), "a sessionless fetch has no state to keep")
	f.Finish(answer(f, 5))
}
