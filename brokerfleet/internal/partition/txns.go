package partition

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/stratamq/strata/pkg/segment"
)

// Transactions as one partition sees them. A transactional producer's
// first batch here opens its transaction at the batch's base offset; the
// marker (control batch) the transaction coordinator has the leader write
// closes it. The last stable offset (LSO) is the high watermark or the
// first offset of the oldest transaction not yet closed by a committed
// marker, whichever is lower: read_committed consumers read only below it,
// so they never see part of a transaction before its marker is safe. Each
// abort marker adds an entry to the aborted-transaction list, which
// read_committed fetches carry so clients drop the aborted records.
//
// Transaction state is rebuilt from the log (batch headers, and the bodies
// of control batches) whenever the partition opens or its log is cut, and
// kept by leaders and followers alike, so a new leader has it.

var (
	// ErrInvalidTxnState is returned when a batch does not fit the
	// producer's transaction here: a transactional batch the coordinator
	// did not verify, or a non-transactional one while a transaction of
	// the producer is open.
	ErrInvalidTxnState = errors.New("partition: batch outside its producer's transaction")
	// ErrCoordinatorFenced is returned when a marker carries an older
	// coordinator epoch than an earlier marker of its producer: it comes
	// from a coordinator that has been superseded.
	ErrCoordinatorFenced = errors.New("partition: transaction coordinator fenced")
)

// AbortedTxn is an aborted transaction's range in the log: its first
// batch and its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the abort marker's offset
}

type openTxn struct {
	first int64
	epoch int16
}

// doneTxn is a transaction whose marker was not yet below the high
// watermark when it was written.
type doneTxn struct {
	first, marker int64
}

// TxnGuard is a transactional producer's verification in progress
// (KIP-890): taken before the leader asks the coordinator whether the
// partition is part of the producer's transaction, and honoured by the
// append only if no marker of the producer came between.
type TxnGuard struct {
	pid   int64
	epoch int16
}

// txnState is a partition's transactions. Writes hold Partition.mu and
// txnMu, reads only txnMu.
type txnState struct {
	open    map[int64]openTxn
	done    []doneTxn    // by marker offset
	aborted []AbortedTxn // by LastOffset
	coord   map[int64]int32
	guards  map[int64]*TxnGuard
}

func newTxnState() txnState {
	return txnState{open: map[int64]openTxn{}, coord: map[int64]int32{}, guards: map[int64]*TxnGuard{}}
}

// data records a data batch (its offsets assigned). Holds txnMu.
func (t *txnState) data(h segment.Header) {
	if h.ProducerID < 0 || !h.IsTransactional() {
		return
	}
	if _, ok := t.open[h.ProducerID]; !ok {
		t.open[h.ProducerID] = openTxn{first: h.BaseOffset, epoch: h.ProducerEpoch}
	}
}

// marker records a control batch at offset off. hwm is the high watermark
// now. Holds txnMu.
func (t *txnState) marker(m segment.Marker, off, hwm int64) {
	delete(t.guards, m.ProducerID)
	if m.CoordinatorEpoch > t.coord[m.ProducerID] {
		t.coord[m.ProducerID] = m.CoordinatorEpoch
	} else if _, ok := t.coord[m.ProducerID]; !ok {
		t.coord[m.ProducerID] = m.CoordinatorEpoch
	}
	o, ok := t.open[m.ProducerID]
	if !ok {
		return // nothing of it here: the marker ends no records
	}
	delete(t.open, m.ProducerID)
	if !m.Commit {
		t.aborted = append(t.aborted, AbortedTxn{ProducerID: m.ProducerID, FirstOffset: o.first, LastOffset: off})
	}
	if off >= hwm {
		t.done = append(t.done, doneTxn{first: o.first, marker: off})
	}
}

// lso returns the last stable offset under the high watermark hwm,
// forgetting closed transactions whose markers hwm passed. Holds txnMu.
func (t *txnState) lso(hwm int64) int64 {
	i := 0
	for i < len(t.done) && t.done[i].marker < hwm {
		i++
	}
	if i > 0 {
		t.done = slices.Delete(t.done, 0, i)
	}
	out := hwm
	for _, o := range t.open {
		out = min(out, o.first)
	}
	for _, d := range t.done {
		out = min(out, d.first)
	}
	return out
}

// abortedIn returns the aborted transactions that overlap [from, to).
// Holds txnMu.
func (t *txnState) abortedIn(from, to int64) []AbortedTxn {
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for _, a := range t.aborted[i:] {
		if a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// dropBelow forgets aborted transactions wholly below the log start.
// Holds txnMu.
func (t *txnState) dropBelow(start int64) {
	i := sort.Search(len(t.aborted), func(i int) bool { return t.aborted[i].LastOffset >= start })
	if i > 0 {
		t.aborted = slices.Delete(t.aborted, 0, i)
	}
}

// LastStableOffset returns the partition's last stable offset: what
// read_committed consumers may read below.
func (p *Partition) LastStableOffset() int64 {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	return p.txns.lso(p.hwm.Load())
}

// AbortedTxns returns the aborted transactions that overlap [from, to),
// oldest first, for a read_committed fetch of those offsets.
func (p *Partition) AbortedTxns(from, to int64) []AbortedTxn {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	return p.txns.abortedIn(from, to)
}

// ReadCommitted is Read for read_committed consumers: whole batches below
// the last stable offset.
func (p *Partition) ReadCommitted(dst []byte, offset int64, maxBytes int, minOne bool) ([]byte, error) {
	start := len(dst)
	out, err := p.log.Read(dst, offset, maxBytes, p.LastStableOffset())
	if err != nil {
		return dst, err
	}
	if !minOne && len(out)-start > maxBytes {
		return out[:start], nil
	}
	return out, nil
}

// OpenTxn is a transaction open in the partition.
type OpenTxn struct {
	ProducerID  int64
	Epoch       int16
	FirstOffset int64
}

// OpenTxns returns the transactions open in the partition, by first offset.
func (p *Partition) OpenTxns() []OpenTxn {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	out := make([]OpenTxn, 0, len(p.txns.open))
	for id, o := range p.txns.open {
		out = append(out, OpenTxn{ProducerID: id, Epoch: o.epoch, FirstOffset: o.first})
	}
	slices.SortFunc(out, func(a, b OpenTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out
}

// CoordinatorEpoch returns the coordinator epoch of the last marker of a
// producer here (-1 if none).
func (p *Partition) CoordinatorEpoch(pid int64) int32 {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	if e, ok := p.txns.coord[pid]; ok {
		return e
	}
	return -1
}

// TxnVerified reports whether a transactional batch of producer pid at
// epoch needs no verification: a transaction of it is open here under
// that epoch.
func (p *Partition) TxnVerified(pid int64, epoch int16) bool {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	o, ok := p.txns.open[pid]
	return ok && o.epoch == epoch
}

// GuardTxn starts the verification of a transactional producer's first
// batch here: the append honours the returned guard only if no marker of
// the producer was written since.
func (p *Partition) GuardTxn(pid int64, epoch int16) *TxnGuard {
	g := &TxnGuard{pid: pid, epoch: epoch}
	p.mu.Lock()
	p.txnMu.Lock()
	p.txns.guards[pid] = g
	p.txnMu.Unlock()
	p.mu.Unlock()
	return g
}

// checkTxnLocked checks a data batch against the producer's transaction
// here before it is appended. Holds p.mu.
func (p *Partition) checkTxnLocked(h segment.Header, g *TxnGuard) error {
	if h.ProducerID < 0 {
		return nil
	}
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	o, open := p.txns.open[h.ProducerID]
	switch {
	case !h.IsTransactional():
		if open {
			return fmt.Errorf("producer %d sent a non-transactional batch while its transaction is open: %w", h.ProducerID, ErrInvalidTxnState)
		}
	case open && o.epoch == h.ProducerEpoch:
	case open:
		return fmt.Errorf("producer %d epoch %d: its transaction at epoch %d is not ended: %w", h.ProducerID, h.ProducerEpoch, o.epoch, ErrInvalidTxnState)
	case g == nil || p.txns.guards[h.ProducerID] != g || g.epoch != h.ProducerEpoch:
		return fmt.Errorf("producer %d epoch %d: partition not verified in its transaction: %w", h.ProducerID, h.ProducerEpoch, ErrInvalidTxnState)
	default:
		delete(p.txns.guards, h.ProducerID)
	}
	return nil
}

// AppendMarker writes a transaction marker as the leader: it ends the
// producer's transaction here (if it has one) and, for an abort, adds it
// to the aborted list. A marker of an older producer epoch than the
// partition knows is ErrInvalidProducerEpoch, one of an older coordinator
// epoch than the producer's last marker ErrCoordinatorFenced.
func (p *Partition) AppendMarker(m segment.Marker) (AppendResult, error) {
	batch := segment.AppendControlBatch(nil, m, p.now().UnixMilli())
	h, err := segment.ParseHeader(batch)
	if err != nil {
		return AppendResult{}, err
	}
	cfg := p.cfg.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return AppendResult{}, ErrClosed
	}
	if st := p.producers[m.ProducerID]; st != nil && m.ProducerEpoch < st.epoch {
		return AppendResult{}, fmt.Errorf("marker of producer %d epoch %d, partition has epoch %d: %w", m.ProducerID, m.ProducerEpoch, st.epoch, ErrInvalidProducerEpoch)
	}
	p.txnMu.Lock()
	last, seen := p.txns.coord[m.ProducerID]
	p.txnMu.Unlock()
	if seen && m.CoordinatorEpoch < last {
		return AppendResult{}, fmt.Errorf("marker of producer %d from coordinator epoch %d, last was %d: %w", m.ProducerID, m.CoordinatorEpoch, last, ErrCoordinatorFenced)
	}
	base := p.log.NextOffset()
	segment.SetBaseOffset(batch, base)
	segment.SetPartitionLeaderEpoch(batch, p.LeaderEpoch())
	if err := p.log.Append(batch); err != nil {
		return AppendResult{}, fmt.Errorf("partition %s-%d: %w", p.topic, p.index, err)
	}
	h.BaseOffset = base
	p.producers.record(h, -1)
	p.epochs.note(p.LeaderEpoch(), base)
	p.txnMu.Lock()
	p.txns.marker(m, base, p.hwm.Load())
	p.txnMu.Unlock()
	p.snapshotOnRollLocked()
	p.durableAfterAppendLocked(cfg.Durability)
	p.notifyAppend()
	return AppendResult{BaseOffset: base, LastOffset: base, LogAppendTime: -1, LogStart: p.logStart.Load()}, nil
}

// noteTxnBatches records the transactions of batches appended as they are
// (a follower's, or the log's at open). Holds p.mu.
func (p *Partition) noteTxnBatches(batches []byte) {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	hwm := p.hwm.Load()
	_ = segment.Split(batches, func(h segment.Header, b []byte) error {
		if !h.IsControl() {
			p.txns.data(h)
			return nil
		}
		if m, err := segment.ParseControlBatch(b); err == nil {
			p.txns.marker(m, h.BaseOffset, hwm)
		}
		return nil
	})
}

// rebuildTxnsLocked reads the transaction state from st, the state of
// the batches below from, and the log from there: every batch header, and
// the body of each control batch; each, if not nil, sees every header too
// (New rebuilds the producers' state in the same pass). Holds p.mu (or
// runs before the partition is shared).
func (p *Partition) rebuildTxnsLocked(from int64, st txnState, each func(h segment.Header)) error {
	type ctl struct {
		off   int64
		pid   int64
		first int64 // -1: it closed nothing
	}
	var ctls []ctl
	err := p.log.ScanHeaders(from, func(h segment.Header) bool {
		if each != nil {
			each(h)
		}
		if !h.IsControl() {
			st.data(h)
			return true
		}
		c := ctl{off: h.BaseOffset, pid: h.ProducerID, first: -1}
		if o, ok := st.open[h.ProducerID]; ok {
			c.first = o.first
			delete(st.open, h.ProducerID)
		}
		ctls = append(ctls, c)
		return true
	})
	if err != nil {
		return fmt.Errorf("partition %s-%d: rebuild transactions: %w", p.topic, p.index, err)
	}
	// Control batch bodies: the type of each that closed a transaction,
	// and the coordinator epoch of each producer's last.
	lastOf := map[int64]int{}
	for i, c := range ctls {
		lastOf[c.pid] = i
	}
	end := p.log.NextOffset()
	for i, c := range ctls {
		if c.first < 0 && lastOf[c.pid] != i {
			continue
		}
		b, err := p.log.Read(nil, c.off, 1, end)
		if err != nil {
			return fmt.Errorf("partition %s-%d: read marker at %d: %w", p.topic, p.index, c.off, err)
		}
		m, err := segment.ParseControlBatch(b)
		if err != nil {
			continue // not ours to judge: the log holds it, clients skip it
		}
		if lastOf[c.pid] == i {
			st.coord[c.pid] = m.CoordinatorEpoch
		}
		if c.first >= 0 {
			if !m.Commit {
				st.aborted = append(st.aborted, AbortedTxn{ProducerID: c.pid, FirstOffset: c.first, LastOffset: c.off})
			}
			st.done = append(st.done, doneTxn{first: c.first, marker: c.off})
		}
	}
	p.txnMu.Lock()
	p.txns = st
	p.txnMu.Unlock()
	return nil
}

// dropAbortedBelow forgets the aborted transactions wholly below start
// (retention or DeleteRecords moved the log start past them).
func (p *Partition) dropAbortedBelow(start int64) {
	p.txnMu.Lock()
	p.txns.dropBelow(start)
	p.txnMu.Unlock()
}

// ProducerInfo is what the partition knows of a producer
// (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32 // -1: none known
	LastTimestamp    int64
	CoordinatorEpoch int32 // of its last marker; -1: none
	TxnStartOffset   int64 // its open transaction's first offset; -1: none
}

// Producers returns the producers the partition knows, by id.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	out := make([]ProducerInfo, 0, len(p.producers))
	for id, st := range p.producers {
		pi := ProducerInfo{ProducerID: id, Epoch: st.epoch, LastSequence: -1, LastTimestamp: st.lastTS, CoordinatorEpoch: -1, TxnStartOffset: -1}
		if n := len(st.batches); n > 0 {
			pi.LastSequence = st.batches[n-1].lastSeq
		}
		if e, ok := p.txns.coord[id]; ok {
			pi.CoordinatorEpoch = e
		}
		if o, ok := p.txns.open[id]; ok {
			pi.TxnStartOffset = o.first
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}
