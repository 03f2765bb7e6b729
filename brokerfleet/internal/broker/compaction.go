package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/cleaner"
	"github.com/stratamq/strata/brokerfleet/internal/metrics"
	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/pkg/segment"
)

// What the broker does for compacted topics besides running the cleaner
// (package cleaner): refusing records without a key, and the cleaner's
// metrics.

// checkKeys refuses a batch for a compacted topic that holds a record
// without a key: INVALID_RECORD, as Kafka 4 answers, nothing stored. The
// batch is read as a stream, at most records.Bound of max.message.bytes
// (one that inflates further, or does not parse, is INVALID_RECORD too).
func checkKeys(topicName string, batch []byte, h segment.Header, maxMessageBytes int32) error {
	err := records.CheckKeys(batch, h, records.Bound(maxMessageBytes, len(batch)))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, records.ErrTooLarge), errors.Is(err, records.ErrMalformed):
		return fmt.Errorf("%s: %w", topicName, err)
	}
	return coded(kerr.InvalidRecord, "%s is compacted (cleanup.policy contains compact) and every record needs a key: %v", topicName, err)
}

// cleanerStats adapts the cleaner's state to the metrics.
func cleanerStats(c *cleaner.Cleaner) metrics.CleanerStats {
	s := c.Stats()
	out := metrics.CleanerStats{ReadBytes: s.ReadBytes, WrittenBytes: s.WrittenBytes, Passes: s.Passes,
		DirtyBytes: s.DirtyBytes, BusySeconds: s.Busy.Seconds()}
	for _, p := range s.Partitions {
		out.Partitions = append(out.Partitions, metrics.CleanerPartition{Topic: p.Topic, Partition: p.Partition,
			DirtyRatio: p.DirtyRatio, LastClean: p.LastClean, Uncleanable: p.Uncleanable})
	}
	return out
}
