package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

// TestEveryRequestWithAndWithoutItsACLs sends every request a principal
// without ACLs could try, straight to the broker, and checks each is
// refused with the error code Kafka uses; then grants exactly the ACLs
// Kafka's authorizer asks for that request and checks it passes. The
// last step asks ApiVersions (built from the route registry) for every
// key the broker serves, so a new route cannot skip the matrix.
func TestEveryRequestWithAndWithoutItsACLs(t *testing.T) {
	s := startSASLSSL(t, func(c *broker.Config) {
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:admin"}
	})
	admin := s.client(t, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	alice := s.client(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), namedFetches())
	createTopicOn(t, admin, "t", 1, 1)
	createTopicOn(t, admin, "doomed", 1, 1)
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
			r.TopicNames = []string{"doomed"}
			r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("doomed")}}
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
		{"ConsumerGroupHeartbeat", func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.RebalanceTimeoutMillis = "cg", "alice-member", 10000
			r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }, groupAuthz},
		{"ConsumerGroupDescribe", func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{"cg"}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode }, groupAuthz},
		{"InitProducerID idempotent", func() kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, clusterAuthz},
		{"InitProducerID transactional", func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = tid, 10000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, txnAuthz},
		{"AddPartitionsToTxn as a broker", func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "tx", 1<<40, 0, true
			tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}
			r.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AddPartitionsToTxnResponse).ErrorCode }, clusterAuthz},
		{"AddOffsetsToTxn", func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.Group = "tx", 1<<40, "g"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, txnAuthz},
		{"EndTxn", func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID = "tx", 1<<40
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode }, txnAuthz},
		{"WriteTxnMarkers", func() kmsg.Request {
			r := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.Topics = 1, []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{0}}}
			r.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
		}, clusterAuthz},
		{"TxnOffsetCommit", func() kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.TransactionalID, r.Group, r.ProducerID = "tx", "g", 1<<40
			r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}, txnAuthz},
		{"DescribeProducers", func() kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
		}, topicAuthz},
		{"DescribeTransactions", func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"tx"}
			return r
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
		}, txnAuthz},
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
		{"DescribeClientQuotas", func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClientQuotasResponse).ErrorCode }, clusterAuthz},
		{"AlterClientQuotas", func() kmsg.Request {
			r := kmsg.NewPtrAlterClientQuotasRequest()
			r.Entries = []kmsg.AlterClientQuotasRequestEntry{{
				Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("alice")}},
				Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1e12}},
			}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode }, clusterAuthz},
		{"DescribeUserScramCredentials", func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode }, clusterAuthz},
		{"AlterUserScramCredentials", func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "nobody", Mechanism: 2}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode }, clusterAuthz},
	}
	// The ACLs each request needs, as Kafka's authorizer documents them:
	// with them granted (and nothing else), the same request passes
	// authorization.
	topic := func(name string, ops ...kmsg.ACLOperation) []grant {
		return grants(kmsg.ACLResourceTypeTopic, name, ops)
	}
	group := func(ops ...kmsg.ACLOperation) []grant { return grants(kmsg.ACLResourceTypeGroup, "g", ops) }
	cluster := func(ops ...kmsg.ACLOperation) []grant {
		return grants(kmsg.ACLResourceTypeCluster, "kafka-cluster", ops)
	}
	txn := func(ops ...kmsg.ACLOperation) []grant { return grants(kmsg.ACLResourceTypeTransactionalId, "tx", ops) }
	join := func(gs ...[]grant) []grant {
		var all []grant
		for _, g := range gs {
			all = append(all, g...)
		}
		return all
	}
	const (
		read, write, describe = kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe
		create, del, alter    = kmsg.ACLOperationCreate, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter
		describeConfigs       = kmsg.ACLOperationDescribeConfigs
		alterConfigs          = kmsg.ACLOperationAlterConfigs
		clusterAction         = kmsg.ACLOperationClusterAction
		idempotentWrite       = kmsg.ACLOperationIdempotentWrite
	)
	needs := map[string][]grant{
		"Produce":                        topic("t", write),
		"Produce transactional":          join(topic("t", write), txn(write)),
		"Fetch":                          topic("t", read),
		"Fetch as a replica":             cluster(clusterAction),
		"ListOffsets":                    topic("t", describe),
		"OffsetForLeaderEpoch":           topic("t", describe),
		"DeleteRecords":                  topic("t", del),
		"DeleteTopics":                   topic("doomed", del),
		"CreatePartitions":               topic("t", alter),
		"CreateTopics":                   topic("new", create),
		"DescribeConfigs topic":          topic("t", describeConfigs),
		"DescribeConfigs broker":         cluster(describeConfigs),
		"AlterConfigs":                   topic("t", alterConfigs),
		"IncrementalAlterConfigs":        topic("t", alterConfigs),
		"OffsetCommit":                   join(group(read), topic("t", read)),
		"OffsetFetch":                    join(group(describe), topic("t", describe)),
		"FindCoordinator group":          group(describe),
		"FindCoordinator transaction":    txn(describe),
		"JoinGroup":                      group(read),
		"SyncGroup":                      group(read),
		"Heartbeat":                      group(read),
		"LeaveGroup":                     group(read),
		"DescribeGroups":                 group(describe),
		"DeleteGroups":                   group(del),
		"OffsetDelete":                   join(group(del), topic("t", read)),
		"InitProducerID idempotent":      cluster(idempotentWrite),
		"InitProducerID transactional":   txn(write),
		"AddPartitionsToTxn as a broker": cluster(clusterAction),
		"AddOffsetsToTxn":                join(txn(write), group(read)),
		"EndTxn":                         txn(write),
		"WriteTxnMarkers":                cluster(clusterAction),
		"TxnOffsetCommit":                join(txn(write), group(read), topic("t", read)),
		"DescribeProducers":              topic("t", read),
		"DescribeTransactions":           txn(describe),
		"ElectLeaders":                   cluster(alter),
		"AlterPartitionAssignments":      cluster(alter),
		"ListPartitionReassignments":     cluster(describe),
		"DescribeCluster":                cluster(describe),
		"CreateAcls":                     cluster(alter),
		"DescribeAcls":                   cluster(describe),
		"DeleteAcls":                     cluster(alter),
		"DescribeClientQuotas":           cluster(describeConfigs),
		"AlterClientQuotas":              cluster(alterConfigs),
		"DescribeUserScramCredentials":   cluster(describe),
		"AlterUserScramCredentials":      cluster(alter),
		"ConsumerGroupHeartbeat":         join(grants(kmsg.ACLResourceTypeGroup, "cg", []kmsg.ACLOperation{read}), topic("t", describe)),
		// The group's members are assigned t: describing it needs t too.
		"ConsumerGroupDescribe": join(grants(kmsg.ACLResourceTypeGroup, "cg", []kmsg.ACLOperation{describe}), topic("t", describe)),
	}
	authzCodes := map[int16]bool{topicAuthz: true, groupAuthz: true, clusterAuthz: true, txnAuthz: true}

	direct := alice.Broker(0)
	covered := map[int16]bool{}
	for _, tc := range cases {
		req := tc.req()
		covered[req.Key()] = true
		resp, err := direct.Request(ctx, req)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, tc.code(resp), "%s: got %v", tc.name, kerr.ErrorForCode(tc.code(resp)))

		need, ok := needs[tc.name]
		require.True(t, ok, "%s: no ACLs listed for it", tc.name)
		allow(ctx, t, admin, need)
		resp, err = direct.Request(ctx, tc.req())
		require.NoError(t, err, tc.name)
		require.False(t, authzCodes[tc.code(resp)], "%s with %v granted: still %v", tc.name, need, kerr.ErrorForCode(tc.code(resp)))
		revokeAll(ctx, t, admin, "User:alice")
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
	// With Describe on t, both show it, and only it.
	allow(ctx, t, admin, topic("t", describe))
	mr, err = direct.Request(ctx, named)
	require.NoError(t, err)
	require.Zero(t, mr.(*kmsg.MetadataResponse).Topics[0].ErrorCode)
	mr, err = direct.Request(ctx, all)
	require.NoError(t, err)
	require.Len(t, mr.(*kmsg.MetadataResponse).Topics, 1)
	require.Equal(t, "t", *mr.(*kmsg.MetadataResponse).Topics[0].Topic)
	revokeAll(ctx, t, admin, "User:alice")
	covered[3] = true

	// ListGroups hides the groups alice may not describe, and shows them
	// once she may. (DeleteGroups above removed g; the admin makes it
	// again.)
	cr, err = commit.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Zero(t, cr.Topics[0].Partitions[0].ErrorCode)
	lg, err := alice.Broker(0).Request(ctx, kmsg.NewPtrListGroupsRequest())
	require.NoError(t, err)
	require.Empty(t, lg.(*kmsg.ListGroupsResponse).Groups)
	lg, err = admin.Broker(0).Request(ctx, kmsg.NewPtrListGroupsRequest())
	require.NoError(t, err)
	require.Len(t, lg.(*kmsg.ListGroupsResponse).Groups, 2) // g, and cg of the consumer protocol
	allow(ctx, t, admin, group(describe))
	lg, err = alice.Broker(0).Request(ctx, kmsg.NewPtrListGroupsRequest())
	require.NoError(t, err)
	require.Len(t, lg.(*kmsg.ListGroupsResponse).Groups, 1)
	covered[16] = true

	// A producer's AddPartitionsToTxn (v3, as clients send it) needs WRITE
	// on its transactional id and on each topic.
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID = "tx", 1<<40
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	addCode := func() int16 {
		resp, err := add.RequestWith(ctx, alice) // kgo pins clients to v3
		if ke, ok := errors.AsType[*kerr.Error](err); ok {
			return ke.Code // kgo returns a partition's error as the request's
		}
		require.NoError(t, err)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, txnAuthz, addCode())
	allow(ctx, t, admin, txn(write))
	require.Equal(t, topicAuthz, addCode())
	allow(ctx, t, admin, topic("t", write))
	require.False(t, authzCodes[addCode()])
	revokeAll(ctx, t, admin, "User:alice")

	// ListTransactions lists only the transactional ids alice may
	// describe.
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = tid, 10000
	ir, err := init.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Zero(t, ir.ErrorCode, "%v", kerr.ErrorForCode(ir.ErrorCode))
	lt, err := direct.Request(ctx, kmsg.NewPtrListTransactionsRequest())
	require.NoError(t, err)
	require.Empty(t, lt.(*kmsg.ListTransactionsResponse).TransactionStates)
	allow(ctx, t, admin, txn(describe))
	lt, err = direct.Request(ctx, kmsg.NewPtrListTransactionsRequest())
	require.NoError(t, err)
	require.Len(t, lt.(*kmsg.ListTransactionsResponse).TransactionStates, 1)
	revokeAll(ctx, t, admin, "User:alice")
	covered[66] = true

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

type grant = kmsg.CreateACLsRequestCreation

func grants(rt kmsg.ACLResourceType, name string, ops []kmsg.ACLOperation) []grant {
	var gs []grant
	for _, op := range ops {
		gs = append(gs, grant{ResourceType: rt, ResourceName: name, ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:alice", Host: "*", Operation: op, PermissionType: kmsg.ACLPermissionTypeAllow})
	}
	return gs
}

// allow creates the ACLs through the admin API; the broker applies them
// before answering (read-your-writes), so the next request sees them.
func allow(ctx context.Context, t *testing.T, admin *kgo.Client, gs []grant) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = gs
	resp, err := req.RequestWith(ctx, admin)
	require.NoError(t, err)
	for _, r := range resp.Results {
		require.Zero(t, r.ErrorCode, "create ACL: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// revokeAll deletes every ACL naming the principal.
func revokeAll(ctx context.Context, t *testing.T, admin *kgo.Client, principal string) {
	t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr(principal), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = []kmsg.DeleteACLsRequestFilter{f}
	resp, err := req.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Zero(t, resp.Results[0].ErrorCode)
}
