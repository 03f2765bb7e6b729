package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/pkg/segment"
)

// Registry returns the broker's Confluent-compatible schema registry (an
// http.Handler serving the API at the root path). Every broker serves the
// same registry: its state lives in the metastore.
func (b *Broker) Registry() http.Handler { return b.registry }

// checkSchemas enforces strata.schema.validation on a batch: every record
// value must start with the Confluent header (magic byte 0, then a 4-byte
// schema id) naming an id registered under <topic>-value. Otherwise the
// whole batch is refused with INVALID_RECORD and nothing is stored. A
// compressed batch is inflated as a stream, at most records.Bound of the
// topic's max.message.bytes (a batch that inflates further is refused too).
func checkSchemas(b *Broker, topicName string, batch []byte, h segment.Header, maxMessageBytes int32) error {
	subject := topicName + "-value"
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	// Load the subject's ids now (the registry caches them), not while a
	// batch holds one of the few inflation slots.
	if _, err := b.registry.SubjectHasID(ctx, subject, -1); err != nil {
		return coded(kerr.RequestTimedOut, "look up the schema ids of %q: %v", subject, err)
	}
	var checked []int // the ids seen (a few: a batch has as many records as its bound allows)
	var bad error
	err := records.Each(batch, h, records.Bound(maxMessageBytes, len(batch)), records.Values, func(r *records.Record) bool {
		v := r.Value
		if r.ValueLen < 5 || v[0] != 0 {
			bad = coded(kerr.InvalidRecord, "record %d: %s=true and the value does not start with the schema registry header (magic byte 0 and a 4-byte schema id)", r.Index, "strata.schema.validation")
			return false
		}
		id := int(int32(binary.BigEndian.Uint32(v[1:5])))
		if slices.Contains(checked, id) {
			return true
		}
		ok, err := b.registry.SubjectHasID(ctx, subject, id)
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			// The registry cannot answer: retriable, nothing stored.
			bad = coded(kerr.RequestTimedOut, "look up schema id %d under %q: %v", id, subject, err)
		case err != nil:
			bad = err
		case !ok:
			bad = coded(kerr.InvalidRecord, "record %d: schema id %d is not registered under subject %q", r.Index, id, subject)
		}
		if bad == nil && len(checked) < 16 {
			checked = append(checked, id)
		}
		return bad == nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", topicName, err)
	}
	return bad
}
