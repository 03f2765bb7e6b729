package segment

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseHeader(t *testing.T) {
	valid := makeBatch(100, 3, 1000, 1005, 10)
	h, err := ParseHeader(valid)
	require.NoError(t, err)
	require.Equal(t, int64(100), h.BaseOffset)
	require.Equal(t, int64(102), h.LastOffset())
	require.Equal(t, len(valid), h.Size())
	require.Equal(t, int32(3), h.NumRecords)
	require.Equal(t, int64(1000), h.FirstTimestamp)
	require.Equal(t, int64(1005), h.MaxTimestamp)
	require.Equal(t, int32(7), h.PartitionLeaderEpoch)
	require.Equal(t, int64(-1), h.ProducerID)
	require.True(t, CheckCRC(valid))

	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), valid...)
		f(b)
		return b
	}
	be := binary.BigEndian
	tests := []struct {
		name string
		b    []byte
		eof  bool
	}{
		{"empty", nil, true},
		{"short header", valid[:HeaderSize-1], true},
		{"magic 1", mutate(func(b []byte) { b[offMagic] = 1 }), false},
		{"length below header", mutate(func(b []byte) { be.PutUint32(b[offLength:], minLength-1) }), false},
		{"negative length", mutate(func(b []byte) { be.PutUint32(b[offLength:], 0xffffffff) }), false},
		{"negative last offset delta", mutate(func(b []byte) { be.PutUint32(b[offLastOffsetDelta:], 0xffffffff) }), false},
		{"negative record count", mutate(func(b []byte) { be.PutUint32(b[offNumRecords:], 0x80000000) }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHeader(tt.b)
			if tt.eof {
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			} else {
				require.ErrorIs(t, err, ErrCorrupt)
			}
		})
	}

	// Only the header is needed; the CRC is not checked.
	_, err = ParseHeader(mutate(func(b []byte) { b[len(b)-1] ^= 1 })[:HeaderSize])
	require.NoError(t, err)
}

func TestHeaderAttributes(t *testing.T) {
	tests := []struct {
		attrs                  int16
		codec                  int8
		txn, control, appendTs bool
	}{
		{0, 0, false, false, false},
		{4, 4, false, false, false},
		{0x10 | 2, 2, true, false, false},
		{0x30, 0, true, true, false},
		{0x08 | 1, 1, false, false, true},
	}
	for _, tt := range tests {
		h := Header{Attributes: tt.attrs}
		require.Equal(t, tt.codec, h.Compression(), "attrs %#x", tt.attrs)
		require.Equal(t, tt.txn, h.IsTransactional(), "attrs %#x", tt.attrs)
		require.Equal(t, tt.control, h.IsControl(), "attrs %#x", tt.attrs)
		require.Equal(t, tt.appendTs, h.LogAppendTime(), "attrs %#x", tt.attrs)
	}
}

func TestCheckCRC(t *testing.T) {
	b := makeBatch(0, 2, 1, 2, 20)
	require.True(t, CheckCRC(b))
	for _, i := range []int{offAttributes, offMaxTimestamp, HeaderSize, len(b) - 1} {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		require.False(t, CheckCRC(c), "flipped byte %d", i)
	}
	require.False(t, CheckCRC(b[:len(b)-1]), "truncated")
	require.False(t, CheckCRC(b[:10]), "shorter than a header")
	// Fields outside the CRC can change.
	c := append([]byte(nil), b...)
	SetBaseOffset(c, 1<<40)
	SetPartitionLeaderEpoch(c, 99)
	require.True(t, CheckCRC(c))
	h, err := ParseHeader(c)
	require.NoError(t, err)
	require.Equal(t, int64(1<<40), h.BaseOffset)
	require.Equal(t, int32(99), h.PartitionLeaderEpoch)
}

func TestSetLogAppendTime(t *testing.T) {
	b := makeBatch(5, 3, 100, 200, 4)
	SetLogAppendTime(b, 12345)
	require.True(t, CheckCRC(b))
	h, err := ParseHeader(b)
	require.NoError(t, err)
	require.True(t, h.LogAppendTime())
	require.Equal(t, int64(12345), h.MaxTimestamp)
	require.Equal(t, int64(100), h.FirstTimestamp, "first timestamp is left alone")
}

func TestSplit(t *testing.T) {
	a, b := makeBatch(0, 1, 1, 1, 3), makeBatch(1, 2, 2, 2, 40)
	both := append(append([]byte(nil), a...), b...)
	var bases []int64
	var sizes []int
	require.NoError(t, Split(both, func(h Header, batch []byte) error {
		bases = append(bases, h.BaseOffset)
		sizes = append(sizes, len(batch))
		return nil
	}))
	require.Equal(t, []int64{0, 1}, bases)
	require.Equal(t, []int{len(a), len(b)}, sizes)
	require.NoError(t, Split(nil, func(Header, []byte) error { t.Fatal("called"); return nil }))

	nop := func(Header, []byte) error { return nil }
	require.ErrorIs(t, Split(both[:len(both)-1], nop), ErrCorrupt, "cut batch")
	require.ErrorIs(t, Split(append(both, 0, 0), nop), ErrCorrupt, "trailing bytes")
	bad := append([]byte(nil), both...)
	bad[len(a)+offMagic] = 0
	require.ErrorIs(t, Split(bad, nop), ErrCorrupt, "bad second header")

	stop := errors.New("stop")
	calls := 0
	require.ErrorIs(t, Split(both, func(Header, []byte) error { calls++; return stop }), stop)
	require.Equal(t, 1, calls)
}

// TestParseHeaderKmsg checks the field layout against franz-go's encoder.
func TestParseHeaderKmsg(t *testing.T) {
	rb := kmsg.RecordBatch{
		FirstOffset:          123456789,
		PartitionLeaderEpoch: 17,
		Magic:                2,
		Attributes:           0x10 | 0x08 | 3,
		LastOffsetDelta:      4,
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_999,
		ProducerID:           4242,
		ProducerEpoch:        3,
		FirstSequence:        77,
		NumRecords:           5,
		Records:              []byte("not really records"),
	}
	rb.Length = int32(minLength + len(rb.Records))
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))

	h, err := ParseHeader(b)
	require.NoError(t, err)
	require.Equal(t, Header{
		BaseOffset: 123456789, Length: rb.Length, PartitionLeaderEpoch: 17, Magic: 2,
		CRC: binary.BigEndian.Uint32(b[offCRC:]), Attributes: 0x10 | 0x08 | 3, LastOffsetDelta: 4,
		FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_999, ProducerID: 4242,
		ProducerEpoch: 3, BaseSequence: 77, NumRecords: 5,
	}, h)
	require.Equal(t, len(b), h.Size())
	require.True(t, CheckCRC(b))
	require.True(t, h.IsTransactional())
	require.True(t, h.LogAppendTime())
	require.Equal(t, int8(3), h.Compression())
}
