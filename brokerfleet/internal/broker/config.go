package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/cleaner"
	"github.com/stratamq/strata/brokerfleet/internal/fetchsession"
	"github.com/stratamq/strata/brokerfleet/internal/group"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/brokerfleet/internal/txn"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// Config configures a Broker. Fill it from DefaultConfig and check it with
// Validate; New validates it too.
type Config struct {
	// NodeID is this broker's id in Metadata responses; AutoNodeID claims
	// the lowest id no live broker holds (stateless tasks, as on ECS).
	NodeID int32
	// ClusterID is reported in Metadata and DescribeCluster.
	ClusterID string
	// Rack is this broker's rack (the AWS availability zone), if known.
	Rack string
	// Advertise is the host:port clients are told to connect to; empty means
	// the listener's address.
	Advertise string
	// DataDir holds the partition logs.
	DataDir string
	// Meta is the control-plane store (topics, configs, producer ids,
	// registrations). Required.
	Meta *metastore.Meta
	// Lease is the broker registration lease: the broker heartbeats every
	// Duration/3 and stops acting as a leader at its safe deadline when it
	// cannot renew.
	Lease metastore.LeaseOptions
	// WatchInterval is how often the metastore's change counter is polled.
	WatchInterval time.Duration
	// DialPeer opens connections to other brokers (follower fetches); nil
	// means a plain TCP dial. Tests use it to cut links between brokers.
	DialPeer func(ctx context.Context, addr string) (net.Conn, error)
	// ReassignAfter is how long a broker must be dead before the controller
	// moves its replicas to other live brokers.
	ReassignAfter time.Duration
	// LeaderRebalanceInterval is how often the controller moves leadership
	// back to preferred replicas (the first of each replica list) for
	// brokers leading fewer than 90% of their preferred partitions (Kafka's
	// auto.leader.rebalance.enable with leader.imbalance.per.broker.
	// percentage=10); 0 turns it off.
	LeaderRebalanceInterval time.Duration
	// ReplicaBalanceInterval is how often the controller checks replica
	// placement: it moves replicas off draining brokers and, when live
	// brokers' replica counts differ by more than one (a broker was
	// added), onto the emptiest ones, as reassignments. 0 turns it off.
	ReplicaBalanceInterval time.Duration
	// MaxReassignments bounds the partition reassignments in progress at
	// once that the controller starts (requests through
	// AlterPartitionReassignments are not limited).
	MaxReassignments int
	// ReassignThrottle caps, in bytes per second, what a leader sends to
	// replicas that are being added by a reassignment (Kafka's
	// leader.replication.throttled.rate); 0 means unthrottled.
	ReassignThrottle int64
	// ReplicaLagMax is how long a follower may go without catching up to
	// the leader's log end before the leader drops it from the ISR
	// (replica.lag.time.max.ms).
	ReplicaLagMax time.Duration
	// Incarnation identifies this process's life; empty means a random one.
	Incarnation string
	// FS is the filesystem under DataDir; nil means the OS filesystem.
	FS segment.FS
	// AutoCreateTopics lets Metadata create unknown topics (Kafka's
	// auto.create.topics.enable): on in dev, off in serve.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of auto-created topics and of
	// CreateTopics requests that ask for -1 (num.partitions).
	DefaultPartitions int32
	// DefaultReplicationFactor is the replication factor of auto-created
	// topics and CreateTopics requests that ask for -1
	// (default.replication.factor).
	DefaultReplicationFactor int16
	// TopicDefaults overrides the built-in topic config defaults.
	TopicDefaults map[string]string
	// MaxRequestBytes caps a request frame (socket.request.max.bytes); a
	// larger frame closes the connection before anything is allocated.
	MaxRequestBytes int32
	// MaxConnections caps the connections of all listeners together
	// (max.connections): at the cap a listener accepts no more until one
	// closes, except the inter-broker listener when there are several. 0
	// means three quarters of the process's open-file limit, so sockets
	// never take the descriptors logs and the metastore need; -1 none.
	MaxConnections int
	// MaxConnectionsPerIP caps the connections from one client address
	// (max.connections.per.ip); one over it is closed at once. 0: none.
	MaxConnectionsPerIP int
	// ConnectionsMaxIdle closes a connection that sent nothing for this
	// long while nothing it asked is being answered
	// (connections.max.idle.ms); 0: never.
	ConnectionsMaxIdle time.Duration
	// QueuedMaxRequestBytes caps the request bytes the broker holds at
	// once, read and not yet answered (Kafka's queued.max.request.bytes,
	// which by default is off): a connection whose next frame does not fit
	// waits until it does. Produce frames are let go once appended, so
	// acks=all waits hold none. 0: no cap (each connection is still held
	// to MaxRequestBytes).
	QueuedMaxRequestBytes int64
	// FetchMaxBytes caps the record bytes one Fetch response carries,
	// whatever the request asks (fetch.max.bytes); as in Kafka, one batch
	// larger than it still goes out alone, so consumers progress.
	FetchMaxBytes int32
	// NoSendfile reads every record set a Fetch answers into memory, also
	// on plain TCP connections, which otherwise get large ones from their
	// segment files with sendfile(2) (fetchspans.go).
	NoSendfile bool
	// MaintenanceInterval is how often retention and segment.ms are applied.
	MaintenanceInterval time.Duration
	// FetchSessionSlots is the most incremental fetch sessions (KIP-227)
	// the broker holds at once (Kafka's
	// max.incremental.fetch.session.cache.slots); 0 turns them off.
	FetchSessionSlots int
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts consumer group members may ask for
	// (group.min/max.session.timeout.ms).
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	// GroupInitialRebalanceDelay is how long the first rebalance of an
	// empty group waits for more members (group.initial.rebalance.delay.ms).
	GroupInitialRebalanceDelay time.Duration
	// GroupMaxSize bounds a classic group's members (group.max.size).
	GroupMaxSize int
	// The consumer group protocol (KIP-848), Kafka's names: a member is
	// fenced after GroupConsumerSessionTimeout without a heartbeat
	// (group.consumer.session.timeout.ms, within
	// group.consumer.min/max.session.timeout.ms), and told to heartbeat
	// every GroupConsumerHeartbeatInterval
	// (group.consumer.heartbeat.interval.ms, within
	// group.consumer.min/max.heartbeat.interval.ms, below the session
	// timeout).
	GroupConsumerSessionTimeout, GroupConsumerMinSessionTimeout, GroupConsumerMaxSessionTimeout          time.Duration
	GroupConsumerHeartbeatInterval, GroupConsumerMinHeartbeatInterval, GroupConsumerMaxHeartbeatInterval time.Duration
	// GroupConsumerMaxSize bounds a consumer group's members
	// (group.consumer.max.size).
	GroupConsumerMaxSize int
	// GroupConsumerAssignors are the server-side assignors, the first the
	// default (group.consumer.assignors): uniform, range.
	GroupConsumerAssignors []string
	// GroupConsumerMigrationPolicy says which online migrations between
	// the classic and the consumer protocol happen
	// (group.consumer.migration.policy): bidirectional, upgrade,
	// downgrade or disabled.
	GroupConsumerMigrationPolicy string
	// ShareMaxRecordLocks bounds the in-flight records of one share
	// partition (group.share.partition.max.record.locks); 0 means 2000.
	ShareMaxRecordLocks int
	// ShareFlushDelay is how long a share partition's state write waits
	// to gather the acknowledgements of concurrent requests (0: none
	// beyond the write in flight).
	ShareFlushDelay time.Duration
	// OffsetsRetention is how long committed offsets are kept once their
	// group is empty (of a group without members: after each commit);
	// Kafka's offsets.retention.minutes, 7 days.
	OffsetsRetention time.Duration
	// TransactionMaxTimeout is the longest transaction timeout a producer
	// may ask for (transaction.max.timeout.ms, 15 minutes); a longer one
	// is INVALID_TRANSACTION_TIMEOUT.
	TransactionMaxTimeout time.Duration
	// TransactionalIDExpiration is how long a transactional id without
	// an ongoing transaction is kept after its last use
	// (transactional.id.expiration.ms, 7 days).
	TransactionalIDExpiration time.Duration
	// TransactionCheckInterval is how often the transaction coordinator
	// aborts the transactions that outlived their timeout and expires
	// idle transactional ids (transaction.abort.timed.out.transaction.
	// cleanup.interval.ms, 10 s).
	TransactionCheckInterval time.Duration
	// Objects is the object store of the S3 tier; nil: no tier (segments
	// stay local and retention deletes them).
	Objects objstore.Store
	// TierInterval is how often led partitions upload closed segments,
	// expire tiered ones and (every TierOrphanGrace/2) collect orphans.
	TierInterval time.Duration
	// TierOrphanGrace is how old an object no manifest references must be
	// before it is deleted.
	TierOrphanGrace time.Duration
	// OffsetsTopicPartitions, when positive, has the cluster keep a copy
	// of committed offsets in the __consumer_offsets topic, in Kafka's
	// record format, with this many partitions (Kafka's
	// offsets.topic.num.partitions; its default is 50), for tools that
	// read consumer progress from it (Burrow). The topic gets the default
	// replication factor. 0: no such topic.
	OffsetsTopicPartitions int32
	// GroupStatsInterval is how often the consumer group gauges (lag,
	// committed offsets, members) are refreshed, in the background; a
	// scrape reads the last refresh.
	GroupStatsInterval time.Duration
	// ObjectFlushInterval is the least time between the starts of two
	// flushes of "object" durability partitions to S3 when the second
	// gathers batches that arrived during the first (one shared object per
	// flush; a flush with none in flight starts at once); acks wait for it.
	ObjectFlushInterval time.Duration
	// ObjectWALIndex makes an "object" flush one metastore write (this
	// node's WAL index, absorbed by the manifests later) instead of one per
	// partition. Turn it off while brokers of a build that does not read
	// the index may lead "object" partitions (an upgrade from one).
	ObjectWALIndex bool
	// Cleaner configures the log cleaner of compacted topics
	// (log.cleaner.*).
	Cleaner CleanerConfig
	// Security configures listeners, TLS, SASL and ACLs (security.go);
	// the zero value is one plaintext listener without authentication.
	Security security.Config
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// Clock is the clock of every component (log append times, retention,
	// leases, timeouts); nil means the real one. Tests drive time with
	// clock.Fake.
	Clock clock.Clock
	// UnsafeAckBeforeReplication is a test-only hook (serve's hidden
	// -test-unsafe-ack, allowed only with STRATA_TEST_HOOKS=1): acks=all
	// is answered right after the leader's append, before replication, so
	// e2e/chaos can show its checker catches the writes this loses.
	UnsafeAckBeforeReplication bool
	// UnsafeShareAckBeforeStore is a test-only hook (serve's hidden
	// -test-unsafe-share-ack, allowed only with STRATA_TEST_HOOKS=1): a
	// share-group acknowledgement is answered as soon as it is applied in
	// memory and stored up to 2 s later, so e2e/chaos can show its share
	// checker catches the acknowledged records a leader's death then
	// hands out again.
	UnsafeShareAckBeforeStore bool

	// quietFullLook is how often a follower session's read looks at every
	// noted partition (quietskip.go); 0 is fullLookEvery. Tests set it
	// long, so that only the change log reveals a change.
	quietFullLook time.Duration
}

// CleanerConfig is the log cleaner's part of Config.
type CleanerConfig struct {
	// Threads is how many partitions are cleaned at once
	// (log.cleaner.threads); 0 turns the cleaner off.
	Threads int
	// DedupeBufferBytes bounds the memory of the key maps of all threads
	// (log.cleaner.dedupe.buffer.size); 0 is the default, 128 MiB.
	DedupeBufferBytes int64
	// IOBytesPerSecond bounds the bytes the cleaner reads and writes
	// (log.cleaner.io.max.bytes.per.second); 0 is unlimited.
	IOBytesPerSecond float64
	// Backoff is how long an idle cleaner waits before it looks for dirty
	// partitions again (log.cleaner.backoff.ms).
	Backoff time.Duration
}

// DefaultConfig returns the defaults of `brokerfleet serve`.
func DefaultConfig() Config {
	return Config{
		NodeID:                     0,
		ClusterID:                  "strata",
		DataDir:                    "strata-data",
		DefaultPartitions:          1,
		DefaultReplicationFactor:   1,
		MaxRequestBytes:            100 << 20,
		ConnectionsMaxIdle:         10 * time.Minute,
		QueuedMaxRequestBytes:      256 << 20,
		FetchMaxBytes:              55 << 20,
		MaintenanceInterval:        30 * time.Second,
		Cleaner:                    CleanerConfig{Threads: 1, DedupeBufferBytes: cleaner.DefaultDedupeBytes, Backoff: cleaner.DefaultBackoff},
		FetchSessionSlots:          fetchsession.DefaultSlots,
		Lease:                      metastore.LeaseOptions{Duration: 6 * time.Second, Margin: time.Second},
		WatchInterval:              250 * time.Millisecond,
		ReplicaLagMax:              10 * time.Second,
		ReassignAfter:              10 * time.Minute,
		LeaderRebalanceInterval:    5 * time.Minute,
		ReplicaBalanceInterval:     30 * time.Second,
		MaxReassignments:           8,
		ReassignThrottle:           100 << 20,
		GroupMinSessionTimeout:     group.DefaultMinSessionTimeout,
		GroupMaxSessionTimeout:     group.DefaultMaxSessionTimeout,
		GroupInitialRebalanceDelay: group.DefaultInitialRebalanceDelay,
		GroupMaxSize:               math.MaxInt32,

		GroupConsumerSessionTimeout:       group.DefaultConsumerSessionTimeout,
		GroupConsumerMinSessionTimeout:    group.DefaultConsumerMinSessionTimeout,
		GroupConsumerMaxSessionTimeout:    group.DefaultConsumerMaxSessionTimeout,
		GroupConsumerHeartbeatInterval:    group.DefaultConsumerHeartbeatInterval,
		GroupConsumerMinHeartbeatInterval: group.DefaultConsumerMinHeartbeatInterval,
		GroupConsumerMaxHeartbeatInterval: group.DefaultConsumerMaxHeartbeatInterval,
		GroupConsumerMaxSize:              math.MaxInt32,
		GroupConsumerAssignors:            group.DefaultConsumerAssignors(),
		GroupConsumerMigrationPolicy:      group.DefaultMigrationPolicy,
		TransactionMaxTimeout:             txn.DefaultMaxTimeout,
		TransactionalIDExpiration:         txn.DefaultIDExpiration,
		TransactionCheckInterval:          txn.DefaultCheckInterval,
		OffsetsRetention:                  group.DefaultOffsetsRetention,
		TierInterval:                      5 * time.Second,
		TierOrphanGrace:                   10 * time.Minute,
		ObjectFlushInterval:               50 * time.Millisecond,
		ObjectWALIndex:                    true,
		GroupStatsInterval:                5 * time.Second,
	}
}

// Validate reports every invalid field, named as the flag that sets it.
func (c *Config) Validate() error {
	err := c.ValidateSettings()
	if c.Meta == nil {
		err = errors.Join(err, errors.New("metastore: none configured"))
	}
	return err
}

// ValidateSettings is Validate without the collaborators (Meta, FS), so a
// command can reject bad flags before opening anything.
func (c *Config) ValidateSettings() error {
	var errs []error
	if c.NodeID < 0 && c.NodeID != AutoNodeID {
		errs = append(errs, fmt.Errorf("node-id: %d is negative", c.NodeID))
	}
	if c.ClusterID == "" {
		errs = append(errs, errors.New("cluster-id: empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data: empty"))
	}
	if c.DefaultPartitions < 1 {
		errs = append(errs, fmt.Errorf("default-partitions: %d is below 1", c.DefaultPartitions))
	}
	if c.DefaultReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("default-replication-factor: %d is below 1", c.DefaultReplicationFactor))
	}
	if c.MaxRequestBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max-request-bytes: %d is below 1024", c.MaxRequestBytes))
	}
	if c.MaxConnections < -1 {
		errs = append(errs, fmt.Errorf("max-connections: %d is below -1", c.MaxConnections))
	}
	if c.MaxConnectionsPerIP < 0 {
		errs = append(errs, fmt.Errorf("max-connections-per-ip: %d is negative", c.MaxConnectionsPerIP))
	}
	if c.ConnectionsMaxIdle < 0 {
		errs = append(errs, fmt.Errorf("connections-max-idle: %v is negative", c.ConnectionsMaxIdle))
	}
	if c.QueuedMaxRequestBytes < 0 {
		errs = append(errs, fmt.Errorf("queued-max-request-bytes: %d is negative", c.QueuedMaxRequestBytes))
	}
	if c.FetchMaxBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("fetch-max-bytes: %d is below 1024", c.FetchMaxBytes))
	}
	if err := c.Lease.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("lease: %w", err))
	}
	if c.LeaderRebalanceInterval < 0 {
		errs = append(errs, fmt.Errorf("leader-rebalance-interval: %v is negative", c.LeaderRebalanceInterval))
	}
	if c.ReplicaBalanceInterval < 0 {
		errs = append(errs, fmt.Errorf("replica-balance-interval: %v is negative", c.ReplicaBalanceInterval))
	}
	if c.MaxReassignments < 1 {
		errs = append(errs, fmt.Errorf("max-reassignments: %d is not positive", c.MaxReassignments))
	}
	if c.FetchSessionSlots < 0 {
		errs = append(errs, fmt.Errorf("fetch-session-slots: %d is negative", c.FetchSessionSlots))
	}
	if c.ReassignThrottle < 0 {
		errs = append(errs, fmt.Errorf("reassign-throttle: %d is negative", c.ReassignThrottle))
	}
	if c.ReassignAfter <= 0 {
		errs = append(errs, fmt.Errorf("reassign-after: %v is not positive", c.ReassignAfter))
	}
	if c.ReplicaLagMax <= 0 {
		errs = append(errs, fmt.Errorf("replica-lag-max: %v is not positive", c.ReplicaLagMax))
	}
	if c.WatchInterval <= 0 {
		errs = append(errs, fmt.Errorf("watch-interval: %v is not positive", c.WatchInterval))
	}
	if c.Cleaner.Threads < 0 || c.Cleaner.Threads > 64 {
		errs = append(errs, fmt.Errorf("cleaner-threads: %d is outside [0, 64]", c.Cleaner.Threads))
	}
	if floor := int64(64<<10) * int64(max(c.Cleaner.Threads, 1)); c.Cleaner.DedupeBufferBytes != 0 && c.Cleaner.DedupeBufferBytes < floor {
		errs = append(errs, fmt.Errorf("cleaner-dedupe-buffer-size: %d is below %d (64 KiB per cleaner thread)", c.Cleaner.DedupeBufferBytes, floor))
	}
	if !(c.Cleaner.IOBytesPerSecond >= 0) {
		errs = append(errs, fmt.Errorf("cleaner-io-max-bytes-per-second: %v is negative", c.Cleaner.IOBytesPerSecond))
	}
	if c.Cleaner.Backoff < 0 {
		errs = append(errs, fmt.Errorf("cleaner-backoff: %v is negative", c.Cleaner.Backoff))
	}
	if c.MaintenanceInterval <= 0 {
		errs = append(errs, fmt.Errorf("maintenance-interval: %v is not positive", c.MaintenanceInterval))
	}
	if c.GroupMinSessionTimeout <= 0 || c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		errs = append(errs, fmt.Errorf("group-min-session-timeout, group-max-session-timeout: %v and %v must be positive and in order", c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout))
	}
	errs = append(errs, c.validateConsumerGroups()...)
	if c.OffsetsRetention <= 0 {
		errs = append(errs, fmt.Errorf("offsets-retention: %v is not positive", c.OffsetsRetention))
	}
	if c.TransactionMaxTimeout <= 0 {
		errs = append(errs, fmt.Errorf("transaction-max-timeout: %v is not positive", c.TransactionMaxTimeout))
	}
	if c.TransactionalIDExpiration <= 0 {
		errs = append(errs, fmt.Errorf("transactional-id-expiration: %v is not positive", c.TransactionalIDExpiration))
	}
	if c.TransactionCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("transaction-check-interval: %v is not positive", c.TransactionCheckInterval))
	}
	if c.GroupInitialRebalanceDelay < 0 {
		errs = append(errs, fmt.Errorf("group-initial-rebalance-delay: %v is negative", c.GroupInitialRebalanceDelay))
	}
	if c.TierInterval <= 0 {
		errs = append(errs, fmt.Errorf("tier-interval: %v is not positive", c.TierInterval))
	}
	if c.OffsetsTopicPartitions < 0 || c.OffsetsTopicPartitions > maxPartitionsPerTopic {
		errs = append(errs, fmt.Errorf("offsets-topic-partitions: %d; want 0 (off) to %d", c.OffsetsTopicPartitions, maxPartitionsPerTopic))
	}
	if c.GroupStatsInterval <= 0 {
		errs = append(errs, fmt.Errorf("group-stats-interval: %v is not positive", c.GroupStatsInterval))
	}
	if c.ObjectFlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("object-flush-interval: %v is not positive", c.ObjectFlushInterval))
	}
	if c.TierOrphanGrace <= 0 {
		errs = append(errs, fmt.Errorf("tier-orphan-grace: %v is not positive", c.TierOrphanGrace))
	}
	if c.Advertise != "" {
		if _, _, err := security.SplitHostPort(c.Advertise); err != nil {
			errs = append(errs, fmt.Errorf("advertise: %w", err))
		}
	}
	errs = append(errs, c.Security.Validate()...)
	if _, err := topic.NewDefaults(c.TopicDefaults); err != nil {
		errs = append(errs, fmt.Errorf("topic default: %w", err))
	}
	return errors.Join(errs...)
}

// validateConsumerGroups checks the consumer group protocol's settings
// as Kafka does.
func (c *Config) validateConsumerGroups() []error {
	var errs []error
	inOrder := func(name string, lo, v, hi time.Duration) {
		if lo <= 0 || v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s: %v must be positive and within %v..%v", name, v, lo, hi))
		}
	}
	inOrder("group-consumer-session-timeout", c.GroupConsumerMinSessionTimeout, c.GroupConsumerSessionTimeout, c.GroupConsumerMaxSessionTimeout)
	inOrder("group-consumer-heartbeat-interval", c.GroupConsumerMinHeartbeatInterval, c.GroupConsumerHeartbeatInterval, c.GroupConsumerMaxHeartbeatInterval)
	if c.GroupConsumerHeartbeatInterval >= c.GroupConsumerSessionTimeout {
		errs = append(errs, fmt.Errorf("group-consumer-heartbeat-interval: %v must be below the session timeout %v", c.GroupConsumerHeartbeatInterval, c.GroupConsumerSessionTimeout))
	}
	if c.GroupConsumerMaxSize < 1 {
		errs = append(errs, fmt.Errorf("group-consumer-max-size: %d is below 1", c.GroupConsumerMaxSize))
	}
	if c.GroupMaxSize < 1 {
		errs = append(errs, fmt.Errorf("group-max-size: %d is below 1", c.GroupMaxSize))
	}
	if err := group.ValidateConsumerAssignors(c.GroupConsumerAssignors); err != nil {
		errs = append(errs, fmt.Errorf("group-consumer-assignors: %w", err))
	}
	if !group.ValidMigrationPolicy(c.GroupConsumerMigrationPolicy) {
		errs = append(errs, fmt.Errorf("group-consumer-migration-policy: %q is not bidirectional, upgrade, downgrade or disabled", c.GroupConsumerMigrationPolicy))
	}
	return errs
}
