package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runTxnCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"transactions"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestTransactionsListDescribeHangingAbort(t *testing.T) {
	e := newGroupsEnv(t)
	e.createTopic("ledger", 1)
	txn := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.bootstrap), kgo.TransactionalID(id), kgo.DefaultProduceTopic("ledger"),
			kgo.TransactionTimeout(10*time.Minute))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	done := txn("done")
	require.NoError(t, done.BeginTransaction())
	require.NoError(t, done.ProduceSync(e.ctx, kgo.StringRecord("committed")).FirstErr())
	require.NoError(t, done.EndTransaction(e.ctx, kgo.TryCommit))
	stuck := txn("stuck") // begins and never ends: its transaction hangs
	require.NoError(t, stuck.BeginTransaction())
	require.NoError(t, stuck.ProduceSync(e.ctx, kgo.StringRecord("hanging")).FirstErr())

	code, out, errOut := runTxnCmd("list", "-bootstrap", e.bootstrap)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "CompleteCommit", tableRows(out, "done")[0][3])
	require.Equal(t, "Ongoing", tableRows(out, "stuck")[0][3])
	code, out, errOut = runTxnCmd("list", "-bootstrap", e.bootstrap, "-json", "-state", "ongoing")
	require.Equal(t, 0, code, errOut)
	var listed struct {
		Transactions []listedTxnJSON `json:"transactions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Len(t, listed.Transactions, 1)
	require.Equal(t, "stuck", listed.Transactions[0].TransactionalID)

	code, out, errOut = runTxnCmd("describe", "-bootstrap", e.bootstrap, "stuck")
	require.Equal(t, 0, code, errOut)
	row := tableRows(out, "stuck")[0]
	require.Equal(t, "Ongoing", row[2])
	require.Equal(t, "ledger-0", row[7])
	code, _, errOut = runTxnCmd("describe", "-bootstrap", e.bootstrap, "nobody")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "nobody")

	time.Sleep(50 * time.Millisecond)
	code, out, errOut = runTxnCmd("hanging", "-bootstrap", e.bootstrap, "-older-than", "10ms", "-json")
	require.Equal(t, 0, code, errOut)
	var hanging struct {
		Hanging []openTxnJSON `json:"hanging"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &hanging), out)
	require.Len(t, hanging.Hanging, 1, out)
	h := hanging.Hanging[0]
	require.Equal(t, "ledger", h.Topic)
	require.EqualValues(t, 2, h.StartOffset, "after the committed record and its marker")
	code, out, _ = runTxnCmd("hanging", "-bootstrap", e.bootstrap)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no hanging transactions", "none older than 15 minutes")

	// The hanging transaction holds read_committed back until aborted.
	ends := func(committed bool) int64 {
		lo, err := e.adm.ListEndOffsets(e.ctx, "ledger")
		if committed {
			lo, err = e.adm.ListCommittedOffsets(e.ctx, "ledger")
		}
		require.NoError(t, err)
		o, _ := lo.Lookup("ledger", 0)
		return o.Offset
	}
	require.EqualValues(t, 2, ends(true))
	code, out, errOut = runTxnCmd("abort", "-bootstrap", e.bootstrap, "-topic", "ledger", "-partition", "0", "-start-offset", strconv.FormatInt(h.StartOffset, 10))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "aborted the transaction of producer")
	require.Eventually(t, func() bool { return ends(true) == ends(false) }, 10*time.Second, 20*time.Millisecond)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.bootstrap), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics("ledger"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
	defer cancel()
	var got []string
	for ctx.Err() == nil && len(got) < 1 {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.Equal(t, []string{"committed"}, got)

	code, _, errOut = runTxnCmd("abort", "-bootstrap", e.bootstrap, "-partition", "0", "-start-offset", "2")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "-topic")
	code, _, errOut = runTxnCmd("abort", "-bootstrap", e.bootstrap, "-topic", "ledger", "-partition", "0", "-start-offset", "99")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no producer has an open transaction")
}
