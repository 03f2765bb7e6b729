package group

// Offset retention (offsets.retention.minutes, KIP-211): committed offsets
// expire, and groups left without members or offsets go. The decision is
// one pure function (expiredOffsets); the run loop applies it to the
// groups of the owned shards every OffsetsRetentionCheckInterval.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// Retention defaults are Kafka's.
const (
	DefaultOffsetsRetention              = 7 * 24 * time.Hour // offsets.retention.minutes = 10080
	DefaultOffsetsRetentionCheckInterval = 10 * time.Minute   // offsets.retention.check.interval.ms = 600000
	// expiryBatch bounds how many groups one run-loop tick examines for
	// expiry (each may cost a load from the metastore); the rest wait for
	// the next ticks.
	expiryBatch = 64
)

// retentionView is what decides which of a group's offsets expire.
type retentionView struct {
	protocolType string
	// empty: no members and no handed-out member ids (state Empty).
	empty bool
	// stable: state Stable.
	stable bool
	// emptySince is when the group last became empty (if empty).
	emptySince time.Time
	// subscribed are the topics the members of a Stable consumer group
	// subscribe to; nil if unknown (a member's metadata did not parse).
	subscribed map[string]bool
}

// expiredOffsets returns, sorted, the partitions whose committed offsets
// expire at now, and whether the group is then to be deleted. It follows
// Kafka's classic groups (ClassicGroup.offsetExpirationCondition and
// OffsetMetadataManager.cleanupExpiredOffsets in Kafka 3.x/4.x):
//
//   - a group without a protocol type (only simple commits): each offset
//     expires retention after its own commit;
//   - an Empty group with a protocol type: every offset expires retention
//     after the group became empty, however recent its commit;
//   - a Stable group of protocol type "consumer" whose subscriptions are
//     known: offsets of topics no member subscribes to expire retention
//     after their commit; offsets of subscribed topics never do;
//   - any other group (rebalancing, Stable with another protocol type or
//     an unreadable subscription): nothing expires.
//
// An empty group is deleted once none of its offsets is left (also when
// it had none to begin with, as Kafka does at its next check). Offsets
// commit times of zero (unknown) count as now.
func expiredOffsets(v retentionView, offsets map[tp]metastore.Offset, now time.Time, retention time.Duration) ([]tp, bool) {
	var base func(metastore.Offset) time.Time
	var subscribed map[string]bool
	switch {
	case v.protocolType == "":
		base = func(o metastore.Offset) time.Time { return commitTime(o, now) }
	case v.empty:
		base = func(metastore.Offset) time.Time { return v.emptySince }
	case v.stable && v.protocolType == "consumer" && v.subscribed != nil:
		base = func(o metastore.Offset) time.Time { return commitTime(o, now) }
		subscribed = v.subscribed
	default:
		return nil, false
	}
	var expired []tp
	all := true
	for k, o := range offsets {
		if subscribed[k.topic] || now.Sub(base(o)) < retention {
			all = false
			continue
		}
		expired = append(expired, k)
	}
	slices.SortFunc(expired, func(a, b tp) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	return expired, all && v.empty
}

// commitTime is when o was committed; zero (unknown) reads as now.
func commitTime(o metastore.Offset, now time.Time) time.Time {
	if o.CommittedAt == 0 {
		return now
	}
	return time.UnixMilli(o.CommittedAt)
}

// mayExpire reports whether a group that is not in memory may have
// offsets to expire at now (or be due for deletion), judging by its index
// entry alone: whether it is worth loading. Not being in memory, it has
// no members here, so a group with a protocol type counts from EmptySince
// and one without from OldestCommit, a lower bound of its commit times.
// A time not recorded (zero: the group had members, or the entry predates
// the field) makes it worth one load, which records one.
func (c *Coordinator) mayExpire(gi metastore.GroupInfo, now time.Time) bool {
	since := gi.OldestCommit
	if gi.ProtocolType != "" {
		since = gi.EmptySince
	}
	return since == 0 || now.Sub(time.UnixMilli(since)) >= c.opts.OffsetsRetention
}

// expiryCandidate is a group to examine: load says whether to read it
// from the metastore if it is not in memory (its index entry says it may
// be due); otherwise a group gone from memory is skipped.
type expiryCandidate struct {
	name string
	load bool
}

// expiryRound runs in the run loop: every OffsetsRetentionCheckInterval it
// lists the groups to examine, then examines up to expiryBatch per tick.
// The metastore cost of a check is one index query per owned shard, one
// load (a generation read, an offsets query, an index read) per group not
// in memory whose index entry says it may be due, and the deletes and
// index writes of what actually changes: proportional to the groups, not
// to their offsets, and groups that are not due cost nothing beyond their
// index entry. A metastore failure abandons the check until the next one,
// so an unavailable metastore holds up the run loop's deadline checks for
// at most one metastore timeout per interval.
func (c *Coordinator) expiryRound(now time.Time) {
	if len(c.expiryDue) == 0 {
		if now.Before(c.expiryNext) {
			return
		}
		c.expiryNext = now.Add(c.opts.OffsetsRetentionCheckInterval)
		c.expiryDue = c.expiryCandidates(now)
	}
	for range min(len(c.expiryDue), expiryBatch) {
		if c.ctx.Err() != nil || !c.opts.Valid() {
			return // the rest waits for the next tick
		}
		cand := c.expiryDue[0]
		c.expiryDue = c.expiryDue[1:]
		if err := c.expireGroup(cand, c.clock.Now()); err != nil {
			if c.ctx.Err() == nil {
				c.log.Warn("offset expiry check abandoned until the next", "group", cand.name, "err", err)
			}
			c.expiryDue = nil
			return
		}
	}
}

// expiryCandidates lists the groups in memory and the indexed groups of
// the owned shards that may be due (none if the index cannot be read).
func (c *Coordinator) expiryCandidates(now time.Time) []expiryCandidate {
	c.mu.Lock()
	load := make(map[string]bool, len(c.groups))
	for name := range c.groups {
		load[name] = false
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, metaTimeout)
	defer cancel()
	for _, shard := range c.Shards() {
		infos, err := c.opts.Meta.Groups(ctx, shard)
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Warn("list groups for offset expiry; retrying at the next check", "shard", shard, "err", err)
			}
			return nil
		}
		for _, gi := range infos {
			if c.mayExpire(gi, now) {
				load[gi.Group] = true
			}
		}
	}
	out := make([]expiryCandidate, 0, len(load))
	for name, l := range load {
		out = append(out, expiryCandidate{name, l})
	}
	slices.SortFunc(out, func(a, b expiryCandidate) int { return strings.Compare(a.name, b.name) })
	return out
}

// errLoad is expireGroup's error when a group could not be loaded.
var errLoad = errors.New("load group: metastore unavailable")

// expireGroup examines one group for expiry. It fails only if the
// metastore did.
func (c *Coordinator) expireGroup(cand expiryCandidate, now time.Time) error {
	var g *group
	if cand.load {
		var code int16
		switch g, code = c.acquire(c.ctx, cand.name); code {
		case 0:
		case codeCoordinatorNotAvailable:
			return errLoad
		default:
			return nil // the shard moved
		}
	} else {
		c.mu.Lock()
		g = c.groups[cand.name]
		c.mu.Unlock()
		if g == nil {
			return nil
		}
		g.mu.Lock()
		if g.gone || !g.loaded {
			g.mu.Unlock()
			return nil
		}
	}
	defer g.mu.Unlock()
	return g.expire(now)
}

// view is the group's state as expiredOffsets needs it. Holds g.mu.
func (g *group) view() retentionView {
	if g.cg != nil {
		// Offsets of topics no member subscribes to expire in any
		// state; an empty group's all expire from when it became empty.
		return retentionView{protocolType: "consumer", empty: len(g.cg.members) == 0, stable: true,
			emptySince: g.emptySince, subscribed: g.consumerSubscribed()}
	}
	v := retentionView{
		protocolType: g.protocolType,
		empty:        g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0,
		stable:       g.state == stateStable,
		emptySince:   g.emptySince,
	}
	if v.stable && g.protocolType == "consumer" {
		v.subscribed = g.subscriptions()
	}
	return v
}

// subscriptions returns the topics the members subscribe to in their
// metadata of the group's protocol, or nil if a member's does not parse
// as consumer subscription metadata. Holds g.mu.
func (g *group) subscriptions() map[string]bool {
	topics := map[string]bool{}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil
		}
		for _, t := range md.Topics {
			topics[t] = true
		}
	}
	return topics
}

// expire deletes the group's offsets whose retention ran out and, if that
// leaves an empty group without offsets, the group; then it brings the
// group's index entry up to date. It fails if the metastore did. Holds
// g.mu, across the metastore calls.
func (g *group) expire(now time.Time) error {
	if !g.indexed && len(g.offsets) == 0 {
		return nil // not a group anyone created
	}
	ctx, cancel := context.WithTimeout(g.c.ctx, metaTimeout)
	defer cancel()
	expired, drop := expiredOffsets(g.view(), g.offsets, now, g.c.opts.OffsetsRetention)
	if len(expired) == 0 && !drop {
		return g.storeInfo(ctx, now)
	}
	offs := make([]metastore.Offset, 0, len(expired))
	for _, k := range expired {
		offs = append(offs, g.offsets[k])
	}
	dropped, err := g.c.opts.Meta.ExpireOffsets(ctx, g.name, g.fence, offs, drop)
	switch {
	case errors.Is(err, metastore.ErrFenced):
		// Another coordinator formed a newer generation: this one is stale.
		g.c.log.Info("offset expiry fenced: group moved on", "group", g.name, "err", err)
		g.c.forget(g)
		return nil
	case err != nil:
		return err
	}
	for _, k := range expired {
		delete(g.offsets, k)
	}
	if len(expired) > 0 {
		g.c.log.Info("committed offsets expired", "group", g.name, "offsets", len(expired))
	}
	switch {
	case dropped:
		g.indexed, g.info, g.protocolType = false, metastore.GroupInfo{}, ""
		g.c.log.Info("group deleted: empty, and its offsets expired", "group", g.name)
	case drop:
		// Offsets were committed through another coordinator meanwhile:
		// read the group again next time.
		g.c.forget(g)
	default:
		return g.storeInfo(ctx, now)
	}
	return nil
}

// wantInfo is the index entry the group should have now. EmptySince is
// exact (a group with a protocol type that is Empty); OldestCommit, a
// lower bound of the commit times, is only recomputed once it is due, so
// a busy group rewrites its entry at most once per retention period.
// Holds g.mu.
func (g *group) wantInfo(now time.Time) metastore.GroupInfo {
	gi := metastore.GroupInfo{Group: g.name, ProtocolType: g.protocolType, OldestCommit: g.info.OldestCommit}
	if g.cg != nil {
		gi.Type = metastore.GroupTypeConsumer
	}
	if g.sg != nil {
		gi.Type = metastore.GroupTypeShare
	}
	if g.protocolType != "" && g.state == stateEmpty && g.memberCount() == 0 {
		gi.EmptySince = g.emptySince.UnixMilli()
	}
	if gi.OldestCommit == 0 || now.Sub(time.UnixMilli(gi.OldestCommit)) >= g.c.opts.OffsetsRetention {
		oldest := now
		for _, o := range g.offsets {
			if t := commitTime(o, now); t.Before(oldest) {
				oldest = t
			}
		}
		gi.OldestCommit = oldest.UnixMilli()
	}
	return gi
}

// storeInfo writes the group's index entry, indexing the group, unless it
// is indexed with that entry already. Holds g.mu, across the write.
func (g *group) storeInfo(ctx context.Context, now time.Time) error {
	gi := g.wantInfo(now)
	if g.indexed && gi == g.info {
		return nil
	}
	if err := g.c.opts.Meta.PutGroupInfo(ctx, gi); err != nil {
		return err
	}
	g.info, g.indexed = gi, true
	return nil
}

// becameEmpty moves the group to Empty after its last member left, and
// records when (retention of its offsets counts from then). A failed
// write is retried by the next expiry check (storeInfo). Holds g.mu,
// across the write.
func (g *group) becameEmpty(now time.Time) {
	wasEmpty := g.state == stateEmpty
	g.state = stateEmpty
	g.leader, g.protocol = "", ""
	g.emptySince = now
	if !wasEmpty && g.generation > 0 && !g.gone {
		g.storeClassicState("the last member left")
		if g.gone {
			return
		}
	}
	if !g.indexed {
		return
	}
	ctx, cancel := context.WithTimeout(g.c.ctx, metaTimeout)
	defer cancel()
	if err := g.storeInfo(ctx, now); err != nil {
		g.c.log.Warn("record that the group became empty", "group", g.name, "err", err)
	}
}
