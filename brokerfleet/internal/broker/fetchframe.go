package broker

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"

	"github.com/stratamq/strata/brokerfleet/internal/wire"
	"github.com/stratamq/strata/pkg/segment"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch response is mostly record batches read from the log. Encoding
// it with kmsg copies every batch into the frame; instead the batches go
// to the socket from the buffers they were read into, with one writev:
// the response is encoded with a marker in place of each large record
// set, and the frame is cut at the markers.

// vectorMinBytes is the smallest record set sent from its own buffer:
// smaller ones cost less to copy than an extra iovec.
const vectorMinBytes = 8 << 10

// fetchMarker stands in for a record set while the response is encoded.
// It is random per process: topic names and the other fields encoded
// around it cannot hold it by accident.
var fetchMarker = func() []byte {
	m := make([]byte, 16)
	rand.Read(m)
	return m
}()

// framePiece is a part of a frame: bytes, or a record set in its file.
type framePiece struct {
	b    []byte
	span *segment.Span
}

// fetchFrame returns resp's frame as pieces to write in order, the large
// record sets among them uncopied (the spans of held, fetchspans.go, in
// place of their placeholders), or false if resp has no record set worth
// sending apart (then wire.AppendResponse is the way). The encoded fields
// go into dst, which is returned (grown) for reuse once the pieces are
// written. resp is left as it was.
func fetchFrame(dst []byte, corr int32, resp *kmsg.FetchResponse, held *fetchBufs) ([]framePiece, []byte, bool) {
	var sets [][]byte
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			sp := &resp.Topics[i].Partitions[j]
			if len(sp.RecordBatches) >= vectorMinBytes {
				sets = append(sets, sp.RecordBatches)
				sp.RecordBatches = fetchMarker
			}
		}
	}
	if len(sets) == 0 {
		return nil, dst, false
	}
	dst = wire.AppendResponse(dst[:0], corr, resp)
	k := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if sp := &resp.Topics[i].Partitions[j]; len(sp.RecordBatches) > 0 && &sp.RecordBatches[0] == &fetchMarker[0] {
				sp.RecordBatches = sets[k]
				k++
			}
		}
	}

	// The marker's length prefix: a compact (uvarint length+1) or int32
	// length before it.
	prefix := 4
	if resp.IsFlexible() {
		prefix = 1 // uvarint(17)
	}
	lens := make([]byte, 0, len(sets)*binary.MaxVarintLen32) // never reallocated: pieces point into it
	out := make([]framePiece, 0, 2*len(sets)+1)
	total, pos := 0, 0
	for _, set := range sets {
		i := pos + bytes.Index(dst[pos:], fetchMarker)
		if i < pos+prefix {
			return nil, dst, false // cannot happen (kmsg encodes every record set); the caller encodes it whole
		}
		out = append(out, framePiece{b: dst[pos : i-prefix]})
		l := len(lens)
		if prefix == 1 {
			lens = binary.AppendUvarint(lens, uint64(len(set))+1)
		} else {
			lens = binary.BigEndian.AppendUint32(lens, uint32(len(set)))
		}
		out = append(out, framePiece{b: lens[l:]})
		if span := held.spanOf(set); span != nil {
			out = append(out, framePiece{span: span})
		} else {
			out = append(out, framePiece{b: set})
		}
		total += i - prefix - pos + len(lens) - l + len(set)
		pos = i + len(fetchMarker)
	}
	out = append(out, framePiece{b: dst[pos:]})
	total += len(dst) - pos
	binary.BigEndian.PutUint32(dst[0:4], uint32(total-4))
	return out, dst, true
}

// writePieces writes a frame's pieces to w: runs of bytes with one
// writev each (on a connection), spans with sendfile.
func writePieces(w io.Writer, pieces []framePiece) error {
	for _, p := range pieces {
		if p.span != nil {
			defer cork(w)()
			break
		}
	}
	var run net.Buffers
	for i, p := range pieces {
		if p.span == nil {
			if len(p.b) > 0 {
				run = append(run, p.b)
			}
			if i < len(pieces)-1 {
				continue
			}
		}
		if len(run) > 0 {
			if _, err := run.WriteTo(w); err != nil {
				return err
			}
			run = run[:0]
		}
		if p.span != nil {
			if err := sendSpan(w, p.span); err != nil {
				return err
			}
		}
	}
	return nil
}
