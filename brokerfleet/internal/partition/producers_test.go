package partition

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/segment"
)

func TestIncrementSequence(t *testing.T) {
	const max = math.MaxInt32
	tests := []struct {
		seq, n, want int32
	}{
		{0, 0, 0},
		{0, 1, 1},
		{5, 3, 8},
		{max - 1, 0, max - 1},
		{max, 0, max},
		{max - 1, 1, max},
		{max, 1, 0},
		{max - 1, 2, 0},
		{max, 2, 1},
		{max, 5, 4},
		{max - 2, 5, 2},
		{max - 4, 4, max},
		{max - 4, 5, 0},
		{100, max, 99},
		{0, max, max},
		{1, max, 0},
		{max, max, max - 1},
	}
	for _, tt := range tests {
		got := incrementSequence(tt.seq, tt.n)
		require.Equal(t, tt.want, got, "incrementSequence(%d, %d)", tt.seq, tt.n)
		// Cross-check against modular arithmetic over [0, MaxInt32].
		require.Equal(t, int64(tt.want), (int64(tt.seq)+int64(tt.n))%(int64(max)+1), "incrementSequence(%d, %d)", tt.seq, tt.n)
	}
}

// hdr returns the header of an idempotent batch of n records with the given
// producer, epoch and base sequence, stored at baseOffset.
func hdr(pid int64, epoch int16, baseSeq int32, n int32, baseOffset int64) segment.Header {
	return segment.Header{
		BaseOffset:      baseOffset,
		Magic:           2,
		LastOffsetDelta: n - 1,
		NumRecords:      n,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    baseSeq,
	}
}

// seeded returns producer state after pid 1, epoch 3, wrote 7 batches of 5
// records with sequences 0-34 at offsets 100-134 (each batch starts 5
// offsets after the previous one), with append times 1000+i.
func seeded() producers {
	ps := producers{}
	for i := range int32(7) {
		ps.record(hdr(1, 3, i*5, 5, 100+int64(i)*5), 1000+int64(i))
	}
	return ps
}

func TestProducersCheck(t *testing.T) {
	const max = math.MaxInt32
	tests := []struct {
		name    string
		ps      func() producers
		h       segment.Header
		wantDup *batchMeta
		wantErr error
	}{
		{name: "unknown producer, sequence 0", ps: seeded, h: hdr(2, 0, 0, 1, 0)},
		{name: "unknown producer, any sequence", ps: seeded, h: hdr(2, 0, 12345, 3, 0)},
		{name: "unknown producer, max sequence", ps: seeded, h: hdr(2, 7, max, 1, 0)},
		{name: "producer known by a marker only: any sequence", ps: func() producers {
			return producers{1: {epoch: 3}}
		}, h: hdr(1, 3, 77, 1, 0)},
		{name: "producer known by a marker only: newer epoch, any sequence", ps: func() producers {
			return producers{1: {epoch: 3}}
		}, h: hdr(1, 4, 77, 1, 0)},
		{name: "producer fenced by a marker: older epoch", ps: func() producers {
			return producers{1: {epoch: 3}}
		}, h: hdr(1, 2, 0, 1, 0), wantErr: ErrInvalidProducerEpoch},
		{name: "non-idempotent batch", ps: seeded, h: hdr(-1, -1, -1, 5, 0)},
		{name: "non-idempotent batch with a known producer's sequence", ps: seeded, h: hdr(-1, 3, 30, 5, 0)},

		{name: "in sequence", ps: seeded, h: hdr(1, 3, 35, 1, 0)},
		{name: "in sequence, larger batch", ps: seeded, h: hdr(1, 3, 35, 100, 0)},
		{name: "gap of one", ps: seeded, h: hdr(1, 3, 36, 1, 0), wantErr: ErrOutOfOrderSequence},
		{name: "large gap", ps: seeded, h: hdr(1, 3, 1000, 1, 0), wantErr: ErrOutOfOrderSequence},
		{name: "sequence -1", ps: seeded, h: hdr(1, 3, -1, 1, 0), wantErr: ErrOutOfOrderSequence},

		{name: "duplicate of newest batch", ps: seeded, h: hdr(1, 3, 30, 5, 0),
			wantDup: &batchMeta{firstSeq: 30, lastSeq: 34, baseOffset: 130, lastOffset: 134, appendTime: 1006}},
		{name: "duplicate of 2nd newest batch", ps: seeded, h: hdr(1, 3, 25, 5, 0),
			wantDup: &batchMeta{firstSeq: 25, lastSeq: 29, baseOffset: 125, lastOffset: 129, appendTime: 1005}},
		{name: "duplicate of 3rd newest batch", ps: seeded, h: hdr(1, 3, 20, 5, 0),
			wantDup: &batchMeta{firstSeq: 20, lastSeq: 24, baseOffset: 120, lastOffset: 124, appendTime: 1004}},
		{name: "duplicate of 4th newest batch", ps: seeded, h: hdr(1, 3, 15, 5, 0),
			wantDup: &batchMeta{firstSeq: 15, lastSeq: 19, baseOffset: 115, lastOffset: 119, appendTime: 1003}},
		{name: "duplicate of oldest remembered batch", ps: seeded, h: hdr(1, 3, 10, 5, 0),
			wantDup: &batchMeta{firstSeq: 10, lastSeq: 14, baseOffset: 110, lastOffset: 114, appendTime: 1002}},
		{name: "batch older than the window", ps: seeded, h: hdr(1, 3, 5, 5, 0), wantErr: ErrOutOfOrderSequence},
		{name: "first batch, out of the window", ps: seeded, h: hdr(1, 3, 0, 5, 0), wantErr: ErrOutOfOrderSequence},
		{name: "same first sequence, different length", ps: seeded, h: hdr(1, 3, 30, 3, 0), wantErr: ErrOutOfOrderSequence},
		{name: "overlapping the newest batch", ps: seeded, h: hdr(1, 3, 32, 5, 0), wantErr: ErrOutOfOrderSequence},

		{name: "older epoch", ps: seeded, h: hdr(1, 2, 35, 1, 0), wantErr: ErrInvalidProducerEpoch},
		{name: "older epoch, duplicate sequence", ps: seeded, h: hdr(1, 2, 30, 5, 0), wantErr: ErrInvalidProducerEpoch},
		{name: "older epoch, sequence 0", ps: seeded, h: hdr(1, 0, 0, 1, 0), wantErr: ErrInvalidProducerEpoch},
		{name: "newer epoch, sequence 0", ps: seeded, h: hdr(1, 4, 0, 1, 0)},
		{name: "much newer epoch, sequence 0", ps: seeded, h: hdr(1, math.MaxInt16, 0, 10, 0)},
		{name: "newer epoch, continuing sequence", ps: seeded, h: hdr(1, 4, 35, 1, 0), wantErr: ErrOutOfOrderSequence},
		{name: "newer epoch, duplicate-looking sequence", ps: seeded, h: hdr(1, 4, 30, 5, 0), wantErr: ErrOutOfOrderSequence},

		{name: "wrap: next after MaxInt32 is 0", ps: func() producers {
			ps := producers{}
			ps.record(hdr(9, 0, max-4, 5, 0), -1) // sequences max-4 .. max
			return ps
		}, h: hdr(9, 0, 0, 1, 5)},
		{name: "wrap: MaxInt32+1 is a gap", ps: func() producers {
			ps := producers{}
			ps.record(hdr(9, 0, max-4, 5, 0), -1)
			return ps
		}, h: hdr(9, 0, 1, 1, 5), wantErr: ErrOutOfOrderSequence},
		{name: "wrap: batch spanning MaxInt32 is in sequence", ps: func() producers {
			ps := producers{}
			ps.record(hdr(9, 0, max-9, 5, 0), -1) // max-9 .. max-5
			return ps
		}, h: hdr(9, 0, max-4, 10, 5)},
		{name: "wrap: duplicate of a batch spanning MaxInt32", ps: func() producers {
			ps := producers{}
			ps.record(hdr(9, 0, max-1, 4, 50), 7) // max-1, max, 0, 1
			ps.record(hdr(9, 0, 2, 1, 54), 8)
			return ps
		}, h: hdr(9, 0, max-1, 4, 0),
			wantDup: &batchMeta{firstSeq: max - 1, lastSeq: 1, baseOffset: 50, lastOffset: 53, appendTime: 7}},
		{name: "wrap: next after a batch spanning MaxInt32", ps: func() producers {
			ps := producers{}
			ps.record(hdr(9, 0, max-1, 4, 50), 7)
			return ps
		}, h: hdr(9, 0, 2, 1, 54)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := tt.ps()
			dup, err := ps.check(tt.h)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Nil(t, dup)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantDup, dup)
		})
	}
}

// check returns a copy: changing it does not change the window.
func TestProducersCheckReturnsCopy(t *testing.T) {
	ps := seeded()
	dup, err := ps.check(hdr(1, 3, 30, 5, 0))
	require.NoError(t, err)
	require.NotNil(t, dup)
	dup.baseOffset = -42
	again, err := ps.check(hdr(1, 3, 30, 5, 0))
	require.NoError(t, err)
	require.EqualValues(t, 130, again.baseOffset)
}

func TestProducersRecord(t *testing.T) {
	type rec struct {
		h          segment.Header
		appendTime int64
	}
	control := hdr(1, 0, 5, 1, 50)
	control.Attributes = 0x20
	tests := []struct {
		name       string
		records    []rec
		wantEpoch  map[int64]int16
		wantFirsts map[int64][]int32 // firstSeq of the remembered batches, oldest first
		wantMeta   map[int64]batchMeta
	}{
		{name: "nothing", wantFirsts: map[int64][]int32{}},
		{name: "one batch", records: []rec{{hdr(1, 0, 0, 3, 10), 555}},
			wantEpoch:  map[int64]int16{1: 0},
			wantFirsts: map[int64][]int32{1: {0}},
			wantMeta:   map[int64]batchMeta{1: {firstSeq: 0, lastSeq: 2, baseOffset: 10, lastOffset: 12, appendTime: 555}}},
		{name: "five batches are all kept", records: []rec{
			{hdr(1, 0, 0, 1, 0), -1}, {hdr(1, 0, 1, 1, 1), -1}, {hdr(1, 0, 2, 1, 2), -1},
			{hdr(1, 0, 3, 1, 3), -1}, {hdr(1, 0, 4, 1, 4), -1},
		},
			wantEpoch:  map[int64]int16{1: 0},
			wantFirsts: map[int64][]int32{1: {0, 1, 2, 3, 4}}},
		{name: "sixth batch evicts the oldest", records: []rec{
			{hdr(1, 0, 0, 1, 0), -1}, {hdr(1, 0, 1, 1, 1), -1}, {hdr(1, 0, 2, 1, 2), -1},
			{hdr(1, 0, 3, 1, 3), -1}, {hdr(1, 0, 4, 1, 4), -1}, {hdr(1, 0, 5, 1, 5), -1},
		},
			wantEpoch:  map[int64]int16{1: 0},
			wantFirsts: map[int64][]int32{1: {1, 2, 3, 4, 5}}},
		{name: "many batches keep the last five", records: func() []rec {
			var rs []rec
			for i := range int32(20) {
				rs = append(rs, rec{hdr(1, 0, i*2, 2, int64(i)*2), -1})
			}
			return rs
		}(),
			wantEpoch:  map[int64]int16{1: 0},
			wantFirsts: map[int64][]int32{1: {30, 32, 34, 36, 38}},
			wantMeta:   map[int64]batchMeta{1: {firstSeq: 38, lastSeq: 39, baseOffset: 38, lastOffset: 39, appendTime: -1}}},
		{name: "new epoch resets the window", records: []rec{
			{hdr(1, 0, 0, 1, 0), -1}, {hdr(1, 0, 1, 1, 1), -1}, {hdr(1, 0, 2, 1, 2), -1},
			{hdr(1, 1, 0, 2, 3), -1},
		},
			wantEpoch:  map[int64]int16{1: 1},
			wantFirsts: map[int64][]int32{1: {0}},
			wantMeta:   map[int64]batchMeta{1: {firstSeq: 0, lastSeq: 1, baseOffset: 3, lastOffset: 4, appendTime: -1}}},
		{name: "new epoch after a full window", records: []rec{
			{hdr(1, 0, 0, 1, 0), -1}, {hdr(1, 0, 1, 1, 1), -1}, {hdr(1, 0, 2, 1, 2), -1},
			{hdr(1, 0, 3, 1, 3), -1}, {hdr(1, 0, 4, 1, 4), -1}, {hdr(1, 0, 5, 1, 5), -1},
			{hdr(1, 5, 0, 1, 6), -1}, {hdr(1, 5, 1, 1, 7), -1},
		},
			wantEpoch:  map[int64]int16{1: 5},
			wantFirsts: map[int64][]int32{1: {0, 1}}},
		{name: "older epoch is ignored", records: []rec{
			{hdr(1, 2, 0, 1, 0), -1}, {hdr(1, 1, 7, 1, 1), -1},
		},
			wantEpoch:  map[int64]int16{1: 2},
			wantFirsts: map[int64][]int32{1: {0}}},
		{name: "producers are independent", records: []rec{
			{hdr(1, 0, 0, 1, 0), -1}, {hdr(2, 4, 10, 1, 1), -1}, {hdr(1, 0, 1, 1, 2), -1},
		},
			wantEpoch:  map[int64]int16{1: 0, 2: 4},
			wantFirsts: map[int64][]int32{1: {0, 1}, 2: {10}}},
		{name: "producer id -1 is ignored", records: []rec{{hdr(-1, -1, -1, 3, 0), -1}, {hdr(-1, 0, 0, 1, 3), -1}},
			wantFirsts: map[int64][]int32{}},
		{name: "any negative producer id is ignored", records: []rec{{hdr(-2, 0, 0, 1, 0), -1}},
			wantFirsts: map[int64][]int32{}},
		{name: "control batches are ignored", records: []rec{{hdr(1, 0, 0, 5, 45), -1}, {control, -1}},
			wantEpoch:  map[int64]int16{1: 0},
			wantFirsts: map[int64][]int32{1: {0}}},
		{name: "wrapped sequence", records: []rec{{hdr(1, 0, math.MaxInt32, 3, 0), -1}},
			wantEpoch:  map[int64]int16{1: 0},
			wantFirsts: map[int64][]int32{1: {math.MaxInt32}},
			wantMeta:   map[int64]batchMeta{1: {firstSeq: math.MaxInt32, lastSeq: 1, baseOffset: 0, lastOffset: 2, appendTime: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := producers{}
			for _, r := range tt.records {
				ps.record(r.h, r.appendTime)
			}
			require.Len(t, ps, len(tt.wantFirsts))
			for pid, firsts := range tt.wantFirsts {
				st := ps[pid]
				require.NotNil(t, st, "producer %d", pid)
				require.Equal(t, tt.wantEpoch[pid], st.epoch, "epoch of producer %d", pid)
				require.LessOrEqual(t, len(st.batches), window)
				var got []int32
				for _, b := range st.batches {
					got = append(got, b.firstSeq)
				}
				require.Equal(t, firsts, got, "producer %d", pid)
				if want, ok := tt.wantMeta[pid]; ok {
					require.Equal(t, want, st.batches[len(st.batches)-1], "newest batch of producer %d", pid)
				}
			}
		})
	}
}

// After a new epoch, the old epoch's batches are no longer duplicates and
// the old epoch is fenced.
func TestProducersEpochBump(t *testing.T) {
	ps := seeded()
	h := hdr(1, 4, 0, 2, 200)
	_, err := ps.check(h)
	require.NoError(t, err)
	ps.record(h, -1)

	_, err = ps.check(hdr(1, 3, 30, 5, 0))
	require.ErrorIs(t, err, ErrInvalidProducerEpoch)

	dup, err := ps.check(hdr(1, 4, 0, 2, 0))
	require.NoError(t, err)
	require.Equal(t, &batchMeta{firstSeq: 0, lastSeq: 1, baseOffset: 200, lastOffset: 201, appendTime: -1}, dup)

	dup, err = ps.check(hdr(1, 4, 2, 1, 0))
	require.NoError(t, err)
	require.Nil(t, dup)
}
