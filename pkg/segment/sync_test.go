package segment

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFlushGroupCommit has 16 goroutines append and flush concurrently on a
// filesystem whose fsync takes a millisecond. Flushes that arrive while an
// fsync runs share the next one, so there are fewer fsyncs than flushes.
// Everything flushed survives a crash.
func TestFlushGroupCommit(t *testing.T) {
	m := NewMemFS()
	w := &wrapFS{FS: m, syncDelay: time.Millisecond}
	o := Options{FS: w, Dir: "d", SegmentBytes: 1 << 20}
	l := openLog(t, o)

	const writers, perWriter = 16, 20
	var mu sync.Mutex // assigns offsets and appends in order
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				mu.Lock()
				next := l.NextOffset()
				err := l.Append(makeBatch(next, 2, 0, 0, 30))
				mu.Unlock()
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if err := l.Flush(next + 2); err != nil {
					t.Errorf("flush: %v", err)
					return
				}
				if got := l.FlushedOffset(); got < next+2 {
					t.Errorf("flushed offset %d after Flush(%d)", got, next+2)
					return
				}
			}
		}()
	}
	wg.Wait()
	flushes := int64(writers * perWriter)
	syncs := w.logSyncs.Load()
	t.Logf("%d flushes, %d fsyncs", flushes, syncs)
	require.Less(t, syncs, flushes)
	require.Equal(t, int64(2*flushes), l.FlushedOffset())

	o.FS = m.Crash(0)
	l2 := openLog(t, o)
	require.Equal(t, int64(2*flushes), l2.NextOffset())
}

func TestFlushSemantics(t *testing.T) {
	m := NewMemFS()
	w := &wrapFS{FS: m}
	l := openLog(t, Options{FS: w, Dir: "d"})
	require.NoError(t, l.Flush(0))
	require.Zero(t, w.logSyncs.Load(), "nothing to flush")
	require.NoError(t, l.Append(makeBatch(0, 3, 0, 0, 0)))
	require.Equal(t, int64(0), l.FlushedOffset())
	require.NoError(t, l.Flush(1))
	require.Equal(t, int64(3), l.FlushedOffset(), "covers all appended before the fsync")
	require.Equal(t, int64(1), w.logSyncs.Load())
	require.NoError(t, l.Flush(3))
	require.Equal(t, int64(1), w.logSyncs.Load(), "already durable")
	require.NoError(t, l.Append(makeBatch(3, 1, 0, 0, 0)))
	require.NoError(t, l.Flush(math.MaxInt64), "beyond NextOffset means everything")
	require.Equal(t, int64(4), l.FlushedOffset())
	require.NoError(t, l.TruncateTo(3))
	require.Equal(t, int64(3), l.FlushedOffset())
	require.NoError(t, l.Close())
}

// TestFlushDuringRetention races flushes with retention that rolls and
// deletes the active segment; run with -race.
func TestFlushDuringRetention(t *testing.T) {
	clock := newFakeClock()
	w := &wrapFS{FS: NewMemFS(), syncDelay: 100 * time.Microsecond}
	l := openLog(t, Options{FS: w, Dir: "d", Now: clock.Now})
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				mu.Lock()
				next := l.NextOffset()
				err := l.Append(makeBatch(next, 1, clock.Now().UnixMilli(), clock.Now().UnixMilli(), 10))
				mu.Unlock()
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if err := l.Flush(next + 1); err != nil {
					t.Errorf("flush: %v", err)
					return
				}
			}
		}()
	}
	for range 50 {
		clock.Advance(time.Hour)
		if _, err := l.ApplyRetention(time.Minute, -1); err != nil {
			t.Errorf("retention: %v", err)
		}
	}
	wg.Wait()
	require.Equal(t, l.NextOffset(), l.FlushedOffset())
	require.NoError(t, l.Close())
}

// TestFlushCoversOnlyAppendedBefore appends while an fsync runs: the
// flushed offset covers only what was appended before the fsync started,
// and a Flush for the new batch runs another fsync.
func TestFlushCoversOnlyAppendedBefore(t *testing.T) {
	m := NewMemFS()
	w := &wrapFS{FS: m}
	l := openLog(t, Options{FS: w, Dir: "d"})
	require.NoError(t, l.Append(makeBatch(0, 1, 0, 0, 0)))

	inSync, release := make(chan struct{}), make(chan struct{})
	w.onLogSync = func() {
		w.onLogSync = nil // only the first fsync blocks
		close(inSync)
		<-release
	}
	done := make(chan error)
	go func() { done <- l.Flush(1) }()
	<-inSync
	require.NoError(t, l.Append(makeBatch(1, 1, 0, 0, 0)), "appends proceed during an fsync")
	second := make(chan error)
	go func() { second <- l.Flush(2) }()
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-second)
	require.Equal(t, int64(2), l.FlushedOffset())
	require.Equal(t, int64(2), w.logSyncs.Load())
	require.Equal(t, int64(2), openLog(t, Options{FS: m.Crash(0), Dir: "d"}).NextOffset())
}
