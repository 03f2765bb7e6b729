package txn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore"
)

func TestDecideInit(t *testing.T) {
	base := metastore.Transaction{ID: "x", ProducerID: 5, ProducerEpoch: 3, LastProducerID: -1, LastProducerEpoch: -1, State: metastore.TxnCompleteCommit, TimeoutMs: 1000}
	with := func(f func(*metastore.Transaction)) metastore.Transaction { t := base; f(&t); return t }
	tests := []struct {
		name      string
		cur       metastore.Transaction
		exists    bool
		busy      bool
		exp       expected
		wantCode  int16
		wantEpoch int16
		wantLast  int16
		newID     bool
		fence     bool
		unchanged bool
	}{
		{name: "new id", cur: metastore.Transaction{ID: "x"}, newID: true, wantEpoch: 0, wantLast: -1},
		{name: "new id, KIP-360 client", cur: metastore.Transaction{ID: "x"}, exp: expected{true, 9, 4}, newID: true, wantEpoch: 0, wantLast: -1},
		{name: "bump", cur: base, exists: true, wantEpoch: 4, wantLast: -1},
		{name: "busy", cur: base, exists: true, busy: true, wantCode: codeConcurrent},
		{name: "preparing", cur: with(func(t *metastore.Transaction) { t.State = metastore.TxnPrepareAbort }), exists: true, wantCode: codeConcurrent},
		{name: "ongoing is fenced and aborted", cur: with(func(t *metastore.Transaction) { t.State = metastore.TxnOngoing }), exists: true, fence: true, wantEpoch: 4, wantLast: -1},
		{name: "KIP-360 current epoch", cur: base, exists: true, exp: expected{true, 5, 3}, wantEpoch: 4, wantLast: 3},
		{name: "KIP-360 retry", cur: with(func(t *metastore.Transaction) { t.ProducerEpoch, t.LastProducerEpoch = 4, 3 }), exists: true, exp: expected{true, 5, 3}, unchanged: true, wantEpoch: 4, wantLast: 3},
		{name: "KIP-360 old epoch", cur: base, exists: true, exp: expected{true, 5, 1}, wantCode: codeFenced},
		{name: "KIP-360 other producer", cur: base, exists: true, exp: expected{true, 6, 3}, wantCode: codeFenced},
		{name: "exhausted epoch rotates", cur: with(func(t *metastore.Transaction) { t.ProducerEpoch = 32766 }), exists: true, newID: true, wantEpoch: 0, wantLast: -1},
		{name: "exhausted epoch rotates, KIP-360", cur: with(func(t *metastore.Transaction) { t.ProducerEpoch = 32766 }), exists: true, exp: expected{true, 5, 32766}, newID: true, wantEpoch: 0, wantLast: 32766},
		{name: "retry of a rotation", cur: with(func(t *metastore.Transaction) {
			t.ProducerID, t.ProducerEpoch, t.LastProducerID, t.LastProducerEpoch = 8, 0, 5, 32766
		}), exists: true, exp: expected{true, 5, 32766}, unchanged: true, wantEpoch: 0, wantLast: 32766},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideInit(tt.cur, tt.exists, tt.busy, 2000, tt.exp, 77)
			require.Equal(t, tt.wantCode, d.code)
			if tt.wantCode != 0 {
				return
			}
			require.Equal(t, tt.newID, d.newID)
			require.Equal(t, tt.fence, d.fence)
			require.Equal(t, !tt.unchanged, d.changed)
			require.Equal(t, tt.wantEpoch, d.next.ProducerEpoch)
			require.Equal(t, tt.wantLast, d.next.LastProducerEpoch)
			if tt.fence {
				require.Equal(t, metastore.TxnPrepareAbort, d.next.State)
				require.Equal(t, "fenced", d.next.Cause)
			} else if d.changed {
				require.Equal(t, metastore.TxnEmpty, d.next.State)
				require.EqualValues(t, 2000, d.next.TimeoutMs)
			}
		})
	}
}

func TestDecideEnd(t *testing.T) {
	cur := metastore.Transaction{ID: "x", ProducerID: 5, ProducerEpoch: 3}
	tests := []struct {
		state      string
		commit     bool
		wantCode   int16
		wantState  string
		wantWait   bool
		wantChange bool
	}{
		{state: metastore.TxnOngoing, commit: true, wantState: metastore.TxnPrepareCommit, wantChange: true},
		{state: metastore.TxnOngoing, commit: false, wantState: metastore.TxnPrepareAbort, wantChange: true},
		{state: metastore.TxnPrepareCommit, commit: true, wantWait: true, wantState: metastore.TxnPrepareCommit},
		{state: metastore.TxnPrepareCommit, commit: false, wantCode: codeInvalidState},
		{state: metastore.TxnPrepareAbort, commit: false, wantWait: true, wantState: metastore.TxnPrepareAbort},
		{state: metastore.TxnCompleteCommit, commit: true, wantState: metastore.TxnCompleteCommit},
		{state: metastore.TxnCompleteCommit, commit: false, wantCode: codeInvalidState},
		{state: metastore.TxnCompleteAbort, commit: false, wantState: metastore.TxnCompleteAbort},
		{state: metastore.TxnEmpty, commit: true, wantCode: codeInvalidState},
	}
	for _, tt := range tests {
		c := cur
		c.State = tt.state
		next, changed, wait, code := decideEnd(c, true, 5, 3, tt.commit, 9)
		require.Equal(t, tt.wantCode, code, "%s commit=%v", tt.state, tt.commit)
		if code == 0 {
			require.Equal(t, tt.wantState, next.State, "%s commit=%v", tt.state, tt.commit)
			require.Equal(t, tt.wantWait, wait)
			require.Equal(t, tt.wantChange, changed)
		}
	}
	_, _, _, code := decideEnd(cur, true, 5, 2, true, 9)
	require.Equal(t, codeFenced, code)
	_, _, _, code = decideEnd(cur, false, 5, 3, true, 9)
	require.Equal(t, codeMapping, code)
}

func TestDecideAddAndTimeout(t *testing.T) {
	cur := metastore.Transaction{ID: "x", ProducerID: 5, ProducerEpoch: 3, State: metastore.TxnCompleteAbort,
		Partitions: nil, TimeoutMs: 100}
	next, changed, code := decideAdd(cur, true, false, 5, 3, []TopicPartition{orders0}, 50)
	require.Zero(t, code)
	require.True(t, changed)
	require.Equal(t, metastore.TxnOngoing, next.State)
	require.EqualValues(t, 50, next.StartMs)
	_, changed, code = decideAdd(next, true, false, 5, 3, []TopicPartition{orders0}, 60)
	require.Zero(t, code)
	require.False(t, changed, "already there")
	_, _, code = decideAdd(next, true, true, 5, 3, []TopicPartition{orders1}, 60)
	require.Equal(t, codeConcurrent, code)

	_, due := decideTimeout(next, 150)
	require.False(t, due)
	aborted, due := decideTimeout(next, 151)
	require.True(t, due)
	require.Equal(t, metastore.TxnPrepareAbort, aborted.State)
	require.EqualValues(t, 4, aborted.ProducerEpoch)
	require.Equal(t, "timeout", aborted.Cause)
	done := completed(aborted, 200)
	require.Equal(t, metastore.TxnCompleteAbort, done.State)
	require.Empty(t, done.Partitions)
	require.NotEmpty(t, aborted.Partitions, "completed does not touch its input")
}
