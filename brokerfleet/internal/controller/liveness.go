package controller

import (
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// Liveness judges brokers live from their registrations, on the local
// clock only: a broker is live while its registration's version (which
// every heartbeat moves) changed less than a lease ago, as this observer
// saw it. A broker seen with a new incarnation restarted: its disk may
// have lost a tail, so it leaves the ISRs it held until it catches up.
// Every broker keeps one, so a new controller already knows how long each
// broker has been frozen.
type Liveness struct {
	lease time.Duration
	seen  map[int32]observed
	// restarted marks brokers seen with a new incarnation, until Applied
	// says a scan took them out of the ISRs they held.
	restarted map[int32]bool
	// deadSince is when each not-live broker was first judged so.
	deadSince map[int32]time.Time
}

type observed struct {
	version     int64
	at          time.Time
	incarnation string
}

// NewLiveness returns an observer for registrations renewed within lease.
func NewLiveness(lease time.Duration) *Liveness {
	return &Liveness{lease: lease, seen: map[int32]observed{}, restarted: map[int32]bool{}, deadSince: map[int32]time.Time{}}
}

// View is one round's judgement.
type View struct {
	// Live brokers: registered, not released, heartbeating.
	Live map[int32]bool
	// Restarted brokers: seen with a new incarnation and not yet applied.
	Restarted map[int32]bool
	// Frozen brokers: still registered as live, but their registration
	// has not moved for a full lease. The controller fences them.
	Frozen []metastore.Broker
	// DeadFor is how long each not-live broker has been judged not live.
	DeadFor map[int32]time.Duration
	// Racks of every registered broker.
	Racks map[int32]string
}

// Observe judges the registrations read at now.
func (l *Liveness) Observe(brokers []metastore.Broker, now time.Time) View {
	v := View{Live: map[int32]bool{}, Restarted: map[int32]bool{}, DeadFor: map[int32]time.Duration{}, Racks: map[int32]string{}}
	for _, br := range brokers {
		v.Racks[br.ID] = br.Rack
		prev, known := l.seen[br.ID]
		if known && prev.incarnation != "" && prev.incarnation != br.Incarnation {
			l.restarted[br.ID] = true
		}
		if !known || prev.version != br.Version {
			prev = observed{version: br.Version, at: now, incarnation: br.Incarnation}
			l.seen[br.ID] = prev
		}
		if !br.Live {
			continue
		}
		if now.Sub(prev.at) < l.lease {
			v.Live[br.ID] = true
			continue
		}
		v.Frozen = append(v.Frozen, br)
	}
	for _, br := range brokers {
		if v.Live[br.ID] {
			delete(l.deadSince, br.ID)
		} else if _, ok := l.deadSince[br.ID]; !ok {
			l.deadSince[br.ID] = now
		}
	}
	for id, since := range l.deadSince {
		v.DeadFor[id] = now.Sub(since)
	}
	for id := range l.restarted {
		v.Restarted[id] = true
	}
	return v
}

// Applied tells the observer that the restarts of v were applied to every
// partition (or that this broker is not the controller, which acts on
// restarts alone): they no longer count.
func (l *Liveness) Applied(v View) {
	for id := range v.Restarted {
		delete(l.restarted, id)
	}
}
