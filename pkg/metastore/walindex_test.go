package metastore

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleWALIndex() WALIndex {
	a, b := NewTopicID(), NewTopicID()
	return WALIndex{Owner: "incarnation-1", Entries: []WALEntry{
		{Topic: a, Partition: 0, LeaderEpoch: 3, BaseOffset: 100, NextOffset: 105, MaxTimestamp: 1_700_000_000_000, Object: "wal/1/x/1.wal", Pos: 0, Len: 300},
		{Topic: b, Partition: 7, LeaderEpoch: 1, BaseOffset: 0, NextOffset: 1, MaxTimestamp: -1, Object: "wal/1/x/1.wal", Pos: 300, Len: 80},
		{Topic: a, Partition: 0, LeaderEpoch: 3, BaseOffset: 105, NextOffset: 1 << 40, MaxTimestamp: 5, Object: "wal/1/x/2.wal", Pos: 0, Len: 1 << 33},
	}}
}

func TestWALIndexRoundTrip(t *testing.T) {
	idx := sampleWALIndex()
	got, err := DecodeWALIndex(EncodeWALIndex(idx))
	require.NoError(t, err)
	require.Equal(t, idx, got)
	empty, err := DecodeWALIndex(EncodeWALIndex(WALIndex{}))
	require.NoError(t, err)
	require.Empty(t, empty.Entries)
	// Compact: a flush of 100 partitions of 10 topics, ten times.
	var big WALIndex
	topics := make([]TopicID, 10)
	for i := range topics {
		topics[i] = NewTopicID()
	}
	for f := int64(0); f < 10; f++ {
		for p := int32(0); p < 100; p++ {
			big.Entries = append(big.Entries, WALEntry{Topic: topics[p%10], Partition: p, LeaderEpoch: 4, BaseOffset: 1_000_000 + f*50, NextOffset: 1_000_050 + f*50,
				MaxTimestamp: 1_700_000_000_000, Object: "wal/12/0123456789abcdef/00000000000000001234.wal", Pos: int64(p) * 5000, Len: 5000})
		}
	}
	require.Less(t, len(EncodeWALIndex(big))/len(big.Entries), 30, "bytes an entry")
}

// Every truncation and every single-byte change of a valid index either
// decodes or fails with ErrCorruptWALIndex; none panics.
func TestWALIndexCorruptInput(t *testing.T) {
	b := EncodeWALIndex(sampleWALIndex())
	for n := 0; n < len(b); n++ {
		_, err := DecodeWALIndex(b[:n])
		require.ErrorIs(t, err, ErrCorruptWALIndex, "truncated to %d bytes", n)
	}
	for i := range b {
		for _, x := range []byte{0x00, 0xff, 0x80, b[i] ^ 1} {
			c := append([]byte(nil), b...)
			c[i] = x
			if _, err := DecodeWALIndex(c); err != nil && !errors.Is(err, ErrCorruptWALIndex) {
				t.Fatalf("byte %d = %#x: %v", i, x, err)
			}
		}
	}
	_, err := DecodeWALIndex(append([]byte{2}, b[1:]...))
	require.ErrorIs(t, err, ErrCorruptWALIndex, "an unknown format")
}

func FuzzDecodeWALIndex(f *testing.F) {
	f.Add(EncodeWALIndex(sampleWALIndex()))
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := DecodeWALIndex(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptWALIndex) {
				t.Fatal(err)
			}
			return
		}
		again, err := DecodeWALIndex(EncodeWALIndex(idx))
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Entries) != len(idx.Entries) {
			t.Fatal("round trip changed the entries")
		}
	})
}
