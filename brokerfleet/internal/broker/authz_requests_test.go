package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

// TestEveryRequestRefusedWithoutACLs sends every request a principal
// without ACLs could try, straight to the broker, and checks each is
// refused with the error code Kafka uses.
func TestEveryRequestRefusedWithoutACLs(t *testing.T) {
	s := startSASLSSL(t, func(c *broker.Config) {
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:admin"}
	})
	admin := s.client(t, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	alice := s.client(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	createTopicOn(t, admin, "t", 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The admin commits an offset, so group g exists.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	cr, err := commit.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Zero(t, cr.Topics[0].Partitions[0].ErrorCode)

	topicAuthz, groupAuthz, clusterAuthz, txnAuthz := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code
	tid := kmsg.StringPtr("tx")
	cases := []struct {
		name string
		req  func() kmsg.Request
		code func(kmsg.Response) int16
		want int16
	}{
		{"Produce", func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = 1, 5000
			r.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }, topicAuthz},
		{"Produce transactional", func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis, r.TransactionID = 1, 5000, tid
			r.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }, txnAuthz},
		{"Fetch", func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.MaxBytes = 1 << 20
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes = 1 << 20
			r.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode }, topicAuthz},
		{"Fetch as a replica", func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.ReplicaID, r.MaxBytes = 7, 1<<20
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes = 1 << 20
			r.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode }, topicAuthz},
		{"ListOffsets", func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			p := kmsg.NewListOffsetsRequestTopicPartition()
			r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{p}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }, topicAuthz},
		{"OffsetForLeaderEpoch", func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{p}}}
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
		}, topicAuthz},
		{"DeleteRecords", func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode }, topicAuthz},
		{"DeleteTopics", func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TopicNames = []string{"t"}
			r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("t")}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode }, topicAuthz},
		{"CreatePartitions", func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 2}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode }, topicAuthz},
		{"CreateTopics", func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			tp := kmsg.NewCreateTopicsRequestTopic()
			tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "new", 1, 1
			r.Topics = append(r.Topics, tp)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }, topicAuthz},
		{"DescribeConfigs topic", func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }, topicAuthz},
		{"DescribeConfigs broker", func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }, clusterAuthz},
		{"AlterConfigs", func() kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode }, topicAuthz},
		{"IncrementalAlterConfigs", func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode }, topicAuthz},
		{"OffsetCommit", func() kmsg.Request { return commit }, func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}, groupAuthz},
		{"OffsetFetch", func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode }, groupAuthz},
		{"FindCoordinator group", func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKeys = []string{"g"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode }, groupAuthz},
		{"FindCoordinator transaction", func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKeys, r.CoordinatorType = []string{"tx"}, 1
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode }, txnAuthz},
		{"JoinGroup", func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, groupAuthz},
		{"SyncGroup", func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID = "g", "m"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }, groupAuthz},
		{"Heartbeat", func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = "g", "m"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }, groupAuthz},
		{"LeaveGroup", func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.Members = "g", []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }, groupAuthz},
		{"DescribeGroups", func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"g"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode }, groupAuthz},
		{"DeleteGroups", func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"g"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }, groupAuthz},
		{"OffsetDelete", func() kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "g"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }, groupAuthz},
		{"InitProducerID idempotent", func() kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, clusterAuthz},
		{"InitProducerID transactional", func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = tid, 10000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, txnAuthz},
		{"ElectLeaders", func() kmsg.Request { return kmsg.NewPtrElectLeadersRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode }, clusterAuthz},
		{"AlterPartitionAssignments", func() kmsg.Request { return kmsg.NewPtrAlterPartitionAssignmentsRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode }, clusterAuthz},
		{"ListPartitionReassignments", func() kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode }, clusterAuthz},
		{"DescribeCluster", func() kmsg.Request { return kmsg.NewPtrDescribeClusterRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClusterResponse).ErrorCode }, clusterAuthz},
		{"CreateAcls", func() kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			r.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
				Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationAll, PermissionType: kmsg.ACLPermissionTypeAllow}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode }, clusterAuthz},
		{"DescribeAcls", func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode }, clusterAuthz},
		{"DeleteAcls", func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			r.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode }, clusterAuthz},
		{"DescribeUserScramCredentials", func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode }, clusterAuthz},
		{"AlterUserScramCredentials", func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "admin", Mechanism: 2}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode }, clusterAuthz},
	}
	direct := alice.Broker(0)
	covered := map[int16]bool{}
	for _, tc := range cases {
		req := tc.req()
		covered[req.Key()] = true
		resp, err := direct.Request(ctx, req)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, tc.code(resp), "%s: got %v", tc.name, kerr.ErrorForCode(tc.code(resp)))
	}

	// Metadata hides the topics alice may not describe, and refuses the
	// ones she names.
	all := kmsg.NewPtrMetadataRequest()
	mr, err := direct.Request(ctx, all)
	require.NoError(t, err)
	require.Empty(t, mr.(*kmsg.MetadataResponse).Topics)
	named := kmsg.NewPtrMetadataRequest()
	named.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	mr, err = direct.Request(ctx, named)
	require.NoError(t, err)
	require.Equal(t, topicAuthz, mr.(*kmsg.MetadataResponse).Topics[0].ErrorCode)
	covered[3] = true

	// ListGroups hides the groups alice may not describe.
	lg, err := alice.Broker(0).Request(ctx, kmsg.NewPtrListGroupsRequest())
	require.NoError(t, err)
	require.Empty(t, lg.(*kmsg.ListGroupsResponse).Groups)
	lg, err = admin.Broker(0).Request(ctx, kmsg.NewPtrListGroupsRequest())
	require.NoError(t, err)
	require.Len(t, lg.(*kmsg.ListGroupsResponse).Groups, 1)
	covered[16] = true

	// Every key the broker advertises was tried above, except the ones
	// served before authentication: a new API cannot skip this test.
	av, err := direct.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	require.NoError(t, err)
	for _, k := range av.(*kmsg.ApiVersionsResponse).ApiKeys {
		switch k.ApiKey {
		case 17, 18, 36: // SaslHandshake, ApiVersions, SaslAuthenticate
			continue
		}
		require.True(t, covered[k.ApiKey], "advertised key %d (%s) not tried without ACLs", k.ApiKey, kmsg.NameForKey(k.ApiKey))
	}
}
