package tier

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

// Transactions in the tier. Segments are uploaded only below the last
// stable offset (partition.ClosedSegments), so every transaction with
// records in a segment object is decided by the time it is uploaded; the
// aborted ones that overlap it go to an object of their own beside it
// (SegmentRef.Aborted: 24-byte entries, producer id, first offset, abort
// marker offset, big endian), and a read_committed fetch served from the
// tier carries them like one served from disk.

// AbortedTxn is an aborted transaction's range.
type AbortedTxn = partition.AbortedTxn

const abortedEntry = 24

// AbortedKey is the key of a segment object's aborted-transaction object.
func AbortedKey(segmentKey string) string {
	return strings.TrimSuffix(segmentKey, ".log") + ".aborted"
}

func encodeAborted(as []AbortedTxn) []byte {
	out := make([]byte, 0, len(as)*abortedEntry)
	for _, a := range as {
		out = binary.BigEndian.AppendUint64(out, uint64(a.ProducerID))
		out = binary.BigEndian.AppendUint64(out, uint64(a.FirstOffset))
		out = binary.BigEndian.AppendUint64(out, uint64(a.LastOffset))
	}
	return out
}

func decodeAborted(b []byte) ([]AbortedTxn, error) {
	if len(b)%abortedEntry != 0 {
		return nil, fmt.Errorf("aborted-transaction object of %d bytes: %w", len(b), segment.ErrCorrupt)
	}
	out := make([]AbortedTxn, len(b)/abortedEntry)
	for i := range out {
		e := b[i*abortedEntry:]
		out[i] = AbortedTxn{ProducerID: int64(binary.BigEndian.Uint64(e)), FirstOffset: int64(binary.BigEndian.Uint64(e[8:])),
			LastOffset: int64(binary.BigEndian.Uint64(e[16:]))}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastOffset < out[j].LastOffset })
	return out, nil
}

// abortedOf returns a segment object's aborted transactions (cached).
func (t *Tier) abortedOf(ctx context.Context, ref metastore.SegmentRef) ([]AbortedTxn, error) {
	if ref.Aborted == "" {
		return nil, nil
	}
	t.mu.Lock()
	as, ok := t.aborted[ref.Aborted]
	t.mu.Unlock()
	if ok {
		return as, nil
	}
	b, err := t.opts.Store.Get(ctx, ref.Aborted, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("tier: read %s: %w", ref.Aborted, err)
	}
	if as, err = decodeAborted(b); err != nil {
		return nil, fmt.Errorf("tier: %s: %w", ref.Aborted, err)
	}
	t.mu.Lock()
	if len(t.aborted) > 4096 {
		clear(t.aborted) // a crude bound, as for indexes
	}
	t.aborted[ref.Aborted] = as
	t.mu.Unlock()
	return as, nil
}

// ReadCommitted is Read for a read_committed consumer: batches below lso,
// and the aborted transactions that overlap them.
func (t *Tier) ReadCommitted(ctx context.Context, man metastore.Manifest, offset int64, maxBytes int, lso int64) ([]byte, []AbortedTxn, error) {
	data, err := t.Read(ctx, man, offset, maxBytes)
	if err != nil || len(data) == 0 {
		return data, nil, err
	}
	end, keep := offset, 0
	_ = segment.Split(data, func(h segment.Header, b []byte) error {
		if h.LastOffset() >= lso {
			return errStop
		}
		end, keep = h.LastOffset()+1, keep+len(b)
		return nil
	})
	data = data[:keep]
	if keep == 0 {
		return data, nil, nil
	}
	ref, _ := find(man, offset)
	as, err := t.abortedOf(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	var out []AbortedTxn
	for _, a := range as {
		if a.LastOffset >= offset && a.FirstOffset < end {
			out = append(out, a)
		}
	}
	return data, out, nil
}

var errStop = fmt.Errorf("stop")

// ReadCommitted serves a read_committed fetch below the local log start
// from S3 (see Tier.ReadCommitted).
func (tg *Manager) ReadCommitted(ctx context.Context, id metastore.TopicID, idx int32, offset int64, maxBytes int, lso int64) ([]byte, []AbortedTxn, error) {
	man, ok := tg.manifest(id, idx)
	if !ok {
		return nil, nil, fmt.Errorf("tier of partition %d: %w", idx, ErrNotLoaded)
	}
	return tg.t.ReadCommitted(ctx, man, offset, maxBytes, lso)
}
