package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

// TestLambdaEventSourceMappingACLs plays AWS Lambda's event source mapping
// for self-managed Kafka: a SCRAM-SHA-512 client over TLS with exactly
// the ACLs AWS documents for it (DESCRIBE_CONFIGS on the cluster,
// DESCRIBE and READ on the consumer group and on the topic) describes the
// cluster's configs, joins the group with the classic protocol, consumes
// and commits. With each ACL that is not implied by another removed, the
// same steps fail with the authorization error Kafka gives.
func TestLambdaEventSourceMappingACLs(t *testing.T) {
	s := startSASLSSL(t, func(c *broker.Config) {
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:admin"}
	})
	addUser(t, s.meta, "lambda", "lambda-secret")
	admin := s.client(t, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	createTopicOn(t, admin, "orders", 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(strconv.Itoa(i)), Value: []byte("order-" + strconv.Itoa(i))})
	}
	require.NoError(t, admin.ProduceSync(ctx, recs...).FirstErr())

	const (
		clusterDescribeConfigs = "cluster DESCRIBE_CONFIGS"
		groupDescribe          = "group DESCRIBE"
		groupRead              = "group READ"
		topicDescribe          = "topic DESCRIBE"
		topicRead              = "topic READ"
	)
	documented := map[string]grant{
		clusterDescribeConfigs: lambdaACL(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs),
		groupDescribe:          lambdaACL(kmsg.ACLResourceTypeGroup, "lambda-orders", kmsg.ACLOperationDescribe),
		groupRead:              lambdaACL(kmsg.ACLResourceTypeGroup, "lambda-orders", kmsg.ACLOperationRead),
		topicDescribe:          lambdaACL(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLOperationDescribe),
		topicRead:              lambdaACL(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLOperationRead),
	}
	grantAllBut := func(missing string) {
		revokeAll(ctx, t, admin, "User:lambda")
		var gs []grant
		for name, g := range documented {
			if name != missing {
				gs = append(gs, g)
			}
		}
		allow(ctx, t, admin, gs)
	}

	// All of them: every record is delivered and the commit lands.
	grantAllBut("")
	got, err := pollLikeLambda(ctx, t, s, len(recs))
	require.NoError(t, err)
	require.Len(t, got, len(recs))
	committed, err := kadm.NewClient(admin).FetchOffsets(ctx, "lambda-orders")
	require.NoError(t, err)
	var sum int64
	committed.Each(func(o kadm.OffsetResponse) {
		require.NoError(t, o.Err)
		sum += o.At
	})
	require.Equal(t, int64(len(recs)), sum, "committed offsets")

	// READ implies DESCRIBE (as in Kafka), so removing only a DESCRIBE
	// changes nothing; removing anything else fails where Kafka fails.
	for _, tc := range []struct {
		missing string
		want    error
	}{
		{clusterDescribeConfigs, kerr.ClusterAuthorizationFailed},
		{groupRead, kerr.GroupAuthorizationFailed},
		{topicRead, kerr.TopicAuthorizationFailed},
		{groupDescribe, nil},
		{topicDescribe, nil},
	} {
		t.Run("without "+tc.missing, func(t *testing.T) {
			grantAllBut(tc.missing)
			// Rewind the group, so each case has records to read.
			_, err := kadm.NewClient(admin).CommitOffsets(ctx, "lambda-orders", zeroOffsets(3))
			require.NoError(t, err)
			got, err := pollLikeLambda(ctx, t, s, len(recs))
			if tc.want == nil {
				require.NoError(t, err)
				require.Len(t, got, len(recs))
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.Empty(t, got)
		})
	}
}

func lambdaACL(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) grant {
	return grant{ResourceType: rt, ResourceName: name, ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:lambda", Host: "*", Operation: op, PermissionType: kmsg.ACLPermissionTypeAllow}
}

func zeroOffsets(partitions int32) kadm.Offsets {
	os := kadm.Offsets{}
	for p := range partitions {
		os.Add(kadm.Offset{Topic: "orders", Partition: p, At: 0, LeaderEpoch: -1})
	}
	return os
}

// pollLikeLambda does what the event source mapping's poller does: checks
// the brokers' configs, joins group lambda-orders (classic protocol, eager
// range assignment as the Java consumer's default), polls until want
// records or the first error, and commits what it read. It returns the
// records and the first error.
func pollLikeLambda(ctx context.Context, t *testing.T, s *secureBroker, want int) ([]*kgo.Record, error) {
	t.Helper()
	cl := s.client(t, scram.Auth{User: "lambda", Pass: "lambda-secret"}.AsSha512Mechanism(),
		kgo.ConsumerGroup("lambda-orders"), kgo.ConsumeTopics("orders"),
		kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("lambda-esm"))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	rc, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx)
	for _, r := range rc {
		if err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			if errors.Is(ferr, context.DeadlineExceeded) {
				return got, fmt.Errorf("polled %d of %d records: %w", len(got), want, ferr)
			}
			return got, ferr
		}
		got = append(got, fs.Records()...)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return got, fmt.Errorf("commit: %w", err)
	}
	return got, nil
}
