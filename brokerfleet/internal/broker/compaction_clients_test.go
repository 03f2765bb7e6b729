package broker_test

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// TestKcatConsumesGaps: librdkafka (kcat) reads a cleaned compacted
// topic, whose batches have gaps and whose log ends past its last record,
// from the beginning to the end of the partition (-e): exactly the
// records kept, at their offsets.
func TestKcatConsumesGaps(t *testing.T) {
	kcat := brokertest.RequireTool(t, "kcat")
	g := newGappedTable(t, "kcat-gaps", 20, 30)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kcat, "-b", g.b.Addr, "-t", g.topic, "-C", "-e", "-q", "-o", "beginning", "-f", "%o %k %s\n")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kcat consume: %s", stderr.String())
	var want []string
	for _, r := range g.kept {
		want = append(want, strings.Join([]string{strconv.FormatInt(r.Offset, 10), r.Key, r.Value}, " "))
	}
	require.Equal(t, want, strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"))
}

// TestSaramaConsumesGaps: Sarama's partition consumer reads the same
// table from the oldest offset: the records kept, in order, at their
// offsets, and then nothing more (it does not stall or repeat at a gap).
func TestSaramaConsumesGaps(t *testing.T) {
	g := newGappedTable(t, "sarama-gaps", 20, 30)
	for _, version := range []sarama.KafkaVersion{sarama.V2_1_0_0, sarama.V3_6_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Version = version
			cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
			cons, err := sarama.NewConsumer([]string{g.b.Addr}, cfg)
			require.NoError(t, err)
			defer cons.Close()
			pc, err := cons.ConsumePartition(g.topic, 0, sarama.OffsetOldest)
			require.NoError(t, err)
			defer pc.Close()
			for i, r := range g.kept {
				select {
				case m := <-pc.Messages():
					require.Equal(t, r.Offset, m.Offset, "record %d", i)
					require.Equal(t, r.Key, string(m.Key))
					require.Equal(t, r.Value, string(m.Value))
				case err := <-pc.Errors():
					t.Fatalf("record %d: %v", i, err)
				case <-time.After(20 * time.Second):
					t.Fatalf("timed out at record %d (offset %d)", i, r.Offset)
				}
			}
			select {
			case m := <-pc.Messages():
				t.Fatalf("a record past the table: offset %d", m.Offset)
			case <-time.After(500 * time.Millisecond):
			}
			require.Equal(t, g.hwm, pc.HighWaterMarkOffset())
		})
	}
}
