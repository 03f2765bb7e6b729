package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/segment"
)

// Registry returns the broker's Confluent-compatible schema registry (an
// http.Handler serving the API at the root path). Every broker serves the
// same registry: its state lives in the metastore.
func (b *Broker) Registry() http.Handler { return b.registry }

var schemaDecompressor = kgo.DefaultDecompressor()

// checkSchemas enforces strata.schema.validation on a batch: every record
// value must start with the Confluent header (magic byte 0, then a 4-byte
// schema id) naming an id registered under <topic>-value. Otherwise the
// whole batch is refused with INVALID_RECORD and nothing is stored.
func checkSchemas(b *Broker, topicName string, batch []byte, h segment.Header) error {
	body := batch[segment.HeaderSize:h.Size()]
	if codec := kgo.CompressionCodecType(h.Compression()); codec != kgo.CodecNone {
		var err error
		if body, err = schemaDecompressor.Decompress(body, codec); err != nil {
			return coded(kerr.CorruptMessage, "decompress record batch: %v", err)
		}
	}
	subject := topicName + "-value"
	checked := map[int]bool{}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(body)
		if n <= 0 || length < 0 || int64(len(body)-n) < length {
			return coded(kerr.CorruptMessage, "record %d of the batch is malformed", i)
		}
		var r kmsg.Record
		if err := r.ReadFrom(body[:n+int(length)]); err != nil {
			return coded(kerr.CorruptMessage, "record %d of the batch: %v", i, err)
		}
		body = body[n+int(length):]
		v := r.Value
		if len(v) < 5 || v[0] != 0 {
			return coded(kerr.InvalidRecord, "record %d: %s=true and the value does not start with the schema registry header (magic byte 0 and a 4-byte schema id)", i, "strata.schema.validation")
		}
		id := int(int32(binary.BigEndian.Uint32(v[1:5])))
		if checked[id] {
			continue
		}
		ok, err := b.registry.SubjectHasID(ctx, subject, id)
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			// The registry cannot answer: retriable, nothing stored.
			return coded(kerr.RequestTimedOut, "look up schema id %d under %q: %v", id, subject, err)
		case err != nil:
			return err
		case !ok:
			return coded(kerr.InvalidRecord, "record %d: schema id %d is not registered under subject %q", i, id, subject)
		}
		checked[id] = true
	}
	return nil
}
