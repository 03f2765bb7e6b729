package tier

// The orphan sweep: objects that no partition's own collection can reach
// because no broker leads their partition any more. A deleted topic's
// objects are removed by the broker that handled DeleteTopics (RemoveTopic),
// in the background: if it dies midway, they stay under the topic id's
// prefix. WAL objects are deleted by the broker that wrote them, when its
// led partitions stop referencing them: those of a node id that never
// returns, or of an earlier incarnation, stay. One broker at a time (the one
// ManagerOptions.Sweep picks) finds both.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
)

// sweep runs the sweep due at now: the cluster-wide one while
// ManagerOptions.Sweep picks this broker, or, without Sweep, the sweep of
// this broker's own WAL objects.
func (tg *Manager) sweep(now time.Time) {
	var run func(context.Context) error
	switch {
	case tg.opts.Sweep == nil:
		run = func(ctx context.Context) error {
			return tg.sweepWAL(ctx, fmt.Sprintf("%s%d/", walPrefix, tg.opts.NodeID), tg.meta.Topics)
		}
	case tg.opts.Sweep():
		run = tg.sweepOrphans
	default:
		return // another broker sweeps; ask again next round
	}
	tg.lastSweep = now
	ctx, cancel := context.WithTimeout(tg.ctx, 5*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil && tg.ctx.Err() == nil {
		tg.log.Warn("sweep unreferenced tier objects", "err", err)
	}
}

// sweepOrphans is the cluster-wide sweep. It costs a listing of the
// bucket's top-level prefixes (topic ids and wal/, not their objects), a
// listing of wal/ and one metastore topic listing; beyond that, only what
// there is to collect: the objects and manifests under a deleted topic's
// prefix, and, when some WAL object is older than the grace, the manifests
// of the "object" durability topics.
func (tg *Manager) sweepOrphans(ctx context.Context) error {
	// The prefixes first: a topic created after this listing has no
	// objects in it, so every prefix listed belongs to a topic that the
	// topic listing shows, unless that topic was deleted.
	prefixes, err := objstore.ListPrefixes(ctx, tg.opts.Objects, "")
	if err != nil {
		return fmt.Errorf("list the bucket's prefixes: %w", err)
	}
	topics, err := tg.meta.Topics(ctx)
	if err != nil {
		return err
	}
	live := make(map[metastore.TopicID]bool, len(topics))
	for _, t := range topics {
		live[t.ID] = true
	}
	var errs []error
	for _, p := range prefixes {
		id, ok := topicPrefix(p)
		if !ok || live[id] {
			continue
		}
		n, err := tg.t.CollectDeleted(ctx, id)
		if err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			tg.log.Info("collected a deleted topic's tier objects", "topicID", id.String(), "objects", n)
		}
	}
	listed := func(context.Context) ([]metastore.Topic, error) { return topics, nil }
	if err := tg.sweepWAL(ctx, walPrefix, listed); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// topicPrefix parses a top-level prefix "<topic id>/".
func topicPrefix(p string) (metastore.TopicID, bool) {
	var id metastore.TopicID
	hexID, ok := strings.CutSuffix(p, "/")
	if !ok || len(hexID) != 2*len(id) || strings.ToLower(hexID) != hexID {
		return id, false
	}
	return id, id.UnmarshalText([]byte(hexID)) == nil
}

// CollectDeleted finishes removing a deleted topic's tier (its id is never
// reused): the manifests of the partitions it has objects of, then its
// objects older than the orphan grace (a younger one may be an upload
// finishing on a leader that has not heard of the deletion: a later call
// takes it), then, once no object is left, every manifest item left under
// the id. It returns how many objects it deleted.
func (t *Tier) CollectDeleted(ctx context.Context, id metastore.TopicID) (int, error) {
	objs, err := t.opts.Store.List(ctx, id.String()+"/")
	if err != nil {
		return 0, fmt.Errorf("tier: list deleted topic %s: %w", id, err)
	}
	parts := map[int32]bool{}
	for _, o := range objs {
		p, _, _ := strings.Cut(strings.TrimPrefix(o.Key, id.String()+"/"), "/")
		if n, err := strconv.ParseInt(p, 10, 32); err == nil && !parts[int32(n)] {
			parts[int32(n)] = true
			if err := t.opts.Meta.DeleteManifest(ctx, id, int32(n)); err != nil {
				return 0, fmt.Errorf("tier: collect deleted topic %s: %w", id, err)
			}
		}
	}
	cutoff := t.opts.Now().Add(-t.opts.OrphanGrace)
	deleted, young := 0, 0
	for _, o := range objs {
		if o.LastModified.After(cutoff) {
			young++
			continue
		}
		if err := t.opts.Store.Delete(ctx, o.Key); err != nil {
			return deleted, fmt.Errorf("tier: collect %s: %w", o.Key, err)
		}
		deleted++
	}
	if young == 0 {
		if err := t.opts.Meta.DeleteManifests(ctx, id); err != nil {
			return deleted, fmt.Errorf("tier: collect deleted topic %s: %w", id, err)
		}
	}
	return deleted, nil
}
