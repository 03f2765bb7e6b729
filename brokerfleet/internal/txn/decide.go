package txn

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/metastore"
)

// The coordinator's decisions, as pure functions of a transaction's state
// and a request: each returns the state to write (changed is false when
// nothing needs writing) or the Kafka error code to answer.

// OffsetsTopic is the topic name a transaction's group coordinator shards
// go by, as Kafka's __consumer_offsets partitions: partition N is the
// groups of shard N. Clients cannot add it.
const OffsetsTopic = "__consumer_offsets"

// Error codes the decisions answer.
var (
	codeConcurrent       = kerr.ConcurrentTransactions.Code
	codeFenced           = kerr.ProducerFenced.Code
	codeMapping          = kerr.InvalidProducerIDMapping.Code
	codeInvalidState     = kerr.InvalidTxnState.Code
	codeNotCoordinator   = kerr.NotCoordinator.Code
	codeNotAvailable     = kerr.CoordinatorNotAvailable.Code
	codeInvalidTimeout   = kerr.InvalidTransactionTimeout.Code
	codeInvalidRequest   = kerr.InvalidRequest.Code
	codeUnknownPartition = kerr.UnknownTopicOrPartition.Code
)

// epochExhausted reports whether an epoch may not be bumped again under
// its producer id (Kafka's rule: the last two values are kept for
// fencing).
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// initDecision is what InitProducerId does to a transactional id.
type initDecision struct {
	next    metastore.Transaction
	code    int16
	newID   bool // next needs a fresh producer id (filled by the caller)
	fence   bool // next is a PrepareAbort of the ongoing transaction: answer CONCURRENT_TRANSACTIONS once written
	changed bool
}

// expected is the producer id and epoch an InitProducerId v3+ presents
// (KIP-360); none when the client does not.
type expected struct {
	set   bool
	id    int64
	epoch int16
}

// decideInit decides InitProducerId for cur (exists false: the id has no
// state yet). busy is whether a decision of cur is still being carried
// out (markers in flight).
func decideInit(cur metastore.Transaction, exists, busy bool, timeoutMs int32, exp expected, now int64) initDecision {
	if !exists {
		// A new id: a fresh producer id at epoch 0. A KIP-360 client
		// recovering an id that expired gets it too.
		return initDecision{changed: true, newID: true, next: metastore.Transaction{
			ID: cur.ID, ProducerEpoch: 0, LastProducerID: -1, LastProducerEpoch: -1,
			State: metastore.TxnEmpty, TimeoutMs: timeoutMs, UpdateMs: now,
		}}
	}
	if busy {
		return initDecision{code: codeConcurrent}
	}
	if exp.set && exp.id != cur.ProducerID && !(exp.id == cur.LastProducerID && epochExhausted(exp.epoch)) {
		return initDecision{code: codeFenced}
	}
	switch cur.State {
	case metastore.TxnPrepareCommit, metastore.TxnPrepareAbort:
		return initDecision{code: codeConcurrent}
	case metastore.TxnOngoing:
		// Abort it under a bumped epoch first, fencing the previous
		// instance; the client retries and gets a further bump.
		next := cur
		if next.ProducerEpoch < math.MaxInt16 {
			next.ProducerEpoch++
		}
		next.LastProducerEpoch = -1
		next.State, next.Cause, next.UpdateMs = metastore.TxnPrepareAbort, "fenced", now
		return initDecision{next: next, fence: true, changed: true}
	}
	// Empty, CompleteCommit, CompleteAbort.
	next := cur
	next.TimeoutMs, next.UpdateMs, next.State, next.Partitions, next.Cause = timeoutMs, now, metastore.TxnEmpty, nil, ""
	next.StartMs = 0
	if epochExhausted(cur.ProducerEpoch) && (!exp.set || exp.epoch == cur.ProducerEpoch) {
		next.LastProducerID, next.ProducerEpoch = cur.ProducerID, 0
		next.LastProducerEpoch = -1
		if exp.set {
			next.LastProducerEpoch = cur.ProducerEpoch
		}
		return initDecision{next: next, newID: true, changed: true}
	}
	switch {
	case !exp.set:
		next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, -1
	case exp.epoch == cur.ProducerEpoch:
		next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, cur.ProducerEpoch
	case exp.epoch == cur.LastProducerEpoch && cur.LastProducerEpoch >= 0:
		// A retry of the bump just made: answer it again.
		return initDecision{next: cur}
	default:
		return initDecision{code: codeFenced}
	}
	return initDecision{next: next, changed: true}
}

// checkProducer checks a request's producer id and epoch against cur.
func checkProducer(cur metastore.Transaction, exists bool, pid int64, epoch int16) int16 {
	switch {
	case !exists || cur.ProducerID != pid:
		return codeMapping
	case cur.ProducerEpoch != epoch:
		return codeFenced
	}
	return 0
}

// TopicPartition names a partition (or, under OffsetsTopic, a group
// coordinator shard).
type TopicPartition struct {
	Topic     string
	Partition int32
}

// decideAdd decides AddPartitionsToTxn (and AddOffsetsToTxn, whose
// partition is the group's shard under OffsetsTopic).
func decideAdd(cur metastore.Transaction, exists, busy bool, pid int64, epoch int16, parts []TopicPartition, now int64) (metastore.Transaction, bool, int16) {
	if code := checkProducer(cur, exists, pid, epoch); code != 0 {
		return cur, false, code
	}
	if busy || cur.State == metastore.TxnPrepareCommit || cur.State == metastore.TxnPrepareAbort {
		return cur, false, codeConcurrent
	}
	next := cur
	if cur.State != metastore.TxnOngoing {
		next.Partitions, next.StartMs, next.Cause = nil, now, ""
	}
	next.Partitions = cloneTopics(next.Partitions)
	added := cur.State != metastore.TxnOngoing
	for _, tp := range parts {
		if next.AddPartition(tp.Topic, tp.Partition) {
			added = true
		}
	}
	if !added {
		return cur, false, 0 // all there already: nothing to write
	}
	next.State, next.UpdateMs = metastore.TxnOngoing, now
	return next, true, 0
}

// decideEnd decides EndTxn. wait is set when the answer is the completion
// of the decision already being carried out (a retried EndTxn).
func decideEnd(cur metastore.Transaction, exists bool, pid int64, epoch int16, commit bool, now int64) (next metastore.Transaction, changed, wait bool, code int16) {
	if code := checkProducer(cur, exists, pid, epoch); code != 0 {
		return cur, false, false, code
	}
	match := func(state string) bool {
		return (commit && state == metastore.TxnPrepareCommit) || (!commit && state == metastore.TxnPrepareAbort) ||
			(commit && state == metastore.TxnCompleteCommit) || (!commit && state == metastore.TxnCompleteAbort)
	}
	switch cur.State {
	case metastore.TxnOngoing:
		next = cur
		next.State, next.UpdateMs, next.Cause = metastore.TxnPrepareCommit, now, ""
		if !commit {
			next.State, next.Cause = metastore.TxnPrepareAbort, "client"
		}
		return next, true, false, 0
	case metastore.TxnPrepareCommit, metastore.TxnPrepareAbort:
		if match(cur.State) {
			return cur, false, true, 0
		}
	case metastore.TxnCompleteCommit, metastore.TxnCompleteAbort:
		if match(cur.State) {
			return cur, false, false, 0
		}
	}
	return cur, false, false, codeInvalidState
}

// decideTimeout decides whether an ongoing transaction outlived its
// timeout at now: it is aborted under a bumped epoch, which fences the
// producer that let it run out.
func decideTimeout(cur metastore.Transaction, now int64) (metastore.Transaction, bool) {
	if cur.State != metastore.TxnOngoing || now-cur.StartMs <= int64(cur.TimeoutMs) {
		return cur, false
	}
	next := cur
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	next.LastProducerEpoch = -1
	next.State, next.Cause, next.UpdateMs = metastore.TxnPrepareAbort, "timeout", now
	return next, true
}

// completed is the state after a Prepare* state's markers are all written.
func completed(cur metastore.Transaction, now int64) metastore.Transaction {
	next := cur
	next.State = metastore.TxnCompleteCommit
	if cur.State == metastore.TxnPrepareAbort {
		next.State = metastore.TxnCompleteAbort
	}
	next.Partitions, next.UpdateMs = nil, now
	return next
}

// verify answers a partition leader (or group coordinator) asking whether
// a partition is part of the producer's ongoing transaction (KIP-890).
func verify(cur metastore.Transaction, exists bool, pid int64, epoch int16, tp TopicPartition) int16 {
	if code := checkProducer(cur, exists, pid, epoch); code != 0 {
		return code
	}
	if cur.State != metastore.TxnOngoing || !cur.HasPartition(tp.Topic, tp.Partition) {
		return codeInvalidState
	}
	return 0
}

func cloneTopics(ts []metastore.TxnTopic) []metastore.TxnTopic {
	out := make([]metastore.TxnTopic, len(ts))
	for i, t := range ts {
		out[i] = metastore.TxnTopic{Topic: t.Topic, Partitions: append([]int32(nil), t.Partitions...)}
	}
	return out
}

// partitionsOf lists a transaction's partitions.
func partitionsOf(t metastore.Transaction) []TopicPartition {
	var out []TopicPartition
	for _, tt := range t.Partitions {
		for _, p := range tt.Partitions {
			out = append(out, TopicPartition{Topic: tt.Topic, Partition: p})
		}
	}
	return out
}
