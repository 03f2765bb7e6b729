package segment

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestControlBatchRoundTrip(t *testing.T) {
	for _, m := range []Marker{
		{ProducerID: 7, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 12},
		{ProducerID: 1 << 40, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 0},
	} {
		b := AppendControlBatch(nil, m, 1234)
		require.True(t, CheckCRC(b))
		h, err := ParseHeader(b)
		require.NoError(t, err)
		require.Equal(t, len(b), h.Size())
		require.True(t, h.IsControl())
		require.True(t, h.IsTransactional())
		require.Equal(t, int32(1), h.NumRecords)
		require.Equal(t, int32(-1), h.BaseSequence)
		require.Equal(t, int32(-1), h.PartitionLeaderEpoch)
		got, err := ParseControlBatch(b)
		require.NoError(t, err)
		require.Equal(t, m, got)

		// What clients see: kmsg decodes the batch, its record key is a
		// control key and its value the end-transaction marker.
		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(b))
		require.Equal(t, int64(1234), rb.FirstTimestamp)
		rec := kmsg.Record{}
		require.NoError(t, rec.ReadFrom(rb.Records))
		var key kmsg.ControlRecordKey
		require.NoError(t, key.ReadFrom(rec.Key))
		want := kmsg.ControlRecordKeyTypeAbort
		if m.Commit {
			want = kmsg.ControlRecordKeyTypeCommit
		}
		require.Equal(t, want, key.Type)
		var end kmsg.EndTxnMarker
		require.NoError(t, end.ReadFrom(rec.Value))
		require.Equal(t, m.CoordinatorEpoch, end.CoordinatorEpoch)
	}
}

func TestParseControlBatchRefusesOthers(t *testing.T) {
	_, err := ParseControlBatch(makeBatch(0, 1, 0, 0, 0))
	require.ErrorIs(t, err, ErrCorrupt)
	b := AppendControlBatch(nil, Marker{ProducerID: 1, Commit: true}, 0)
	for _, n := range []int{HeaderSize, HeaderSize + 3, len(b) - 8} {
		_, err := ParseControlBatch(b[:n])
		require.Error(t, err, "cut at %d", n)
	}
	bad := append([]byte(nil), b...)
	bad[HeaderSize+7] = 9 // control type 9
	_, err = ParseControlBatch(bad)
	require.ErrorIs(t, err, ErrCorrupt)
}

func FuzzParseControlBatch(f *testing.F) {
	f.Add(AppendControlBatch(nil, Marker{ProducerID: 3, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 2}, 5))
	f.Add(AppendControlBatch(nil, Marker{ProducerID: 3}, 5))
	f.Add(makeBatch(0, 1, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseControlBatch(b)
		if err != nil {
			return
		}
		h, herr := ParseHeader(b)
		if herr != nil || !h.IsControl() || h.ProducerID != m.ProducerID {
			t.Fatalf("accepted %x as a control batch: %+v %v", b, m, errors.Join(herr))
		}
	})
}
