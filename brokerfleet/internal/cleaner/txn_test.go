package cleaner

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/pkg/segment"
)

// txnBatch is batch with the transactional attribute, for producer pid.
func txnBatch(ts, pid int64, seq int32, rs ...rec) []byte {
	raw := batch(ts, pid, seq, rs...)
	binary.BigEndian.PutUint16(raw[21:], binary.BigEndian.Uint16(raw[21:])|0x10)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

// appendTxn verifies (as the coordinator would) and appends a
// transactional batch.
func (h *harness) appendTxn(b []byte) {
	hd, err := segment.ParseHeader(b)
	require.NoError(h.t, err)
	var g = h.p.GuardTxn(hd.ProducerID, hd.ProducerEpoch)
	if h.p.TxnVerified(hd.ProducerID, hd.ProducerEpoch) {
		g = nil
	}
	_, err = h.p.AppendTxn(b, hd, g)
	require.NoError(h.t, err)
}

func (h *harness) marker(pid int64, commit bool) {
	_, err := h.p.AppendMarker(segment.Marker{ProducerID: pid, ProducerEpoch: 0, Commit: commit})
	require.NoError(h.t, err)
}

// values reads the partition's data records (markers left out) as key ->
// values in offset order, and counts the markers.
func (h *harness) values() (map[string][]string, int) {
	out := map[string][]string{}
	markers := 0
	b, err := h.p.Read(nil, h.p.LogStartOffset(), 1<<30, true)
	require.NoError(h.t, err)
	require.NoError(h.t, segment.Split(b, func(hd segment.Header, batch []byte) error {
		if hd.IsControl() {
			markers++
			return nil
		}
		body, err := records.Body(batch, hd, 1<<20)
		require.NoError(h.t, err)
		return records.Entries(body, hd, func(r records.Entry) error {
			var kr kmsg.Record
			require.NoError(h.t, kr.ReadFrom(r.Raw))
			out[string(kr.Key)] = append(out[string(kr.Key)], string(kr.Value))
			return nil
		})
	}))
	return out, markers
}

// A compacted topic written by transactions: committed records are
// compacted like any, aborted ones never count as a key's latest and are
// dropped, markers stay.
func TestCompactTransactions(t *testing.T) {
	h := newHarness(t, segment.NewMemFS(), compactConfig())
	h.append(batch(1, -1, 0, rec{key: "a", value: "v0"}, rec{key: "b", value: "v0"}))
	h.appendTxn(txnBatch(1, 7, 0, rec{key: "a", value: "v1"}))
	h.marker(7, true)
	h.appendTxn(txnBatch(1, 8, 0, rec{key: "a", value: "v2-aborted"}, rec{key: "c", value: "v2-aborted"}))
	h.marker(8, false)
	h.appendTxn(txnBatch(1, 7, 1, rec{key: "b", value: "v3"}))
	h.marker(7, true)
	h.append(batch(1, -1, 0, rec{key: "d", value: "v4"}))
	require.NoError(t, h.p.Roll())
	require.Equal(t, h.p.HighWatermark(), h.p.LastStableOffset())

	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	got, markers := h.values()
	require.Equal(t, map[string][]string{"a": {"v1"}, "b": {"v3"}, "d": {"v4"}}, got,
		"the committed values win, the aborted ones are gone")
	require.Equal(t, 3, markers, "markers stay")

	// Reopened, the log's transactions are all closed.
	h.reopen()
	require.Equal(t, h.p.HighWatermark(), h.p.LastStableOffset())
	require.Empty(t, h.p.OpenTxns())
	got, _ = h.values()
	require.Equal(t, map[string][]string{"a": {"v1"}, "b": {"v3"}, "d": {"v4"}}, got)
}

// An open transaction holds the cleaner back: nothing at or past the last
// stable offset is cleaned, so its records can neither win nor be dropped
// before they are decided.
func TestCompactStopsAtTheLastStableOffset(t *testing.T) {
	h := newHarness(t, segment.NewMemFS(), compactConfig())
	h.append(batch(1, -1, 0, rec{key: "a", value: "v0"}))
	require.NoError(t, h.p.Roll())
	h.appendTxn(txnBatch(1, 7, 0, rec{key: "a", value: "open"}))
	require.NoError(t, h.p.Roll())
	h.append(batch(1, -1, 0, rec{key: "a", value: "v2"}))
	require.NoError(t, h.p.Roll())
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	got, _ := h.values()
	require.Equal(t, map[string][]string{"a": {"v0", "open", "v2"}}, got, "only below the open transaction may be cleaned, and nothing there is superseded")

	h.marker(7, false)
	h.append(batch(1, -1, 0, rec{key: "z", value: "end"}))
	require.NoError(t, h.p.Roll())
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	got, _ = h.values()
	require.Equal(t, map[string][]string{"a": {"v2"}, "z": {"end"}}, got)
}
