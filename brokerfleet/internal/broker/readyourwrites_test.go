package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// Once CreateTopics, IncrementalAlterConfigs, CreatePartitions or
// DeleteTopics has answered success through one broker, every other
// broker's Metadata and DescribeConfigs answers show it at once (kadm,
// Terraform providers and operators read back what they wrote, from any
// broker).
func TestMetadataReadYourWrites(t *testing.T) {
	brokers := startCluster(t, 3)
	seeds := []string{}
	for _, b := range brokers {
		seeds = append(seeds, b.Addr)
	}
	cl := brokertest.Client(t, seeds[0])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	on := func(id int32, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(int(id)).Request(ctx, req)
		require.NoError(t, err)
		return resp
	}
	others := func(id int32) []int32 { return []int32{(id + 1) % 3, (id + 2) % 3} }
	describe := func(id int32, name string) map[string]string {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: name, ConfigNames: []string{"retention.ms"}}}
		r := on(id, req).(*kmsg.DescribeConfigsResponse).Resources[0]
		require.Zero(t, r.ErrorCode, "broker %d: DescribeConfigs %s: %v", id, name, r.ErrorCode)
		out := map[string]string{}
		for _, c := range r.Configs {
			out[c.Name] = *c.Value
		}
		return out
	}
	partitions := func(id int32, name string) (int, int16) {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(name)}}
		mt := on(id, req).(*kmsg.MetadataResponse).Topics[0]
		return len(mt.Partitions), mt.ErrorCode
	}
	for i := range 100 {
		writer := int32(i % 3)
		name := fmt.Sprintf("ryw-%d", i)
		create := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 1, 1
		ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}
		create.Topics = []kmsg.CreateTopicsRequestTopic{ct}
		require.Zero(t, on(writer, create).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, "create %s", name)
		for _, id := range others(writer) {
			n, code := partitions(id, name)
			require.Zero(t, code, "broker %d: Metadata of %s right after its creation through %d", id, name, writer)
			require.Equal(t, 1, n)
			require.Equal(t, "3600000", describe(id, name)["retention.ms"], "broker %d: retention.ms of %s", id, name)
		}

		// Alter through another broker; read through the rest.
		alterer := (writer + 1) % 3
		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, name
		ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr(fmt.Sprint(7200000 + i))}}
		alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{ar}
		require.Zero(t, on(alterer, alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
		for _, id := range others(alterer) {
			require.Equal(t, fmt.Sprint(7200000+i), describe(id, name)["retention.ms"], "broker %d after an alter through %d", id, alterer)
		}

		if i%10 == 0 {
			grow := kmsg.NewPtrCreatePartitionsRequest()
			grow.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: name, Count: 3}}
			require.Zero(t, on(writer, grow).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode)
			del := kmsg.NewPtrDeleteTopicsRequest()
			del.TopicNames = []string{name}
			del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(name)}}
			for _, id := range others(writer) {
				n, _ := partitions(id, name)
				require.Equal(t, 3, n, "broker %d: partitions of %s after growing it through %d", id, name, writer)
			}
			require.Zero(t, on(alterer, del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
			for _, id := range others(alterer) {
				_, code := partitions(id, name)
				require.NotZero(t, code, "broker %d still lists %s after its deletion through %d", id, name, alterer)
			}
		}
	}
}
