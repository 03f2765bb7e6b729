package metastoretest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// ManualClock is a Clock moved by hand, for lease tests.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock starts at base.
func NewManualClock(base time.Time) *ManualClock { return &ManualClock{t: base} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	leaseDur    = 6 * time.Second
	leaseMargin = time.Second
)

var leaseKey = metastore.Key{PK: "leases", SK: "test"}

func newLease(t *testing.T, s metastore.Store, holder string, clock metastore.Clock) *metastore.Lease {
	t.Helper()
	l, err := metastore.NewLease(s, leaseKey, holder, metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func tick(t *testing.T, l *metastore.Lease) metastore.LeaseState {
	t.Helper()
	st, err := l.Tick(ctx(t))
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	return st
}

func testLeaseRace(t *testing.T, s metastore.Store, _ Options) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for i := 0; i < 16; i++ {
		l := newLease(t, s, fmt.Sprintf("holder-%d", i), nil)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st, err := l.Tick(ctx(t))
			if err != nil {
				t.Errorf("holder %d: %v", i, err)
				return
			}
			if _, valid := l.Valid(); st.Held != valid {
				t.Errorf("holder %d: Tick says held=%v, Valid says %v", i, st.Held, valid)
			}
			if st.Held {
				mu.Lock()
				winners = append(winners, fmt.Sprint(i))
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d holders won the lease (%v), want exactly 1", len(winners), winners)
	}
}

func testLeaseRenewal(t *testing.T, s metastore.Store, _ Options) {
	ca, cb := NewManualClock(time.Unix(1000, 0)), NewManualClock(time.Unix(5000, 0))
	a, b := newLease(t, s, "a", ca), newLease(t, s, "b", cb)
	if !tick(t, a).Held {
		t.Fatal("a did not acquire a free lease")
	}
	for i := 0; i < 20; i++ {
		ca.Advance(leaseDur / 3)
		cb.Advance(leaseDur / 3)
		if !tick(t, a).Held {
			t.Fatalf("round %d: a lost a lease it kept renewing", i)
		}
		if st := tick(t, b); st.Held || st.Holder != "a" || st.Epoch != 1 {
			t.Fatalf("round %d: contender sees %+v, want holder a at epoch 1", i, st)
		}
		if epoch, ok := a.Valid(); !ok || epoch != 1 {
			t.Fatalf("round %d: a may not act (epoch %d, %v)", i, epoch, ok)
		}
	}
}

func testLeaseTakeover(t *testing.T, s metastore.Store, _ Options) {
	for i, skew := range []time.Duration{-30 * time.Second, 0, 30 * time.Second} {
		t.Run(fmt.Sprintf("skew%+v", skew), func(t *testing.T) {
			key := metastore.Key{PK: "leases", SK: fmt.Sprintf("takeover-%d", i)}
			base := time.Unix(100_000, 0)
			ca, cb := NewManualClock(base), NewManualClock(base.Add(skew))
			a, _ := metastore.NewLease(s, key, "a", metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: ca})
			b, _ := metastore.NewLease(s, key, "b", metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: cb})
			if !tick(t, a).Held {
				t.Fatal("a did not acquire")
			}
			// a stops renewing (paused or dead). b watches.
			if tick(t, b).Held {
				t.Fatal("b took a fresh lease at once")
			}
			step := 250 * time.Millisecond
			var took time.Duration
			for elapsed := time.Duration(0); elapsed <= 2*leaseDur; elapsed += step {
				ca.Advance(step)
				cb.Advance(step)
				st := tick(t, b)
				if st.Held {
					took = elapsed + step
					if _, ok := a.Valid(); ok {
						t.Fatalf("b took over at +%v while a could still act", took)
					}
					if st.Epoch != 2 {
						t.Fatalf("takeover epoch %d, want 2", st.Epoch)
					}
					break
				}
				if elapsed+step < leaseDur-leaseMargin {
					if _, ok := a.Valid(); !ok {
						t.Fatalf("a stopped acting at +%v, before its safe deadline", elapsed+step)
					}
				}
			}
			if took < leaseDur || took > leaseDur+time.Second {
				t.Fatalf("b took over after %v; want a full lease (%v) and little more", took, leaseDur)
			}
			// a comes back: its renewal is refused and it knows it lost.
			if st := tick(t, a); st.Held {
				t.Fatal("the old holder renewed after a takeover")
			}
			if _, ok := a.Valid(); ok {
				t.Fatal("the old holder may still act")
			}
		})
	}
}

// failingStore fails every call while down is set.
type failingStore struct {
	metastore.Store
	mu   sync.Mutex
	down bool
}

func (f *failingStore) fail() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fmt.Errorf("injected: %w", metastore.ErrUnavailable)
	}
	return nil
}

func (f *failingStore) Get(c context.Context, k metastore.Key) (metastore.Item, error) {
	if err := f.fail(); err != nil {
		return metastore.Item{}, err
	}
	return f.Store.Get(c, k)
}

func (f *failingStore) Put(c context.Context, it metastore.Item, cond metastore.Cond) (metastore.Item, error) {
	if err := f.fail(); err != nil {
		return metastore.Item{}, err
	}
	return f.Store.Put(c, it, cond)
}

func testLeaseSafeDeadline(t *testing.T, s metastore.Store, _ Options) {
	fs := &failingStore{Store: s}
	clock := NewManualClock(time.Unix(7, 0))
	l, _ := metastore.NewLease(fs, leaseKey, "a", metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: clock})
	if !tick(t, l).Held {
		t.Fatal("did not acquire")
	}
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	for elapsed := time.Duration(0); elapsed < 2*leaseDur; elapsed += 500 * time.Millisecond {
		_, err := l.Tick(ctx(t))
		if !errors.Is(err, metastore.ErrUnavailable) {
			t.Fatalf("tick with the store down: %v", err)
		}
		_, ok := l.Valid()
		if want := elapsed < leaseDur-leaseMargin; ok != want {
			t.Fatalf("at +%v with renewals failing: may act = %v, want %v", elapsed, ok, want)
		}
		clock.Advance(500 * time.Millisecond)
	}
}

func testLeaseRelease(t *testing.T, s metastore.Store, _ Options) {
	a, b := newLease(t, s, "a", nil), newLease(t, s, "b", nil)
	if !tick(t, a).Held {
		t.Fatal("a did not acquire")
	}
	if err := a.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Valid(); ok {
		t.Fatal("a may act after releasing")
	}
	st := tick(t, b)
	if !st.Held || st.Epoch != 2 {
		t.Fatalf("after release b got %+v, want held at epoch 2 at once", st)
	}
}
