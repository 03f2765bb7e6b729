package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/functions/dlqconsole"
)

const serveHelp = `usage: brokerfleet serve [flags]

Runs one Strata broker. Every flag can also be set by an environment
variable: STRATA_ plus the flag name upper-cased, '-' as '_' (for example
STRATA_NODE_ID=2). A flag on the command line wins over the variable.

flags:
`

// brokerFlags registers the flags shared by serve and dev on fs.
func brokerFlags(fs *flag.FlagSet, cfg *broker.Config, listen *string, logLevel *string) {
	fs.StringVar(listen, "listen", *listen, "address to accept Kafka connections on (host:port)")
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "directory for partition logs, the topic catalog and producer ids")
	fs.StringVar(&cfg.ClusterID, "cluster-id", cfg.ClusterID, "cluster id reported to clients")
	fs.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", cfg.AutoCreateTopics, "create unknown topics when clients ask for their metadata (Kafka's auto.create.topics.enable)")
	fs.Func("default-partitions", fmt.Sprintf("partition count for auto-created topics and CreateTopics with -1 (default %d)", cfg.DefaultPartitions), func(s string) error {
		return parseInt32(s, &cfg.DefaultPartitions)
	})
	fs.Func("default-replication-factor", fmt.Sprintf("replication factor of auto-created topics and CreateTopics with -1 (default %d)", cfg.DefaultReplicationFactor), func(s string) error {
		var v int32
		if err := parseInt32(s, &v); err != nil || v < 1 || v > 1<<15-1 {
			return fmt.Errorf("%q is not a replication factor", s)
		}
		cfg.DefaultReplicationFactor = int16(v)
		return nil
	})
	fs.Func("max-request-bytes", fmt.Sprintf("largest request frame accepted; larger ones close the connection (default %d)", cfg.MaxRequestBytes), func(s string) error {
		return parseInt32(s, &cfg.MaxRequestBytes)
	})
	fs.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "most connections of all listeners together; at the cap listeners wait for one to close, except the inter-broker one (max.connections; 0: three quarters of the open-file limit, -1: no cap)")
	fs.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", cfg.MaxConnectionsPerIP, "most connections from one client address; more are closed at once (max.connections.per.ip; 0: no cap)")
	fs.DurationVar(&cfg.ConnectionsMaxIdle, "connections-max-idle", cfg.ConnectionsMaxIdle, "close a connection that sent nothing for this long while nothing it asked is being answered, on every listener (connections.max.idle.ms; 0: never)")
	fs.Func("queued-max-request-bytes", fmt.Sprintf("request bytes held at once across connections; a frame that does not fit waits, and a connection holds at most -max-request-bytes (queued.max.request.bytes; 0: no cap; default %d)", cfg.QueuedMaxRequestBytes), func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not a byte count", s)
		}
		cfg.QueuedMaxRequestBytes = v
		return nil
	})
	fs.Func("fetch-max-bytes", fmt.Sprintf("most record bytes of one Fetch response, whatever the request asks (fetch.max.bytes; default %d)", cfg.FetchMaxBytes), func(s string) error {
		return parseInt32(s, &cfg.FetchMaxBytes)
	})
	fs.Func("fetch-sendfile", "send record sets of 16 KiB or more from their segment files with sendfile(2) on plain TCP connections (false: read every record set into memory first)", func(s string) error {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		cfg.NoSendfile = !v
		return nil
	})
	fs.DurationVar(&cfg.MaintenanceInterval, "maintenance-interval", cfg.MaintenanceInterval, "how often retention and segment.ms are applied")
	cleanerFlags(fs, &cfg.Cleaner)
	fs.IntVar(&cfg.FetchSessionSlots, "fetch-session-slots", cfg.FetchSessionSlots, "most incremental fetch sessions (KIP-227) held at once (max.incremental.fetch.session.cache.slots; 0: none, every fetch is a full one)")
	fs.DurationVar(&cfg.Lease.Duration, "lease", cfg.Lease.Duration, "broker registration lease; a broker that cannot renew it stops accepting writes after lease minus lease-margin")
	fs.DurationVar(&cfg.Lease.Margin, "lease-margin", cfg.Lease.Margin, "safety margin subtracted from the lease")
	fs.DurationVar(&cfg.WatchInterval, "watch-interval", cfg.WatchInterval, "how often the metastore is polled for metadata changes (one read each)")
	fs.DurationVar(&cfg.ReassignAfter, "reassign-after", cfg.ReassignAfter, "the controller moves the replicas of a broker dead this long to other live brokers")
	fs.DurationVar(&cfg.LeaderRebalanceInterval, "leader-rebalance-interval", cfg.LeaderRebalanceInterval, "how often the controller moves leadership back to preferred replicas for brokers leading under 90% of theirs (0: never)")
	fs.DurationVar(&cfg.ReplicaBalanceInterval, "replica-balance-interval", cfg.ReplicaBalanceInterval, "how often the controller moves replicas off draining brokers and onto brokers with fewer replicas (0: never)")
	fs.IntVar(&cfg.MaxReassignments, "max-reassignments", cfg.MaxReassignments, "most partition moves the controller keeps in progress at once")
	fs.Func("reassign-throttle", fmt.Sprintf("bytes per second a leader sends to replicas being added by a reassignment (0: unthrottled; default %d)", cfg.ReassignThrottle), func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not a byte rate", s)
		}
		cfg.ReassignThrottle = v
		return nil
	})
	fs.DurationVar(&cfg.ReplicaLagMax, "replica-lag-max", cfg.ReplicaLagMax, "a follower that has not caught up for this long leaves the ISR (replica.lag.time.max.ms)")
	fs.DurationVar(&cfg.GroupMinSessionTimeout, "group-min-session-timeout", cfg.GroupMinSessionTimeout, "shortest session timeout a consumer group member may ask for (group.min.session.timeout.ms)")
	fs.DurationVar(&cfg.GroupMaxSessionTimeout, "group-max-session-timeout", cfg.GroupMaxSessionTimeout, "longest session timeout a consumer group member may ask for (group.max.session.timeout.ms)")
	fs.DurationVar(&cfg.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", cfg.GroupInitialRebalanceDelay, "how long the first rebalance of an empty group waits for more members (group.initial.rebalance.delay.ms)")
	fs.IntVar(&cfg.GroupMaxSize, "group-max-size", cfg.GroupMaxSize, "most members of a classic consumer group (group.max.size)")
	fs.DurationVar(&cfg.GroupConsumerSessionTimeout, "group-consumer-session-timeout", cfg.GroupConsumerSessionTimeout, "consumer protocol (KIP-848): a member without a heartbeat this long is fenced (group.consumer.session.timeout.ms)")
	fs.DurationVar(&cfg.GroupConsumerMinSessionTimeout, "group-consumer-min-session-timeout", cfg.GroupConsumerMinSessionTimeout, "lower bound of -group-consumer-session-timeout (group.consumer.min.session.timeout.ms)")
	fs.DurationVar(&cfg.GroupConsumerMaxSessionTimeout, "group-consumer-max-session-timeout", cfg.GroupConsumerMaxSessionTimeout, "upper bound of -group-consumer-session-timeout (group.consumer.max.session.timeout.ms)")
	fs.DurationVar(&cfg.GroupConsumerHeartbeatInterval, "group-consumer-heartbeat-interval", cfg.GroupConsumerHeartbeatInterval, "consumer protocol: the interval members are told to heartbeat at (group.consumer.heartbeat.interval.ms)")
	fs.DurationVar(&cfg.GroupConsumerMinHeartbeatInterval, "group-consumer-min-heartbeat-interval", cfg.GroupConsumerMinHeartbeatInterval, "lower bound of -group-consumer-heartbeat-interval (group.consumer.min.heartbeat.interval.ms)")
	fs.DurationVar(&cfg.GroupConsumerMaxHeartbeatInterval, "group-consumer-max-heartbeat-interval", cfg.GroupConsumerMaxHeartbeatInterval, "upper bound of -group-consumer-heartbeat-interval (group.consumer.max.heartbeat.interval.ms)")
	fs.IntVar(&cfg.GroupConsumerMaxSize, "group-consumer-max-size", cfg.GroupConsumerMaxSize, "most members of a consumer-protocol group (group.consumer.max.size)")
	fs.Func("group-consumer-assignors", "server-side assignors of the consumer protocol, comma-separated, the first the default (group.consumer.assignors; default uniform,range)", func(v string) error {
		var names []string
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		cfg.GroupConsumerAssignors = names
		return nil
	})
	fs.StringVar(&cfg.GroupConsumerMigrationPolicy, "group-consumer-migration-policy", cfg.GroupConsumerMigrationPolicy, "online migration between the classic and the consumer protocol: bidirectional, upgrade, downgrade or disabled (group.consumer.migration.policy)")
	fs.DurationVar(&cfg.OffsetsRetention, "offsets-retention", cfg.OffsetsRetention, "how long committed offsets are kept once their group is empty (offsets.retention.minutes; for commits without a group, after each commit)")
	fs.Func("offsets-topic-partitions", "keep a copy of committed offsets in the __consumer_offsets topic (Kafka's record format) with this many partitions, for tools that read it such as Burrow (Kafka's offsets.topic.num.partitions is 50); 0: no such topic (default 0)", func(s string) error {
		return parseInt32(s, &cfg.OffsetsTopicPartitions)
	})
	fs.DurationVar(&cfg.TransactionMaxTimeout, "transaction-max-timeout", cfg.TransactionMaxTimeout, "longest transaction timeout a transactional producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&cfg.TransactionalIDExpiration, "transactional-id-expiration", cfg.TransactionalIDExpiration, "a transactional id without a transaction is forgotten this long after its last use (transactional.id.expiration.ms)")
	fs.DurationVar(&cfg.TransactionCheckInterval, "transaction-check-interval", cfg.TransactionCheckInterval, "how often transactions past their timeout are aborted and expired transactional ids removed")
	fs.DurationVar(&cfg.TierInterval, "tier-interval", cfg.TierInterval, "how often a leader uploads closed segments to the S3 tier and applies retention there")
	fs.DurationVar(&cfg.ObjectFlushInterval, "object-flush-interval", cfg.ObjectFlushInterval, "strata.durability=object: flushes to S3 are group commits; one starts at once when none is in flight, and one gathering batches that arrived during the previous flush starts at least this long after the previous start (under load, caps PUTs at one per interval per broker; acks=all waits for the flush)")
	fs.BoolVar(&cfg.ObjectWALIndex, "object-wal-index", cfg.ObjectWALIndex, "strata.durability=object: a flush is one metastore write (this broker's WAL index, absorbed by the partition manifests later) instead of one per partition; set false while brokers of a build without the WAL index may still lead object partitions (during an upgrade from one)")
	fs.DurationVar(&cfg.GroupStatsInterval, "group-stats-interval", cfg.GroupStatsInterval, "how often the consumer group metrics (lag, committed offsets, members) are refreshed in the background; a scrape reads the last refresh")
	fs.DurationVar(&cfg.TierOrphanGrace, "tier-orphan-grace", cfg.TierOrphanGrace, "objects of the S3 tier that no manifest references are deleted once this old")
	cfg.TopicDefaults = map[string]string{}
	fs.Var(kvFlag(cfg.TopicDefaults), "topic-default", "default topic config as key=value, repeatable (for example retention.ms=3600000)")
	fs.StringVar(logLevel, "log-level", *logLevel, "log level: debug, info, warn or error")
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := broker.DefaultConfig()
	listen, logLevel := "127.0.0.1:9092", "info"
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveHelp)
		fs.PrintDefaults()
	}
	brokerFlags(fs, &cfg, &listen, &logLevel)
	fs.Func("node-id", "this broker's node id, or auto: the lowest id no live broker holds (default 0)", func(s string) error {
		if s == "auto" {
			cfg.NodeID = broker.AutoNodeID
			return nil
		}
		if err := parseInt32(s, &cfg.NodeID); err != nil || cfg.NodeID < 0 {
			return fmt.Errorf("%q is not a node id (a number from 0, or auto)", s)
		}
		return nil
	})
	fs.StringVar(&cfg.Advertise, "advertise", "", "host:port clients should connect to (default: the listen address; for 0.0.0.0 the ECS task's address, else the first non-loopback IPv4 address)")
	fs.StringVar(&cfg.Rack, "rack", "", "this broker's rack, usually its availability zone; auto: the ECS task's availability zone")
	httpAddr := ""
	fs.StringVar(&httpAddr, "http", httpAddr, "address to serve Prometheus metrics on at /metrics, liveness at /healthz and readiness at /readyz: a listener of its own, apart from Kafka and the registry (host:port; empty: off)")
	var emfInterval time.Duration
	fs.DurationVar(&emfInterval, "emf-interval", 0, "write the CloudWatch metrics (Embedded Metric Format, namespace Strata) as one JSON line on stdout this often (0: off)")
	registryAddr := ""
	fs.StringVar(&registryAddr, "registry", registryAddr, "address to serve the Confluent-compatible schema registry on, at the root path (host:port, e.g. :8081; empty: off)")
	var mf metaFlags
	mf.register(fs)
	var of objectFlags
	of.register(fs)
	var sf securityFlags
	sf.register(fs)
	var hf httpFlags
	hf.register(fs)
	testHookFlags(fs, &cfg) // test-only, with STRATA_TEST_HOOKS=1 (testhooks.go)
	if err := parseFlags(fs, args, stderr, true); err != nil {
		return err
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if err := sf.apply(&cfg, &listen); err != nil {
		return usageError{err}
	}
	if err := sf.env.load(); err != nil {
		return usageError{err}
	}
	if err := sf.env.advertise(ctx, &cfg, listen); err != nil {
		return err
	}
	var regSec registrySecurity
	if registryAddr != "" {
		if regSec, err = hf.registry(&cfg.Security, &sf, logger); err != nil {
			return usageError{err}
		}
	}
	metricsAuth, err := hf.metricsCreds()
	if err != nil {
		return usageError{err}
	}
	if cfg.Rack == "auto" {
		if cfg.Rack, err = autoRack(ctx); err != nil {
			return err
		}
	}
	if err := cfg.ValidateSettings(); err != nil {
		return usageError{err}
	}
	meta, closer, err := mf.open(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer closer.Close()
	cfg.Meta = meta
	if err := sf.bootstrapAdmin(ctx, meta); err != nil {
		return err
	}
	if err := sf.env.provision(ctx, meta); err != nil {
		return err
	}
	if cfg.Objects, err = of.open(ctx, mf.endpoint, mf.region); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	if emfInterval < 0 {
		return usageError{fmt.Errorf("invalid value %v for flag -emf-interval: negative", emfInterval)}
	}
	return serveBrokers(ctx, stdout, logger, []brokerSpec{{cfg: cfg, listen: listen, http: httpAddr, registry: registryAddr,
		registrySec: regSec, metricsAuth: metricsAuth, emf: emfInterval}})
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("invalid value %q for flag -log-level: want debug, info, warn or error", level)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

type brokerSpec struct {
	cfg         broker.Config
	listen      string
	http        string           // metrics and health check address; empty: none
	metricsAuth *basicCreds      // credentials /metrics requires; nil: open
	emf         time.Duration    // CloudWatch EMF lines on stdout this often; 0: none
	registry    string           // schema registry address; empty: none
	registrySec registrySecurity // the registry's authentication and TLS
	console     bool             // also serve the DLQ console at <registry>/console/
	// settle delays the ready line until the coordinator shards are
	// spread over the brokers of this process (dev, where they start
	// together; a serve process is one of a fleet started apart).
	settle bool
}

// serveBrokers starts the brokers, prints one "ready" line with the
// bootstrap addresses, and shuts them down cleanly when ctx ends.
func serveBrokers(ctx context.Context, stdout io.Writer, logger *slog.Logger, specs []brokerSpec) error {
	var brokers []*broker.Broker
	defer func() {
		for _, b := range brokers {
			if err := b.Close(); err != nil {
				logger.Error("close broker", "err", err)
			}
		}
	}()
	nListeners := 0
	for _, s := range specs {
		nListeners += max(1, len(s.cfg.Security.Listeners))
	}
	errc := make(chan error, nListeners) // one per Serve
	var addrs []string
	for _, s := range specs {
		ln, err := net.Listen("tcp", s.listen)
		if err != nil {
			return fmt.Errorf("listen on %s (flag -listen): %w", s.listen, err)
		}
		if s.cfg.Advertise == "" {
			if s.cfg.Advertise, err = advertiseFor(ctx, ln.Addr()); err != nil {
				ln.Close()
				return err
			}
		}
		extra, err := listenExtra(ctx, &s.cfg)
		if err != nil {
			ln.Close()
			return err
		}
		b, err := broker.New(s.cfg)
		if err != nil {
			ln.Close()
			for _, l := range extra {
				l.Close()
			}
			return err
		}
		brokers = append(brokers, b)
		addrs = append(addrs, s.cfg.Advertise)
		go func() { errc <- b.Serve(ln) }()
		for name, l := range extra {
			go func() { errc <- b.ServeListener(name, l) }()
		}
	}
	for i, s := range specs {
		b := brokers[i]
		if s.http != "" {
			srv, err := serveMetrics(s.http, b, s.metricsAuth)
			if err != nil {
				return err
			}
			defer srv.Close()
			logger.Info("serving metrics and health", "broker", s.cfg.NodeID, "url", "http://"+srv.Addr+"/metrics", "health", "http://"+srv.Addr+"/healthz",
				"basic_auth", s.metricsAuth != nil)
		}
		if s.registry != "" {
			ln, err := net.Listen("tcp", s.registry)
			if err != nil {
				return fmt.Errorf("listen on %s (flag -registry): %w", s.registry, err)
			}
			adminOf := []*broker.Broker{b}
			if s.console {
				adminOf = brokers // dev: one listener for the whole process
			}
			reg := registryHandler(b, s.registrySec, adminOf)
			h := reg
			if s.console {
				// The DLQ console beside the registry, as dev promises it:
				// http://<registry>/console/.
				console, err := dlqconsole.New(dlqconsole.Options{Seeds: addrs, RegistryURL: "http://" + ln.Addr().String(), BasePath: "/console"})
				if err != nil {
					ln.Close()
					return err
				}
				defer dlqconsole.Close(console)
				mux := http.NewServeMux()
				mux.Handle("/console/", console)
				mux.Handle("/console", console)
				mux.Handle("/", reg)
				h = mux
			}
			srv := &http.Server{Addr: ln.Addr().String(), Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: s.registrySec.tls}
			scheme := "http://"
			if srv.TLSConfig != nil {
				scheme = "https://"
				go srv.ServeTLS(ln, "", "") // the certificate comes from TLSConfig.GetCertificate
			} else {
				go srv.Serve(ln)
			}
			defer srv.Close()
			logger.Info("serving the schema registry", "broker", s.cfg.NodeID, "url", scheme+srv.Addr,
				"basic_auth", s.registrySec.basic, "acls", b.ACLs() != nil)
			if s.console {
				logger.Info("serving the DLQ console", "url", "http://"+srv.Addr+"/console/")
			}
		}
	}
	// Clients of a fresh cluster should not find consumer group
	// coordinators moving under them: wait (a little) for the controller to
	// spread the coordinator shards over the brokers started here.
	for deadline := time.Now().Add(10 * time.Second); specs[0].settle && time.Now().Before(deadline) && !brokers[0].CoordinatorShardsSettled(len(brokers)); {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Fprintf(stdout, "strata ready: bootstrap %s\n", strings.Join(addrs, ","))
	// EMF lines share stdout, after the ready line.
	emfOut := &lockedWriter{w: stdout}
	emfCtx, stopEMF := context.WithCancel(ctx)
	var emfDone sync.WaitGroup
	defer func() { stopEMF(); emfDone.Wait() }()
	for i, s := range specs {
		if s.emf > 0 {
			emfDone.Go(func() { brokers[i].NewEMF().Run(emfCtx, emfOut, s.emf, logger) })
		}
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
		return nil
	case err := <-errc:
		return err
	}
}

// serveMetrics serves the broker's Prometheus metrics (and the Go runtime's
// and the process's) at /metrics and its health at /healthz and /readyz on
// addr, a listener of their own; with creds, behind basic authentication
// (withMetricsAuth).
func serveMetrics(addr string, b *broker.Broker, creds *basicCreds) (*http.Server, error) {
	return serveHTTP(addr, "-http", withMetricsAuth(metricsHandler(b), creds))
}

// metricsHandler serves GET /metrics: the broker's own registry (only this
// broker's series, even when several brokers share the process, as in dev)
// beside the Go runtime and process collectors; GET /healthz (liveness):
// 200 while the broker runs, whatever the metastore does, with a second
// line telling whether it may act (its registration lease); and GET
// /readyz: 200 once it has been registered and caught up on every
// partition it hosts, and from then on while it runs (broker.Ready,
// latched), so a metastore outage never fails a ready broker's check.
func metricsHandler(b *broker.Broker) http.Handler {
	proc := prometheus.NewRegistry()
	proc.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{b.Gatherer(), proc}, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if err := b.Live(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := b.Healthy(); err != nil {
			io.WriteString(w, "ok\ncannot act: "+err.Error()+"\n")
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if err := b.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	return mux
}

// lockedWriter serializes writes, so lines written by several goroutines
// in one Write each do not interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// serveHTTP serves h on addr until the returned server is closed.
func serveHTTP(addr, flagName string, h http.Handler) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (flag %s): %w", addr, flagName, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

func parseInt32(s string, dst *int32) error {
	var v int64
	if _, err := fmt.Sscan(s, &v); err != nil || v < -1<<31 || v >= 1<<31 {
		return fmt.Errorf("%q is not a 32-bit integer", s)
	}
	*dst = int32(v)
	return nil
}
