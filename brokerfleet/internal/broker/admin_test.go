package broker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

func TestCreateTopicsValidation(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr)
	ctx := context.Background()
	create := func(name string, parts int32, rf int16, configs map[string]*string) error {
		resp, err := adm.CreateTopic(ctx, parts, rf, configs, name)
		if err != nil {
			return err // kadm reports the topic's error here too
		}
		return resp.Err
	}
	require.ErrorIs(t, create("bad/name", 1, 1, nil), kerr.InvalidTopicException)
	require.ErrorIs(t, create("..", 1, 1, nil), kerr.InvalidTopicException)
	require.ErrorIs(t, create(strings.Repeat("x", 250), 1, 1, nil), kerr.InvalidTopicException)
	require.ErrorIs(t, create("zero", 0, 1, nil), kerr.InvalidPartitions)
	require.ErrorIs(t, create("rf3", 1, 3, nil), kerr.InvalidReplicationFactor)

	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": strp("soon")}, "badcfg")
	require.ErrorIs(t, err, kerr.InvalidConfig)
	require.Contains(t, resp.ErrMessage, "retention.ms", "the message names the config")
	resp, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": strp("1")}, "badcfg")
	require.ErrorIs(t, err, kerr.InvalidConfig)
	require.Contains(t, resp.ErrMessage, "no.such.config")

	require.NoError(t, create("orders", 3, -1, nil))
	require.ErrorIs(t, create("orders", 3, 1, nil), kerr.TopicAlreadyExists)
	require.NoError(t, create("a.b", 1, 1, nil))
	require.ErrorIs(t, create("a_b", 1, 1, nil), kerr.TopicAlreadyExists, "'.' and '_' collide")

	md, err := adm.Metadata(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, md.Topics["orders"].Partitions, 3)
}

func TestTopicConfigs(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr)
	ctx := context.Background()
	brokertest.CreateTopic(t, b.Addr, "cfg", 1, map[string]*string{"retention.ms": strp("1000")})

	describe := func() map[string]kadm.Config {
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		require.NoError(t, err)
		rc, err := rcs.On("cfg", nil)
		require.NoError(t, err)
		require.NoError(t, rc.Err)
		m := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			m[c.Key] = c
		}
		return m
	}
	m := describe()
	require.Equal(t, "1000", *m["retention.ms"].Value)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, m["retention.ms"].Source)
	require.Equal(t, "1073741824", *m["segment.bytes"].Value, "defaults are shown")
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, m["segment.bytes"].Source)
	require.Equal(t, "replicated", *m["strata.durability"].Value)
	for _, k := range []string{"retention.bytes", "segment.ms", "max.message.bytes", "min.insync.replicas", "cleanup.policy", "message.timestamp.type"} {
		require.Contains(t, m, k)
	}

	// Incremental: set one, delete another.
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("60000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	m = describe()
	require.Equal(t, "60000", *m["segment.ms"].Value)
	require.Equal(t, "604800000", *m["retention.ms"].Value)

	// A bad value is refused with a message naming it, and nothing changes.
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: strp("compact,shred")}}, "cfg")
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, kerr.InvalidConfig)
	require.Contains(t, res[0].ErrMessage, "cleanup.policy")
	require.Equal(t, "delete", *describe()["cleanup.policy"].Value)

	// Non-incremental AlterConfigs replaces all overrides.
	res, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: strp("5000")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	m = describe()
	require.Equal(t, "5000", *m["max.message.bytes"].Value)
	require.Equal(t, "604800000", *m["segment.ms"].Value, "the old override is gone")

	// Configs survive a restart.
	b2 := b.Restart(t)
	rcs, err := brokertest.Admin(t, b2.Addr).DescribeTopicConfigs(ctx, "cfg")
	require.NoError(t, err)
	rc, _ := rcs.On("cfg", nil)
	found := false
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" {
			found = true
			require.Equal(t, "5000", *c.Value)
		}
	}
	require.True(t, found)
}

func TestPartitionsDeleteAndCluster(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr)
	ctx := context.Background()
	brokertest.CreateTopic(t, b.Addr, "grow", 2, nil)

	res, err := adm.CreatePartitions(ctx, 3, "grow") // adds 3: 2 -> 5
	require.NoError(t, err)
	require.NoError(t, res["grow"].Err)
	res, err = adm.UpdatePartitions(ctx, 4, "grow")
	require.NoError(t, err)
	require.ErrorIs(t, res["grow"].Err, kerr.InvalidPartitions)
	md, err := adm.Metadata(ctx, "grow")
	require.NoError(t, err)
	require.Len(t, md.Topics["grow"].Partitions, 5)

	// New partitions take records.
	cl := brokertest.Client(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Partition: 4, Value: []byte("x")}).FirstErr())

	dr, err := adm.DeleteTopics(ctx, "grow")
	require.NoError(t, err)
	require.NoError(t, dr["grow"].Err)
	md, err = adm.Metadata(ctx)
	require.NoError(t, err)
	require.NotContains(t, md.Topics.Names(), "grow")
	dr, err = adm.DeleteTopics(ctx, "grow")
	require.NoError(t, err)
	require.ErrorIs(t, dr["grow"].Err, kerr.UnknownTopicOrPartition)

	// A re-created topic starts empty.
	brokertest.CreateTopic(t, b.Addr, "grow", 1, nil)
	ends, err := adm.ListEndOffsets(ctx, "grow")
	require.NoError(t, err)
	o, _ := ends.Lookup("grow", 0)
	require.Equal(t, int64(0), o.Offset)

	req := kmsg.NewPtrDescribeClusterRequest()
	cr, err := req.RequestWith(ctx, brokertest.Client(t, b.Addr))
	require.NoError(t, err)
	require.Equal(t, int16(0), cr.ErrorCode)
	require.Equal(t, b.Cfg.ClusterID, cr.ClusterID)
	require.Len(t, cr.Brokers, 1)
}

func TestAutoCreateIsASetting(t *testing.T) {
	off := brokertest.Start(t, func(c *broker.Config) { c.AutoCreateTopics = false })
	ctx := context.Background()
	cl := brokertest.Client(t, off.Addr, kgo.AllowAutoTopicCreation())
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].ErrorCode)

	on := brokertest.Start(t) // auto-creation on, as in dev
	resp, err = req.RequestWith(ctx, brokertest.Client(t, on.Addr))
	require.NoError(t, err)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode)
	require.Len(t, resp.Topics[0].Partitions, 1)
}
