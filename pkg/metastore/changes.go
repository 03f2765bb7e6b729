package metastore

import (
	"context"
	"time"
)

// WatchChanges polls the change version every interval and calls fn with
// the new version whenever it moved (and once at start); a version fn
// fails to apply is handed to it again at the next poll. On errors (of the
// read or of fn) it backs off, doubling up to 8 intervals, and calls onErr. It returns when ctx
// ends. Cost: one strongly consistent read per interval per watcher, however
// many topics and partitions exist; the full re-read happens only on change.
func (m *Meta) WatchChanges(ctx context.Context, interval time.Duration, fn func(version int64) error, onErr func(error)) {
	last := int64(-1)
	wait := interval
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := m.ChangeVersion(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if onErr != nil {
				onErr(err)
			}
			wait = min(wait*2, 8*interval)
		default:
			wait = interval
			if v != last {
				// A change is seen only once fn has applied it: after a
				// failure the same version is handed over again next time.
				if err := fn(v); err == nil {
					last = v
				} else {
					wait = min(wait*2, 8*interval) // a persistent failure retries slowly
					if onErr != nil && ctx.Err() == nil {
						onErr(err)
					}
				}
			}
		}
		t.Reset(wait)
	}
}
