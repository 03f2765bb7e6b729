package offsetlog

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// The partitions Kafka picks, from Java's String.hashCode (checked with
// a JVM: `("billing".hashCode() & 0x7fffffff) % 50`).
func TestPartitionIsKafkas(t *testing.T) {
	for _, c := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"", 50, 0},
		{"test-group", 50, 12},
		{"billing", 50, 39}, // a negative hash
		{"console-consumer-12345", 50, 6},
		{"grüße", 50, 23},
		{"\U0001D11Emusic", 50, 5}, // a surrogate pair in UTF-16
		{"a-very-long-group-name-that-overflows-many-times", 16, 12},
		{"g", 7, 5},
	} {
		require.Equal(t, c.want, Partition(c.group, c.n), "%q over %d", c.group, c.n)
	}
}

// The bytes Kafka writes (key v1, value v3), and what kmsg reads back.
func TestRecordIsKafkasFormat(t *testing.T) {
	o := metastore.Offset{Topic: "orders", Partition: 2, Offset: 1234, LeaderEpoch: 5, Metadata: "m", CommittedAt: 1700000000000}
	r := Record("billing", o, 50)
	require.Equal(t, Topic, r.Topic)
	require.Equal(t, int32(39), r.Partition)
	require.Equal(t, "0001"+"0007"+hex.EncodeToString([]byte("billing"))+"0006"+hex.EncodeToString([]byte("orders"))+"00000002",
		hex.EncodeToString(r.Key))
	require.Equal(t, "0003"+"00000000000004d2"+"00000005"+"0001"+hex.EncodeToString([]byte("m"))+"0000018bcfe56800",
		hex.EncodeToString(r.Value))
	k := kmsg.NewOffsetCommitKey()
	require.NoError(t, k.ReadFrom(r.Key))
	require.Equal(t, "billing", k.Group)
	v := kmsg.NewOffsetCommitValue()
	require.NoError(t, v.ReadFrom(r.Value))
	require.Equal(t, int64(1234), v.Offset)
	require.Equal(t, int64(1700000000000), v.CommitTimestamp)
}

type fakeProducer struct {
	got []*kgo.Record
	err error
}

func (p *fakeProducer) TryProduce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	p.got = append(p.got, r)
	promise(r, p.err)
}

func TestFeedDropsUntilReadyAndCountsFailures(t *testing.T) {
	p := &fakeProducer{}
	ready := false
	f := New(context.Background(), p, 4, func() bool { return ready }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	offs := []metastore.Offset{{Topic: "t", Partition: 0, Offset: 1}, {Topic: "t", Partition: 1, Offset: 2}}
	f.Committed("g", offs)
	require.Empty(t, p.got, "no topic yet")
	require.Equal(t, int64(2), f.Dropped())
	ready = true
	f.Committed("g", offs)
	require.Len(t, p.got, 2)
	require.Equal(t, int64(2), f.Dropped())
	p.err = errors.New("buffer full")
	f.Committed("g", offs[:1])
	require.Equal(t, int64(3), f.Dropped())

	var none *Feed
	none.Committed("g", offs) // a nil feed is off
	require.Zero(t, none.Dropped())
}
