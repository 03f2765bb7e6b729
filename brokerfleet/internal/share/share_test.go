package share

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// fakeLog is a log of single-record batches 0..n-1.
type fakeLog struct{ n int64 }

func (l fakeLog) Read(off int64, maxBytes int) ([]byte, []Batch, error) {
	var bs []Batch
	for o := off; o < l.n && len(bs) < 50; o++ {
		bs = append(bs, Batch{Base: o, Last: o})
	}
	return nil, bs, nil
}
func (fakeLog) LogStartOffset() int64 { return 0 }

func newTestManager(t *testing.T, c clock.Clock, maxLocks int) (*Manager, *metastore.Meta) {
	t.Helper()
	store, err := embedded.Open(filepath.Join(t.TempDir(), "m.db"), embedded.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	meta := metastore.New(store)
	m := New(Options{Meta: meta, Clock: c, MaxLocks: maxLocks, ExpiryInterval: time.Hour})
	t.Cleanup(m.Close)
	return m, meta
}

func earliest() Init {
	cfg := DefaultConfig()
	cfg.AutoReset = "earliest"
	cfg.DeliveryLimit = 3
	return Init{LogStart: 0, HighWatermark: 10, Config: cfg}
}

func TestShareStateAcquireAckRelease(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Unix(1000, 0))
	m, _ := newTestManager(t, c, 2000)
	key := metastore.ShareKey{Group: "g", Partition: 0}
	p, err := m.Get(ctx, key, 1, false, earliest)
	if err != nil {
		t.Fatal(err)
	}
	cfg := earliest().Config
	log := fakeLog{n: 10}
	_, r, err := p.Acquire("a", log, 4, 1<<20, cfg)
	if err != nil || len(r) != 1 || r[0] != (Range{0, 3, 1}) {
		t.Fatalf("acquire a: %v %v", r, err)
	}
	_, r, _ = p.Acquire("b", log, 100, 1<<20, cfg)
	if len(r) != 1 || r[0] != (Range{4, 9, 1}) {
		t.Fatalf("acquire b: %v", r)
	}
	// b may not acknowledge a's records; overlapping batches are refused.
	if code, _ := p.Ack("b", []AckBatch{{First: 0, Last: 0, Types: []int8{AckAccept}}}, false, cfg); code != kerr.InvalidRecordState.Code {
		t.Fatalf("ack of another member's record: %d", code)
	}
	if code, _ := p.Ack("a", []AckBatch{{0, 1, []int8{1}}, {1, 2, []int8{1}}}, false, cfg); code != kerr.InvalidRequest.Code {
		t.Fatalf("overlapping batches: %d", code)
	}
	if code, _ := p.Ack("a", []AckBatch{{0, 3, []int8{AckAccept, AckRelease, AckReject, AckAccept}}}, false, cfg); code != 0 {
		t.Fatalf("ack: %d", code)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Start != 1 || s.Available != 1 {
		t.Fatalf("after acks: %+v", s)
	}
	// Offset 1 comes back with delivery count 2; accepting twice fails.
	_, r, _ = p.Acquire("c", log, 100, 1<<20, cfg)
	if len(r) != 1 || r[0] != (Range{1, 1, 2}) {
		t.Fatalf("redelivery: %v", r)
	}
	if code, _ := p.Ack("a", []AckBatch{{0, 0, []int8{AckAccept}}}, false, cfg); code != 0 {
		t.Fatalf("ack below the start is ignored: %d", code)
	}
	// Locks expire: b's records come back; at the limit they are archived.
	for i := range 3 {
		c.Advance(cfg.LockDuration)
		p.expire(c.Now())
		_, r, _ = p.Acquire("d", log, 100, 1<<20, cfg)
		if i < 1 && (len(r) == 0 || r[len(r)-1].Last != 9) {
			t.Fatalf("round %d: %v", i, r)
		}
	}
	if s := p.Stats(); s.Available != 0 {
		t.Fatalf("after the limit: %+v", s)
	}
}

func TestShareStateWindowBound(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Unix(1000, 0))
	m, _ := newTestManager(t, c, 5)
	p, err := m.Get(ctx, metastore.ShareKey{Group: "g"}, 1, false, earliest)
	if err != nil {
		t.Fatal(err)
	}
	_, r, _ := p.Acquire("a", fakeLog{n: 10}, 100, 1<<20, earliest().Config)
	if len(r) != 1 || r[0].Last != 4 {
		t.Fatalf("window of 5: %v", r)
	}
	_, r, _ = p.Acquire("b", fakeLog{n: 10}, 100, 1<<20, earliest().Config)
	if len(r) != 0 {
		t.Fatalf("full window acquired %v", r)
	}
}

// A new leader reads what the old one stored: acknowledged records stay
// done, acquired ones come back with their delivery counts; the old
// leader can store nothing after.
func TestShareStateFailover(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Unix(1000, 0))
	m1, meta := newTestManager(t, c, 2000)
	key := metastore.ShareKey{Group: "g"}
	cfg := earliest().Config
	p1, err := m1.Get(ctx, key, 1, false, earliest)
	if err != nil {
		t.Fatal(err)
	}
	p1.Acquire("a", fakeLog{n: 10}, 10, 1<<20, cfg)
	p1.Ack("a", []AckBatch{{0, 4, []int8{AckAccept}}}, false, cfg)
	if err := p1.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := New(Options{Meta: meta, Clock: c, ExpiryInterval: time.Hour})
	defer m2.Close()
	p2, err := m2.Get(ctx, key, 2, false, earliest)
	if err != nil {
		t.Fatal(err)
	}
	_, r, _ := p2.Acquire("b", fakeLog{n: 10}, 10, 1<<20, cfg)
	if len(r) != 1 || r[0] != (Range{5, 9, 2}) {
		t.Fatalf("new leader acquired %v", r)
	}
	p1.Ack("a", []AckBatch{{5, 9, []int8{AckAccept}}}, false, cfg)
	if err := p1.Sync(ctx); err == nil {
		t.Fatal("old leader stored after the new one claimed the partition")
	}
	if _, err := m1.Get(ctx, key, 1, false, earliest); err == nil {
		t.Fatal("old leader reloaded under its old epoch")
	}
}
