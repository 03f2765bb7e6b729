package group

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func txnCommitReq(group, memberID string, gen int32, pid int64, off int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx", group, pid, 0
	r.MemberID, r.Generation = memberID, gen
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = "t"
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, off, -1
	t.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{p}
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{t}
	return r
}

func verified(code int16) func(context.Context) int16 {
	return func(context.Context) int16 { return code }
}

// stable fetches t/0 with RequireStable and returns its offset and code.
func (h *harness) stable(c *Coordinator, group string) (int64, int16) {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.RequireStable = 8, true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	r.Groups = []kmsg.OffsetFetchRequestGroup{g}
	p := c.FetchOffsets(h.ctx, r).Groups[0].Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func TestTxnOffsetCommitPendingUntilTheMarker(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "")
	shard := metastore.GroupShard("g")
	wantCode(t, "plain commit", h.commit("g", f.ids[0], "", f.gen, 5), nil)

	resp := h.c.TxnCommit(h.ctx, txnCommitReq("g", f.ids[0], f.gen, 42, 10), verified(0))
	wantCode(t, "txn commit", resp.Topics[0].Partitions[0].ErrorCode, nil)
	if got := h.committed(h.c, "g"); got != 5 {
		t.Fatalf("a pending offset reads as committed: %d", got)
	}
	if _, code := h.stable(h.c, "g"); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable with a pending offset: code %d", code)
	}
	// The commit marker makes it the committed offset.
	if err := h.c.CompleteTxn(h.ctx, shard, 42, true); err != nil {
		t.Fatal(err)
	}
	if off, code := h.stable(h.c, "g"); code != 0 || off != 10 {
		t.Fatalf("after the commit marker: %d, code %d", off, code)
	}
	// A repeated marker changes nothing.
	if err := h.c.CompleteTxn(h.ctx, shard, 42, false); err != nil {
		t.Fatal(err)
	}
	if got := h.committed(h.c, "g"); got != 10 {
		t.Fatalf("a repeated marker moved the offset: %d", got)
	}

	// An aborted transaction's offset is dropped, and another
	// coordinator of the shard (after a move) applies the marker from
	// the metastore.
	wantCode(t, "txn commit", h.c.TxnCommit(h.ctx, txnCommitReq("g", f.ids[0], f.gen, 43, 99), verified(0)).Topics[0].Partitions[0].ErrorCode, nil)
	other := h.addCoordinator()
	h.c.SetShards(nil)
	moved := allShards()
	moved[shard] = 2
	other.SetShards(moved)
	if _, code := h.stable(other, "g"); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("the new coordinator does not see the pending offset: code %d", code)
	}
	if err := h.c.CompleteTxn(h.ctx, shard, 43, false); err == nil {
		t.Fatal("a coordinator without the shard applied a marker")
	}
	if err := other.CompleteTxn(h.ctx, shard, 43, false); err != nil {
		t.Fatal(err)
	}
	if off, code := h.stable(other, "g"); code != 0 || off != 10 {
		t.Fatalf("after the abort marker: %d, code %d", off, code)
	}
}

func TestTxnOffsetCommitFencing(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "")
	code := func(r *kmsg.TxnOffsetCommitResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }
	// A zombie member of an older generation, or a non-member.
	wantCode(t, "old generation", code(h.c.TxnCommit(h.ctx, txnCommitReq("g", f.ids[0], f.gen-1, 1, 1), verified(0))), kerr.IllegalGeneration)
	wantCode(t, "unknown member", code(h.c.TxnCommit(h.ctx, txnCommitReq("g", "nobody", f.gen, 1, 1), verified(0))), kerr.UnknownMemberID)
	// The group is not in the producer's transaction.
	wantCode(t, "not verified", code(h.c.TxnCommit(h.ctx, txnCommitReq("g", f.ids[0], f.gen, 1, 1), verified(kerr.InvalidTxnState.Code))), kerr.InvalidTxnState)
	wantCode(t, "txn coordinator moved", code(h.c.TxnCommit(h.ctx, txnCommitReq("g", f.ids[0], f.gen, 1, 1), verified(kerr.NotCoordinator.Code))), kerr.CoordinatorNotAvailable)
	// v0-2 carry no member: a producer outside the group's protocol.
	r := txnCommitReq("g", "", -1, 1, 7)
	r.Version = 2
	wantCode(t, "v2 commit", code(h.c.TxnCommit(h.ctx, r, verified(0))), nil)
	if _, c := h.stable(h.c, "g"); c != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("code %d", c)
	}
	// Nothing reached the committed offsets.
	if got := h.committed(h.c, "g"); got != -1 {
		t.Fatalf("committed %d", got)
	}
}
