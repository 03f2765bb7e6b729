package partition

import (
	"errors"
	"math"

	"github.com/stratamq/strata/pkg/segment"
)

// window is how many recent batches per producer are remembered for
// duplicate detection, as in Kafka (max.in.flight.requests.per.connection
// may be at most 5 with idempotence).
const window = 5

var (
	// ErrOutOfOrderSequence is returned when an idempotent batch's sequence
	// does not follow the producer's last one.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch is returned when a batch carries an epoch older
	// than the producer's current one (a fenced producer).
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
)

type batchMeta struct {
	firstSeq, lastSeq      int32
	baseOffset, lastOffset int64
	appendTime             int64 // LogAppendTime or -1
}

type producerState struct {
	epoch   int16
	batches []batchMeta // oldest first, at most window
	lastTS  int64       // max timestamp of its last batch (DescribeProducers)
}

// producers is the idempotence state of one partition. Not safe for
// concurrent use: the partition's append lock guards it.
type producers map[int64]*producerState

// incrementSequence adds n to seq, wrapping past MaxInt32 to 0 as Kafka does.
func incrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// check validates h against the producer's state. It returns the metadata of
// the original batch when h repeats one of the last window batches.
func (ps producers) check(h segment.Header) (*batchMeta, error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	st := ps[h.ProducerID]
	switch {
	case st == nil:
		// Unknown producer (new, or its batches were all cut): any
		// sequence is accepted, as in Kafka.
		return nil, nil
	case h.ProducerEpoch < st.epoch:
		// Fenced: a newer epoch wrote here (a batch, or a marker of the
		// transaction coordinator that bumped it).
		return nil, ErrInvalidProducerEpoch
	case len(st.batches) == 0:
		// Only markers of it here: any sequence is accepted.
		return nil, nil
	case h.ProducerEpoch > st.epoch:
		if h.BaseSequence != 0 {
			return nil, ErrOutOfOrderSequence
		}
		return nil, nil
	}
	last := incrementSequence(h.BaseSequence, h.LastOffsetDelta)
	for i := range st.batches {
		if b := &st.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			dup := *b
			return &dup, nil
		}
	}
	prev := st.batches[len(st.batches)-1].lastSeq
	if h.BaseSequence != incrementSequence(prev, 1) {
		return nil, ErrOutOfOrderSequence
	}
	return nil, nil
}

// record remembers an appended batch (h carries its assigned offsets). A
// control batch (a transaction marker) only raises the producer's epoch:
// markers carry no sequence numbers.
func (ps producers) record(h segment.Header, appendTime int64) {
	if h.ProducerID < 0 {
		return
	}
	st := ps[h.ProducerID]
	if h.IsControl() {
		switch {
		case st == nil:
			ps[h.ProducerID] = &producerState{epoch: h.ProducerEpoch, lastTS: h.MaxTimestamp}
		case h.ProducerEpoch > st.epoch:
			st.epoch, st.batches = h.ProducerEpoch, st.batches[:0]
		}
		return
	}
	if st == nil {
		st = &producerState{epoch: h.ProducerEpoch}
		ps[h.ProducerID] = st
	}
	if h.ProducerEpoch > st.epoch {
		st.epoch, st.batches = h.ProducerEpoch, st.batches[:0]
	} else if h.ProducerEpoch < st.epoch {
		return
	}
	st.lastTS = h.MaxTimestamp
	if len(st.batches) == window {
		copy(st.batches, st.batches[1:])
		st.batches = st.batches[:window-1]
	}
	st.batches = append(st.batches, batchMeta{
		firstSeq:   h.BaseSequence,
		lastSeq:    incrementSequence(h.BaseSequence, h.LastOffsetDelta),
		baseOffset: h.BaseOffset,
		lastOffset: h.LastOffset(),
		appendTime: appendTime,
	})
}
