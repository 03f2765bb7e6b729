package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/cleaner"
	"github.com/stratamq/strata/brokerfleet/internal/metrics"
	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/pkg/segment"
)

// What the broker does for compacted topics besides running the cleaner
// (package cleaner): refusing records without a key, and the cleaner's
// metrics.

// maxKeyCheckBytes bounds the decompressed size of a batch whose keys are
// checked (a compressed batch that inflates past it is refused).
const maxKeyCheckBytes = 64 << 20

// checkKeys refuses a batch for a compacted topic that holds a record
// without a key: INVALID_RECORD, as Kafka 4 answers, nothing stored.
func checkKeys(topicName string, batch []byte, h segment.Header) error {
	if err := records.CheckKeys(batch, h, maxKeyCheckBytes); err != nil {
		return coded(kerr.InvalidRecord, "%s is compacted (cleanup.policy contains compact) and every record needs a key: %v", topicName, err)
	}
	return nil
}

// cleanerStats adapts the cleaner's state to the metrics.
func cleanerStats(c *cleaner.Cleaner) metrics.CleanerStats {
	s := c.Stats()
	out := metrics.CleanerStats{ReadBytes: s.ReadBytes, WrittenBytes: s.WrittenBytes, Passes: s.Passes}
	for _, p := range s.Partitions {
		out.Partitions = append(out.Partitions, metrics.CleanerPartition{Topic: p.Topic, Partition: p.Partition,
			DirtyRatio: p.DirtyRatio, LastClean: p.LastClean, Uncleanable: p.Uncleanable})
	}
	return out
}
