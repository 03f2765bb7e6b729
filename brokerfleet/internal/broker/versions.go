package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// apiVersions lists the API keys this broker serves and their version
// ranges. Produce v0-2 are advertised only because librdkafka refuses a
// broker that lacks them; like Kafka 4 we reject them when used.
var apiVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: 0, MinVersion: 0, MaxVersion: 11}, // Produce
	{ApiKey: 1, MinVersion: 4, MaxVersion: 12}, // Fetch
	{ApiKey: 2, MinVersion: 1, MaxVersion: 8},  // ListOffsets
	{ApiKey: 3, MinVersion: 0, MaxVersion: 12}, // Metadata
	{ApiKey: 8, MinVersion: 2, MaxVersion: 8},  // OffsetCommit
	{ApiKey: 9, MinVersion: 1, MaxVersion: 8},  // OffsetFetch
	{ApiKey: 10, MinVersion: 0, MaxVersion: 4}, // FindCoordinator
	{ApiKey: 11, MinVersion: 0, MaxVersion: 9}, // JoinGroup
	{ApiKey: 12, MinVersion: 0, MaxVersion: 4}, // Heartbeat
	{ApiKey: 13, MinVersion: 0, MaxVersion: 5}, // LeaveGroup
	{ApiKey: 14, MinVersion: 0, MaxVersion: 5}, // SyncGroup
	{ApiKey: 15, MinVersion: 0, MaxVersion: 5}, // DescribeGroups
	{ApiKey: 16, MinVersion: 0, MaxVersion: 5}, // ListGroups
	{ApiKey: 18, MinVersion: 0, MaxVersion: 4}, // ApiVersions
	{ApiKey: 19, MinVersion: 2, MaxVersion: 7}, // CreateTopics
	{ApiKey: 20, MinVersion: 1, MaxVersion: 6}, // DeleteTopics
	{ApiKey: 21, MinVersion: 0, MaxVersion: 2}, // DeleteRecords
	{ApiKey: 22, MinVersion: 0, MaxVersion: 4}, // InitProducerId
	{ApiKey: 17, MinVersion: 0, MaxVersion: 1}, // SaslHandshake
	{ApiKey: 23, MinVersion: 0, MaxVersion: 4}, // OffsetForLeaderEpoch
	{ApiKey: 29, MinVersion: 0, MaxVersion: 3}, // DescribeAcls
	{ApiKey: 30, MinVersion: 0, MaxVersion: 3}, // CreateAcls
	{ApiKey: 31, MinVersion: 0, MaxVersion: 3}, // DeleteAcls
	{ApiKey: 32, MinVersion: 0, MaxVersion: 4}, // DescribeConfigs
	{ApiKey: 33, MinVersion: 0, MaxVersion: 2}, // AlterConfigs
	{ApiKey: 36, MinVersion: 0, MaxVersion: 2}, // SaslAuthenticate
	{ApiKey: 37, MinVersion: 0, MaxVersion: 3}, // CreatePartitions
	{ApiKey: 42, MinVersion: 0, MaxVersion: 2}, // DeleteGroups
	{ApiKey: 43, MinVersion: 0, MaxVersion: 2}, // ElectLeaders
	{ApiKey: 44, MinVersion: 0, MaxVersion: 1}, // IncrementalAlterConfigs
	{ApiKey: 45, MinVersion: 0, MaxVersion: 1}, // AlterPartitionReassignments
	{ApiKey: 46, MinVersion: 0, MaxVersion: 0}, // ListPartitionReassignments
	{ApiKey: 47, MinVersion: 0, MaxVersion: 0}, // OffsetDelete
	{ApiKey: 50, MinVersion: 0, MaxVersion: 0}, // DescribeUserScramCredentials
	{ApiKey: 51, MinVersion: 0, MaxVersion: 0}, // AlterUserScramCredentials
	{ApiKey: 60, MinVersion: 0, MaxVersion: 1}, // DescribeCluster
}

var versionIndex = func() map[int16]kmsg.ApiVersionsResponseApiKey {
	m := make(map[int16]kmsg.ApiVersionsResponseApiKey, len(apiVersions))
	for _, k := range apiVersions {
		m[k.ApiKey] = k
	}
	return m
}()

// supportedVersions returns the range served for key.
func supportedVersions(key int16) (lo, hi int16, ok bool) {
	k, ok := versionIndex[key]
	return k.MinVersion, k.MaxVersion, ok
}
