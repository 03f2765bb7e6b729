package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// Broker serves the Kafka protocol for the topics in its data directory.
type Broker struct {
	cfg      Config
	fs       segment.FS
	log      *slog.Logger
	now      func() time.Time
	defaults topic.Defaults
	catalog  *topic.Catalog
	pids     *pidAllocator

	host string
	port int32

	adminMu sync.Mutex   // serializes topic creation, deletion and changes
	mu      sync.RWMutex // guards topics and byID; topicState values are immutable
	topics  map[string]*topicState
	byID    map[topic.ID]*topicState

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	connMu sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed bool
}

// maxPartitionsPerTopic bounds a request's partition count so one request
// cannot open an unbounded number of logs.
const maxPartitionsPerTopic = 10000

// topicState is immutable once published; changes swap in a new value.
type topicState struct {
	meta  topic.Topic
	cfg   topic.Config
	parts []*partition.Partition
}

// New opens (or creates) the broker's data directory: the topic catalog,
// the producer-id allocator and every partition log, recovering them if the
// last shutdown was not clean.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FS == nil {
		cfg.FS = segment.OS()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	defaults, err := topic.NewDefaults(cfg.TopicDefaults)
	if err != nil {
		return nil, err
	}
	catalog, err := topic.OpenCatalog(cfg.FS, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	pids, err := newPIDAllocator(cfg.FS, path.Join(cfg.DataDir, "producer-ids"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg: cfg, fs: cfg.FS, log: cfg.Logger, now: cfg.Now,
		defaults: defaults, catalog: catalog, pids: pids,
		topics: map[string]*topicState{}, byID: map[topic.ID]*topicState{},
		ctx: ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{},
	}
	for _, t := range catalog.List() {
		ts, err := b.openTopic(t)
		if err != nil {
			b.closePartitions()
			return nil, err
		}
		b.topics[t.Name] = ts
		b.byID[t.ID] = ts
	}
	b.wg.Add(1)
	go b.maintain()
	return b, nil
}

func (b *Broker) partitionDir(t topic.Topic, p int32) string {
	return path.Join(b.cfg.DataDir, "logs", t.Name+"-"+t.ID.String(), strconv.Itoa(int(p)))
}

func (b *Broker) openTopic(t topic.Topic) (*topicState, error) {
	cfg, err := b.defaults.Resolve(t.Configs)
	if err != nil {
		return nil, fmt.Errorf("topic %q: %w", t.Name, err)
	}
	ts := &topicState{meta: t, cfg: cfg}
	for i := int32(0); i < t.Partitions; i++ {
		p, err := b.openPartition(t, i, cfg)
		if err != nil {
			for _, p := range ts.parts {
				p.Close()
			}
			return nil, err
		}
		ts.parts = append(ts.parts, p)
	}
	return ts, nil
}

func (b *Broker) openPartition(t topic.Topic, i int32, cfg topic.Config) (*partition.Partition, error) {
	lg, err := segment.Open(segment.Options{
		FS:           b.fs,
		Dir:          b.partitionDir(t, i),
		SegmentBytes: cfg.SegmentBytes,
		SegmentMs:    cfg.SegmentAge,
		Now:          b.now,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.Name, i, err)
	}
	p, err := partition.New(partition.Options{Topic: t.Name, Index: i, Log: lg, Config: cfg, Now: b.now})
	if err != nil {
		lg.Close()
		return nil, err
	}
	return p, nil
}

// Serve accepts Kafka connections on ln until Close. The first listener
// served also decides the advertised address when Config.Advertise is empty.
func (b *Broker) Serve(ln net.Listener) error {
	b.connMu.Lock()
	if b.closed {
		b.connMu.Unlock()
		return net.ErrClosed
	}
	if b.host == "" {
		adv := b.cfg.Advertise
		if adv == "" {
			adv = ln.Addr().String()
		}
		host, port, err := splitHostPort(adv)
		if err != nil {
			b.connMu.Unlock()
			return fmt.Errorf("advertise %q: %w", adv, err)
		}
		b.host, b.port = host, port
	}
	b.lns[ln] = struct{}{}
	b.connMu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || b.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		b.connMu.Lock()
		if b.closed {
			b.connMu.Unlock()
			nc.Close()
			return nil
		}
		b.conns[nc] = struct{}{}
		b.wg.Add(1)
		b.connMu.Unlock()
		go func() {
			defer b.wg.Done()
			b.serveConn(nc)
			b.connMu.Lock()
			delete(b.conns, nc)
			b.connMu.Unlock()
		}()
	}
}

// Addr returns the advertised host and port (valid once Serve has started).
func (b *Broker) Addr() (string, int32) {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	return b.host, b.port
}

// Close stops accepting, closes every connection, waits for in-flight work
// and closes every partition log cleanly.
func (b *Broker) Close() error {
	b.connMu.Lock()
	if b.closed {
		b.connMu.Unlock()
		return nil
	}
	b.closed = true
	for ln := range b.lns {
		ln.Close()
	}
	for nc := range b.conns {
		nc.Close()
	}
	b.connMu.Unlock()
	b.cancel()
	b.wg.Wait()
	return b.closePartitions()
}

func (b *Broker) closePartitions() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, ts := range b.topics {
		for _, p := range ts.parts {
			if err := p.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// maintain applies retention and segment.ms on every partition.
func (b *Broker) maintain() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			b.RunMaintenance()
		}
	}
}

// RunMaintenance applies retention and time-based rolling to every
// partition once.
func (b *Broker) RunMaintenance() {
	for _, p := range b.allPartitions() {
		if err := p.Maintain(); err != nil && !errors.Is(err, partition.ErrClosed) && !errors.Is(err, segment.ErrClosed) {
			b.log.Warn("maintenance failed", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
	}
}

func (b *Broker) allPartitions() []*partition.Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []*partition.Partition
	for _, ts := range b.topics {
		out = append(out, ts.parts...)
	}
	return out
}

// lookup returns a topic's state.
func (b *Broker) lookup(name string) *topicState {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

// lookupPartition returns the partition or nil.
func (b *Broker) lookupPartition(name string, idx int32) *partition.Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ts := b.topics[name]
	if ts == nil || idx < 0 || int(idx) >= len(ts.parts) {
		return nil
	}
	return ts.parts[idx]
}
