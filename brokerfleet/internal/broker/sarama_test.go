package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

func TestSaramaSyncProducerAndPartitionConsumer(t *testing.T) {
	b := brokertest.Start(t)
	for _, version := range []sarama.KafkaVersion{sarama.V2_1_0_0, sarama.V3_6_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			topicName := "sarama-" + version.String()
			brokertest.CreateTopic(t, b.Addr, topicName, 2, nil)
			cfg := sarama.NewConfig()
			cfg.Version = version
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Idempotent = true
			cfg.Producer.Retry.Max = 5
			cfg.Net.MaxOpenRequests = 1
			cfg.Consumer.MaxWaitTime = 100 * time.Millisecond

			prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
			require.NoError(t, err)
			defer prod.Close()
			const n = 500
			want := map[int32][]*sarama.ProducerMessage{}
			for i := 0; i < n; i++ {
				m := &sarama.ProducerMessage{
					Topic:   topicName,
					Key:     sarama.StringEncoder(fmt.Sprintf("k%d", i%10)),
					Value:   sarama.StringEncoder(fmt.Sprintf("value %d", i)),
					Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}},
				}
				p, off, err := prod.SendMessage(m)
				require.NoError(t, err)
				require.Equal(t, int64(len(want[p])), off, "offsets are dense per partition")
				want[p] = append(want[p], m)
			}
			require.Len(t, want, 2)

			cons, err := sarama.NewConsumer([]string{b.Addr}, cfg)
			require.NoError(t, err)
			defer cons.Close()
			for p, msgs := range want {
				pc, err := cons.ConsumePartition(topicName, p, sarama.OffsetOldest)
				require.NoError(t, err)
				for i, m := range msgs {
					select {
					case got := <-pc.Messages():
						require.Equal(t, int64(i), got.Offset)
						k, _ := m.Key.Encode()
						v, _ := m.Value.Encode()
						require.Equal(t, k, got.Key)
						require.Equal(t, v, got.Value)
						require.Len(t, got.Headers, 1)
						require.Equal(t, m.Headers[0].Value, got.Headers[0].Value)
					case err := <-pc.Errors():
						t.Fatalf("partition %d: %v", p, err)
					case <-time.After(20 * time.Second):
						t.Fatalf("partition %d: timed out at message %d", p, i)
					}
				}
				require.NoError(t, pc.Close())
			}
		})
	}
}
