package broker

// Client quota enforcement (see package quota for the semantics): every
// request is charged its handling time, a produce its request bytes and a
// fetch its record bytes; the throttle time owed goes into the response's
// throttle_time_ms, and the connection reads nothing more until it has
// passed (KIP-219). Responses of versions from before KIP-219 are held back
// for the throttle time instead, as Kafka does. Replica fetches are exempt:
// followers are not clients.

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/quota"
)

// quotaUser is the user name quotas know the connection by: its
// principal's name (ANONYMOUS without authentication, as in Kafka).
func quotaUser(cc *clientConn) string {
	p := cc.sec.Principal()
	if i := strings.IndexByte(p, ':'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// exemptFromQuotas reports whether req is a follower's replica fetch.
func exemptFromQuotas(req kmsg.Request) bool {
	f, ok := req.(*kmsg.FetchRequest)
	return ok && f.ReplicaID >= 0
}

// chargeRequest charges a request, when it was served, with its handling
// time and, for a produce, its size, and returns the throttle time owed.
func chargeRequest(b *Broker, user, clientID string, req kmsg.Request, size int, took time.Duration) time.Duration {
	if !b.quotas.Enabled() || req == nil || exemptFromQuotas(req) {
		return 0
	}
	t := b.quotas.Record(quota.Request, user, clientID, took.Seconds())
	if req.Key() == 0 {
		t = max(t, b.quotas.Record(quota.Produce, user, clientID, float64(size)))
	}
	return t
}

// chargeFetch charges a fetch response's record bytes and returns the
// throttle time owed.
func chargeFetch(b *Broker, user, clientID string, req kmsg.Request, resp kmsg.Response) time.Duration {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok || !b.quotas.Enabled() || exemptFromQuotas(req) {
		return 0
	}
	n := 0
	for i := range fr.Topics {
		for j := range fr.Topics[i].Partitions {
			n += len(fr.Topics[i].Partitions[j].RecordBatches)
		}
	}
	if n == 0 {
		return 0
	}
	return b.quotas.Record(quota.Fetch, user, clientID, float64(n))
}

// setThrottle puts t into resp's throttle_time_ms (keeping a larger one)
// and reports whether the client waits after the response (KIP-219) or
// the broker must hold the response back.
func setThrottle(resp kmsg.Response, t time.Duration) (after bool) {
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return true
	}
	ms := int32(min(t.Milliseconds()+1, 1<<31-1))
	cur, after := tr.Throttle()
	if ms > cur {
		resp.(kmsg.SetThrottleResponse).SetThrottle(ms)
	}
	return after
}

// muter holds a connection's reads back until its throttle time passed.
type muter struct{ until atomic.Int64 } // unix nanoseconds on the broker's clock

// mute extends the muted time to until.
func (m *muter) mute(until time.Time) {
	u := until.UnixNano()
	for {
		cur := m.until.Load()
		if cur >= u || m.until.CompareAndSwap(cur, u) {
			return
		}
	}
}

// wait returns once the connection is no longer muted, or false when ctx
// ended first.
func (m *muter) wait(ctx context.Context, b *Broker) bool {
	for {
		d := time.Duration(m.until.Load() - b.clock.Now().UnixNano())
		if d <= 0 {
			return true
		}
		t := b.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}
