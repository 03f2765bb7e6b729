// Package quota enforces Kafka's client quotas (KIP-13, KIP-55, KIP-124,
// KIP-546) on one broker: producer_byte_rate, consumer_byte_rate and
// request_percentage, configured per user and client id (or their
// defaults) and stored in the metastore, so every broker applies the same
// limits to the traffic it serves, as in Kafka.
//
// The entities and precedence are Kafka's: a quota is found per kind by
// the eight levels of Kafka's default quota callback (user+client,
// user+default client, user, default user+client, default user+default
// client, default user, client, default client), and the level that
// matched decides which clients share one allowance (a user-level quota
// is shared by all that user's client ids; the default user's quota is
// each user's own). A request that takes a client past its quota owes
// throttle time: the broker answers it at once with throttle_time_ms and
// reads nothing more from the connection for that long (KIP-219), and
// well-behaved clients wait as well.
//
// The allowance is a token bucket (as KIP-599 uses for controller
// mutations), not Kafka's sampled-window rate: credit accrues at the quota
// up to Samples × Window of it (Kafka's quota window, 11 s by default), so
// a client may burst that much, and once throttled it gets exactly its
// quota. Kafka's sampled rate lets a client through in bursts whenever a
// whole window expires (a saw-tooth of up to several times the quota
// within each 11 s); the bucket keeps the same long-run rate and burst
// without the saw-tooth. Likewise a fetch is charged for the bytes it
// returns after it is served (Kafka answers a fetch that would go over
// quota empty): the response that goes into debt is delivered and the
// connection then rests until the debt is repaid, which gives the same
// long-run rate and leaves fetch sessions untouched.
//
// With no quota configured, Record costs one atomic load.
package quota

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// Kind is what a quota bounds.
type Kind uint8

const (
	// Produce is bytes of produce requests per second.
	Produce Kind = iota
	// Fetch is bytes of fetch responses per second.
	Fetch
	// Request is the percentage of one request-handling thread's time,
	// per second (200 is two threads' worth).
	Request
	numKinds
)

// Keys are Kafka's quota configuration keys, by Kind.
var Keys = [numKinds]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"}

// Entity types of quota entities.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
)

// Kafka's defaults for quota.window.num and quota.window.size.seconds.
const (
	DefaultSamples = 11
	DefaultWindow  = time.Second
)

// Options configure a Manager; zero values take Kafka's defaults.
type Options struct {
	Clock   clock.Clock
	Samples int
	Window  time.Duration
}

// Manager holds the configured quotas and the rates they bound.
type Manager struct {
	clock   clock.Clock
	samples int
	window  time.Duration

	on atomic.Bool // some quota is configured

	mu        sync.Mutex
	table     map[entityKey][numKinds]float64 // 0: not set for that kind
	sensors   map[sensorKey]*bucket
	lastSweep time.Time
}

// New returns a Manager with no quotas.
func New(o Options) *Manager {
	m := &Manager{clock: clock.Or(o.Clock), samples: o.Samples, window: o.Window,
		table: map[entityKey][numKinds]float64{}, sensors: map[sensorKey]*bucket{}}
	if m.samples < 2 {
		m.samples = DefaultSamples
	}
	if m.window <= 0 {
		m.window = DefaultWindow
	}
	m.lastSweep = m.clock.Now()
	return m
}

// level is one component of an entity: absent, the default, or a name.
type level struct {
	set, def bool
	name     string
}

type entityKey struct{ user, client level }

type sensorKey struct {
	kind         Kind
	user, client string
}

// Set replaces the configured quotas (as the metastore lists them).
// Values of unknown keys and entity types are ignored here; the admin API
// refuses them.
func (m *Manager) Set(qs []metastore.ClientQuota) {
	table := map[entityKey][numKinds]float64{}
	for _, q := range qs {
		var k entityKey
		ok := true
		for _, p := range q.Entity {
			l := level{set: true, def: p.Name == nil}
			if p.Name != nil {
				l.name = *p.Name
			}
			switch p.Type {
			case EntityUser:
				k.user = l
			case EntityClientID:
				k.client = l
			default:
				ok = false
			}
		}
		if !ok || (!k.user.set && !k.client.set) {
			continue
		}
		vals := table[k] // merge, should one entity be listed twice
		for kind, key := range Keys {
			if v, ok := q.Values[key]; ok && v > 0 {
				vals[kind] = v
			}
		}
		if vals != ([numKinds]float64{}) {
			table[k] = vals
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.table = table // a bucket whose bound moved is made again at its next use
	m.on.Store(len(table) > 0)
}

// Enabled reports whether any quota is configured.
func (m *Manager) Enabled() bool { return m.on.Load() }

// lookup finds the quota of kind for (user, client) and the names its rate
// is kept under.
func (m *Manager) lookup(kind Kind, user, client string) (bound float64, key sensorKey, ok bool) {
	named := func(n string) level { return level{set: true, name: n} }
	def := level{set: true, def: true}
	none := level{}
	for _, c := range [...]struct {
		k          entityKey
		user, clnt string
	}{
		{entityKey{named(user), named(client)}, user, client},
		{entityKey{named(user), def}, user, client},
		{entityKey{named(user), none}, user, ""},
		{entityKey{def, named(client)}, user, client},
		{entityKey{def, def}, user, client},
		{entityKey{def, none}, user, ""},
		{entityKey{none, named(client)}, "", client},
		{entityKey{none, def}, "", client},
	} {
		if v := m.table[c.k][kind]; v > 0 {
			return v, sensorKey{kind, c.user, c.clnt}, true
		}
	}
	return 0, sensorKey{}, false
}

// Bound returns the quota of kind that applies to (user, client), 0 if
// none does.
func (m *Manager) Bound(kind Kind, user, client string) float64 {
	if !m.on.Load() {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _, _ := m.lookup(kind, user, client)
	return b
}

// Record adds amount (bytes; for Request, seconds of handling time) to
// the use of (user, client) for kind and returns the throttle time it now
// owes, 0 when within its quota or without one.
func (m *Manager) Record(kind Kind, user, client string, amount float64) time.Duration {
	if !m.on.Load() {
		return 0
	}
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	bound, key, ok := m.lookup(kind, user, client)
	if !ok {
		return 0
	}
	if kind == Request {
		amount *= 100 // percent of one thread
	}
	b := m.sensors[key]
	if b == nil || b.rate != bound {
		m.sweep(now)
		b = newBucket(bound, time.Duration(m.samples)*m.window, now)
		m.sensors[key] = b
	}
	return b.spend(now, amount)
}

// sweep drops buckets idle long enough to be full again, at most once a
// minute, so client ids that come and go do not grow the map without
// bound (a bucket made again starts full, as the dropped one would be).
func (m *Manager) sweep(now time.Time) {
	if now.Sub(m.lastSweep) < time.Minute {
		return
	}
	m.lastSweep = now
	idle := 2 * time.Duration(m.samples) * m.window
	for k, b := range m.sensors {
		if now.Sub(b.last) > idle {
			delete(m.sensors, k)
		}
	}
}

// bucket is a token bucket: credit accrues at the quota up to a burst,
// each request spends its amount, and a debt is what the client must wait
// out. Credit is bounded both ways, so one huge request owes at most one
// burst's time.
type bucket struct {
	rate   float64 // per second
	burst  float64
	tokens float64
	at     time.Time
	last   time.Time
}

func newBucket(rate float64, span time.Duration, now time.Time) *bucket {
	burst := rate * span.Seconds()
	return &bucket{rate: rate, burst: burst, tokens: burst, at: now, last: now}
}

func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.at = now
	}
}

// spend takes amount and returns the time until the debt, if any, is
// repaid.
func (b *bucket) spend(now time.Time, amount float64) time.Duration {
	b.refill(now)
	b.last = now
	b.tokens = max(-b.burst, b.tokens-amount)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}
