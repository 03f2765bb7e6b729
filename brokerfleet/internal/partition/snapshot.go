package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/stratamq/strata/pkg/segment"
)

// A partition's header-derived state (the producers' idempotence windows,
// the leader-epoch history and the transactions) is snapshotted into the
// log when a segment rolls (segment.Log.WriteSnapshot), as Kafka writes a
// producer snapshot per segment. Opening reads the newest snapshot and
// walks only the headers after it, so a broker with a long log is ready
// after reading the last segment or so, not every header it holds. The
// log removes snapshots that a truncation or reset makes untrue; a
// snapshot that cannot be read or decoded is passed over for an older
// one, or for a walk of the whole log.

const stateVersion = 1

// snapshotOnRollLocked writes a snapshot covering the whole log when the
// log rolled since the last one. Holds p.mu, after the state took in what
// was appended. A failed write costs a longer walk at the next open, no
// more: it is not an append error.
func (p *Partition) snapshotOnRollLocked() {
	base := p.log.ActiveBase()
	if base == p.snapBase {
		return
	}
	p.snapBase = base
	if err := p.log.WriteSnapshot(p.log.NextOffset(), p.encodeStateLocked()); err != nil {
		p.snapErr.Store(&err)
	}
}

// SnapshotError returns the last error writing a snapshot, if any.
func (p *Partition) SnapshotError() error {
	if e := p.snapErr.Load(); e != nil {
		return *e
	}
	return nil
}

// encodeStateLocked encodes the producers, epochs and transactions.
// Holds p.mu.
func (p *Partition) encodeStateLocked() []byte {
	b := []byte{stateVersion}
	ids := slices.Sorted(maps.Keys(p.producers))
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		st := p.producers[id]
		b = binary.AppendVarint(b, id)
		b = binary.AppendVarint(b, int64(st.epoch))
		b = binary.AppendVarint(b, st.lastTS)
		b = binary.AppendUvarint(b, uint64(len(st.batches)))
		for _, m := range st.batches {
			b = binary.AppendVarint(b, int64(m.firstSeq))
			b = binary.AppendVarint(b, int64(m.lastSeq))
			b = binary.AppendVarint(b, m.baseOffset)
			b = binary.AppendVarint(b, m.lastOffset)
			b = binary.AppendVarint(b, m.appendTime)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(p.epochs)))
	for _, e := range p.epochs {
		b = binary.AppendVarint(b, int64(e.epoch))
		b = binary.AppendVarint(b, e.start)
	}
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	t := &p.txns
	open := slices.Sorted(maps.Keys(t.open))
	b = binary.AppendUvarint(b, uint64(len(open)))
	for _, id := range open {
		o := t.open[id]
		b = binary.AppendVarint(b, id)
		b = binary.AppendVarint(b, o.first)
		b = binary.AppendVarint(b, int64(o.epoch))
	}
	b = binary.AppendUvarint(b, uint64(len(t.done)))
	for _, d := range t.done {
		b = binary.AppendVarint(b, d.first)
		b = binary.AppendVarint(b, d.marker)
	}
	b = binary.AppendUvarint(b, uint64(len(t.aborted)))
	for _, a := range t.aborted {
		b = binary.AppendVarint(b, a.ProducerID)
		b = binary.AppendVarint(b, a.FirstOffset)
		b = binary.AppendVarint(b, a.LastOffset)
	}
	coords := slices.Sorted(maps.Keys(t.coord))
	b = binary.AppendUvarint(b, uint64(len(coords)))
	for _, id := range coords {
		b = binary.AppendVarint(b, id)
		b = binary.AppendVarint(b, int64(t.coord[id]))
	}
	return b
}

// savedState is a decoded snapshot.
type savedState struct {
	producers producers
	epochs    epochCache
	txns      txnState
}

// stateReader decodes varints, remembering the first error.
type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated or overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length, bounded by the bytes left (every entry takes at
// least one), so a bad length cannot ask for a huge allocation.
func (r *stateReader) count() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)-n) {
		r.err = errors.New("bad count")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *stateReader) int32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.err = fmt.Errorf("%d out of int32 range", v)
	}
	return int32(v)
}

func (r *stateReader) int16() int16 {
	v := r.varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		r.err = fmt.Errorf("%d out of int16 range", v)
	}
	return int16(v)
}

// decodeState decodes what encodeStateLocked wrote.
func decodeState(b []byte) (savedState, error) {
	if len(b) == 0 || b[0] != stateVersion {
		return savedState{}, errors.New("partition state: unknown version")
	}
	r := &stateReader{b: b[1:]}
	s := savedState{producers: producers{}, txns: newTxnState()}
	for range r.count() {
		id := r.varint()
		st := &producerState{epoch: r.int16(), lastTS: r.varint()}
		n := r.count()
		if n > window {
			r.err = fmt.Errorf("producer %d: %d batches", id, n)
		}
		for range n {
			st.batches = append(st.batches, batchMeta{firstSeq: r.int32(), lastSeq: r.int32(),
				baseOffset: r.varint(), lastOffset: r.varint(), appendTime: r.varint()})
		}
		s.producers[id] = st
	}
	for range r.count() {
		s.epochs = append(s.epochs, epochStart{epoch: r.int32(), start: r.varint()})
	}
	for range r.count() {
		id := r.varint()
		s.txns.open[id] = openTxn{first: r.varint(), epoch: r.int16()}
	}
	for range r.count() {
		s.txns.done = append(s.txns.done, doneTxn{first: r.varint(), marker: r.varint()})
	}
	for range r.count() {
		s.txns.aborted = append(s.txns.aborted, AbortedTxn{ProducerID: r.varint(), FirstOffset: r.varint(), LastOffset: r.varint()})
	}
	for range r.count() {
		id := r.varint()
		s.txns.coord[id] = r.int32()
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes left over", len(r.b))
	}
	if r.err != nil {
		return savedState{}, fmt.Errorf("partition state: %w", r.err)
	}
	return s, nil
}

// restoreLocked sets the producers, epochs and transactions to those of
// the log: the newest snapshot at or below upTo and the headers after it,
// or every header without one. Holds p.mu (or runs before the partition
// is shared).
func (p *Partition) restoreLocked(upTo int64) error {
	from, txns := p.log.StartOffset(), newTxnState()
	p.producers, p.epochs = producers{}, nil
	if saved, off, ok := p.loadSnapshot(upTo); ok {
		p.producers, p.epochs, txns = saved.producers, saved.epochs, saved.txns
		from = max(from, off)
	}
	err := p.rebuildTxnsLocked(from, txns, func(h segment.Header) {
		appendTime := int64(-1)
		if h.LogAppendTime() {
			appendTime = h.MaxTimestamp
		}
		p.producers.record(h, appendTime)
		p.epochs.note(h.PartitionLeaderEpoch, h.BaseOffset)
	})
	if err != nil {
		return fmt.Errorf("partition %s-%d: rebuild producer state: %w", p.topic, p.index, err)
	}
	return nil
}

// loadSnapshot returns the newest snapshot at or below upTo that decodes,
// and the offset its walk resumes at.
func (p *Partition) loadSnapshot(upTo int64) (savedState, int64, bool) {
	off, data, ok, err := p.log.LatestSnapshot(upTo)
	if err != nil || !ok {
		return savedState{}, 0, false
	}
	s, err := decodeState(data)
	if err != nil {
		return savedState{}, 0, false
	}
	return s, off, true
}
