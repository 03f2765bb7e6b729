package txn

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/metastore"
)

// The requests a transaction coordinator answers. Each returns Kafka error
// codes; the broker maps PRODUCER_FENCED for old request versions.

func validID(id string) bool { return id != "" && len(id) <= MaxIDBytes }

// InitProducerID handles InitProducerId for a transactional id: a
// producer id and epoch (a new id's first, or the epoch bumped, fencing
// older instances). pid and epoch are the producer's current ones when it
// presents them (v3+, KIP-360), else -1.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, pid int64, epoch int16) (int64, int16, int16) {
	switch {
	case !validID(id):
		return -1, -1, codeInvalidRequest
	case timeout <= 0 || timeout > c.opts.MaxTimeout:
		return -1, -1, codeInvalidTimeout
	}
	e, code := c.acquire(ctx, id)
	if code != 0 {
		return -1, -1, code
	}
	defer c.release(e)
	exp := expected{set: pid >= 0 && epoch >= 0, id: pid, epoch: epoch}
	d := decideInit(e.t, e.exists, e.busy, int32(timeout.Milliseconds()), exp, c.clock.Now().UnixMilli())
	if d.code != 0 {
		return -1, -1, d.code
	}
	if !d.changed {
		return d.next.ProducerID, d.next.ProducerEpoch, 0
	}
	if d.newID {
		nctx, cancel := context.WithTimeout(ctx, metaTimeout)
		id, err := c.opts.NewProducerID(nctx)
		cancel()
		if err != nil {
			c.log.Warn("allocate a producer id", "transactional_id", e.id, "err", err)
			return -1, -1, codeNotAvailable
		}
		d.next.ProducerID = id
	}
	d.next.ID = e.id
	if err := c.write(ctx, e, d.next); err != nil {
		c.log.Warn("init transactional producer", "transactional_id", e.id, "err", err)
		return -1, -1, codeOf(err)
	}
	if d.fence {
		c.log.Info("fencing the previous producer of a transactional id; aborting its transaction", "transactional_id", e.id)
		c.opts.Aborted("fenced")
		c.startCompletion(e)
		return -1, -1, codeConcurrent
	}
	return e.t.ProducerID, e.t.ProducerEpoch, 0
}

// AddPartitions handles AddPartitionsToTxn (v0-3): the partitions join
// the producer's transaction, which begins if it was not ongoing. The
// caller checked that they exist.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) int16 {
	if !validID(id) {
		return codeInvalidRequest
	}
	e, code := c.acquire(ctx, id)
	if code != 0 {
		return code
	}
	defer c.release(e)
	next, changed, code := decideAdd(e.t, e.exists, e.busy, pid, epoch, parts, c.clock.Now().UnixMilli())
	if code != 0 || !changed {
		return code
	}
	if err := c.write(ctx, e, next); err != nil {
		c.log.Warn("add partitions to a transaction", "transactional_id", e.id, "err", err)
		return codeOf(err)
	}
	return 0
}

// AddOffsets handles AddOffsetsToTxn: the group's coordinator shard joins
// the transaction, so its marker completes the group's offsets.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) int16 {
	return c.AddPartitions(ctx, id, pid, epoch, []TopicPartition{GroupPartition(group)})
}

// GroupPartition is the transaction partition standing for a group: its
// coordinator shard under OffsetsTopic.
func GroupPartition(group string) TopicPartition {
	return TopicPartition{Topic: OffsetsTopic, Partition: metastore.GroupShard(group)}
}

// Verify answers whether each partition is part of the producer's ongoing
// transaction (AddPartitionsToTxn v4+ with VerifyOnly, KIP-890): a
// partition leader asks before it takes a producer's first transactional
// batch, a group coordinator before a TxnOffsetCommit.
func (c *Coordinator) Verify(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) []int16 {
	out := make([]int16, len(parts))
	fill := func(code int16) []int16 {
		for i := range out {
			out[i] = code
		}
		return out
	}
	if !validID(id) {
		return fill(codeInvalidRequest)
	}
	e, code := c.acquire(ctx, id)
	if code != 0 {
		return fill(code)
	}
	defer c.release(e)
	for i, tp := range parts {
		out[i] = verify(e.t, e.exists, pid, epoch, tp)
	}
	return out
}

// EndTxn handles EndTxn: the decision is written (PrepareCommit or
// PrepareAbort), its markers start, and the returned function waits a
// while for them before it answers (in the connection's writer).
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) func() int16 {
	code, done, retry := c.endTxn(ctx, id, pid, epoch, commit)
	return func() int16 {
		if code != 0 || done == nil {
			return code
		}
		tm := c.clock.NewTimer(c.opts.EndWait)
		defer tm.Stop()
		select {
		case <-done:
			return 0
		case <-tm.C():
		case <-ctx.Done():
		}
		if retry {
			return codeConcurrent
		}
		return 0 // decided: the markers follow
	}
}

func (c *Coordinator) endTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) (int16, <-chan struct{}, bool) {
	if !validID(id) {
		return codeInvalidRequest, nil, false
	}
	e, code := c.acquire(ctx, id)
	if code != 0 {
		return code, nil, false
	}
	defer c.release(e)
	next, changed, wait, code := decideEnd(e.t, e.exists, pid, epoch, commit, c.clock.Now().UnixMilli())
	switch {
	case code != 0:
		return code, nil, false
	case wait:
		return 0, e.done, true
	case !changed:
		return 0, nil, false
	}
	if e.busy {
		return codeConcurrent, nil, false
	}
	if err := c.write(ctx, e, next); err != nil {
		c.log.Warn("end a transaction", "transactional_id", e.id, "commit", commit, "err", err)
		return codeOf(err), nil, false
	}
	if !commit {
		c.opts.Aborted("client")
	}
	c.startCompletion(e)
	return 0, e.done, false
}

// Describe returns a transactional id's state (DescribeTransactions), or
// the error code: TRANSACTIONAL_ID_NOT_FOUND for an id without state.
func (c *Coordinator) Describe(ctx context.Context, id string) (metastore.Transaction, int16) {
	if !validID(id) {
		return metastore.Transaction{}, codeInvalidRequest
	}
	e, code := c.acquire(ctx, id)
	if code != 0 {
		return metastore.Transaction{}, code
	}
	defer c.release(e)
	if !e.exists {
		return metastore.Transaction{}, kerr.TransactionalIDNotFound.Code
	}
	t := e.t
	t.Partitions = cloneTopics(t.Partitions)
	return t, 0
}

// List returns the transactions this coordinator owns (ListTransactions
// is sent to every broker), loading shards not read yet.
func (c *Coordinator) List(ctx context.Context) ([]metastore.Transaction, int16) {
	if !c.opts.Valid() {
		return nil, codeNotAvailable
	}
	c.mu.Lock()
	shards := make([]*shardState, 0, len(c.shards))
	for _, sh := range c.shards {
		shards = append(shards, sh)
	}
	c.mu.Unlock()
	for _, sh := range shards {
		lctx, cancel := context.WithTimeout(ctx, metaTimeout)
		err := c.loadShard(lctx, sh)
		cancel()
		if err != nil {
			return nil, kerr.CoordinatorLoadInProgress.Code
		}
	}
	c.mu.Lock()
	es := make([]*entry, 0, len(c.txns))
	for _, e := range c.txns {
		es = append(es, e)
	}
	c.mu.Unlock()
	var out []metastore.Transaction
	for _, e := range es {
		e.mu.Lock()
		if !e.gone && e.loaded && e.exists {
			out = append(out, e.t)
		}
		e.mu.Unlock()
	}
	return out, 0
}

// Ongoing counts the transactions this coordinator holds that are not
// complete (ongoing, or decided with markers in flight), for the gauges.
// It never waits: an entry busy with a metastore write is skipped.
func (c *Coordinator) Ongoing() int {
	c.mu.Lock()
	es := make([]*entry, 0, len(c.txns))
	for _, e := range c.txns {
		es = append(es, e)
	}
	c.mu.Unlock()
	n := 0
	for _, e := range es {
		if !e.mu.TryLock() {
			continue
		}
		if !e.gone && e.exists && (e.t.State == metastore.TxnOngoing || preparing(e.t.State)) {
			n++
		}
		e.mu.Unlock()
	}
	return n
}
