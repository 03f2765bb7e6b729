package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rewriteFixture is a log of several closed segments and the batches it
// holds.
func rewriteFixture(t testing.TB, fsys FS, seed uint64) (*Log, []testBatch, Options) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	o := Options{FS: fsys, Dir: "d", SegmentBytes: 1000, IndexIntervalBytes: 100}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 60, 0)
	appendAll(t, l, rng, bs)
	require.NoError(t, l.Flush(math.MaxInt64))
	require.GreaterOrEqual(t, len(l.Segments()), 5)
	return l, bs, o
}

// keepEveryOther picks the batches of segs to keep: every other one, and
// always the last (a rewrite must end where the segments do).
func keepEveryOther(bs []testBatch, segs []SegmentInfo) []testBatch {
	from, to := segs[0].BaseOffset, segs[len(segs)-1].NextOffset
	var kept []testBatch
	for i, b := range bs {
		if b.base < from || b.last >= to {
			continue
		}
		if i%2 == 0 || b.last == to-1 {
			kept = append(kept, b)
		}
	}
	return kept
}

// rewriteModel is bs with the batches of [from, to) replaced by kept.
func rewriteModel(bs, kept []testBatch, from, to int64) []testBatch {
	var out []testBatch
	for _, b := range bs {
		if b.base == from {
			out = append(out, kept...)
		}
		if b.base < from || b.base >= to {
			out = append(out, b)
		}
	}
	return out
}

func bases(segs []SegmentInfo) []int64 {
	out := make([]int64, len(segs))
	for i, s := range segs {
		out[i] = s.BaseOffset
	}
	return out
}

func rewrite(l *Log, segs []SegmentInfo, kept []testBatch) error {
	w, err := l.BeginRewrite(bases(segs))
	if err != nil {
		return err
	}
	for _, b := range kept {
		if err := w.Add(b.data); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Commit()
}

// requireContiguous checks the segment set: each segment starts where
// the previous one ends.
func requireContiguous(t *testing.T, l *Log) {
	t.Helper()
	segs := l.Segments()
	for i := 1; i < len(segs); i++ {
		require.Equal(t, segs[i-1].NextOffset, segs[i].BaseOffset, "segment %d", i)
	}
}

func TestRewriteKeepsOffsets(t *testing.T) {
	m := NewMemFS()
	l, bs, o := rewriteFixture(t, m, 60)
	segs := l.Segments()
	src := segs[1:4]
	kept := keepEveryOther(bs, src)
	want := rewriteModel(bs, kept, src[0].BaseOffset, src[2].NextOffset)
	require.NoError(t, rewrite(l, src, kept))

	after := l.Segments()
	require.Len(t, after, len(segs)-2)
	require.Equal(t, src[0].BaseOffset, after[1].BaseOffset)
	require.Equal(t, src[2].NextOffset, after[1].NextOffset)
	requireContiguous(t, l)
	require.Equal(t, concat(want), readAll(t, l))
	require.Equal(t, int64(len(concat(want))), l.Size())

	// An offset in a gap reads from the next batch kept.
	for _, b := range bs {
		if b.base > src[0].BaseOffset && b.last < src[2].NextOffset && !bytes.Contains(concat(kept), b.data) {
			got, err := l.Read(nil, b.base, 1, l.NextOffset())
			require.NoError(t, err)
			h, err := ParseHeader(got)
			require.NoError(t, err)
			require.Greater(t, h.BaseOffset, b.last, "read at %d in a gap", b.base)
			break
		}
	}

	// Reopened cleanly (index files), and after a crash (scans).
	require.NoError(t, l.Close())
	l2 := openLog(t, o)
	require.Equal(t, concat(want), readAll(t, l2))
	requireContiguous(t, l2)
	more := genBatches(rand.New(rand.NewPCG(1, 2)), l2.NextOffset(), 3, 0)
	require.NoError(t, l2.Append(concat(more)))
	require.NoError(t, l2.Flush(math.MaxInt64))
	o.FS = m.Crash(0)
	for _, name := range mustReadDir(t, o.FS, "d") {
		if strings.HasSuffix(name, indexSuffix) || name == checkpointName {
			require.NoError(t, o.FS.Remove("d/"+name))
		}
	}
	l3 := openLog(t, o)
	require.Equal(t, append(concat(want), concat(more)...), readAll(t, l3))
	requireContiguous(t, l3)
}

func mustReadDir(t *testing.T, fsys FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	return names
}

func TestRewriteValidation(t *testing.T) {
	l, bs, _ := rewriteFixture(t, NewMemFS(), 61)
	segs := l.Segments()
	_, err := l.BeginRewrite([]int64{segs[len(segs)-1].BaseOffset})
	require.ErrorIs(t, err, ErrRewriteConflict, "the active segment")
	_, err = l.BeginRewrite([]int64{segs[0].BaseOffset, segs[2].BaseOffset})
	require.ErrorIs(t, err, ErrRewriteConflict, "not consecutive")

	w, err := l.BeginRewrite([]int64{segs[0].BaseOffset})
	require.NoError(t, err)
	_, err = l.BeginRewrite([]int64{segs[1].BaseOffset})
	require.Error(t, err, "one rewrite at a time")
	in := keepEveryOther(bs, segs[:1])
	require.NoError(t, w.Add(in[0].data))
	require.ErrorIs(t, w.Add(in[0].data), ErrNotContiguous, "offsets must increase")
	past := bs[len(bs)-1].data
	require.ErrorIs(t, w.Add(past), ErrNotContiguous, "beyond the range")
	require.Error(t, w.Commit(), "the last batch is missing")
	require.Equal(t, concat(bs), readAll(t, l), "nothing replaced")
	require.NotContains(t, strings.Join(mustReadDir(t, l.fs, "d"), " "), cleanedSuffix)

	// Retention deleting a source segment meanwhile: a conflict.
	w, err = l.BeginRewrite([]int64{segs[0].BaseOffset, segs[1].BaseOffset})
	require.NoError(t, err)
	for _, b := range keepEveryOther(bs, segs[:2]) {
		require.NoError(t, w.Add(b.data))
	}
	require.NoError(t, l.DeleteTo(segs[1].BaseOffset))
	require.ErrorIs(t, w.Commit(), ErrRewriteConflict)
	require.Equal(t, modelBytes(bs, segs[1].BaseOffset), readAll(t, l))
	require.NotContains(t, strings.Join(mustReadDir(t, l.fs, "d"), " "), cleanedSuffix)
}

// TestRewriteCrashAtEveryStep fails, in turn, every filesystem operation a
// rewrite performs, and crashes the machine there: the reopened log holds
// either the old segments or the new one, is contiguous and takes appends.
// With FailApplied the operation takes effect before the crash.
func TestRewriteCrashAtEveryStep(t *testing.T) {
	for _, applied := range []bool{false, true} {
		for n := int64(1); ; n++ {
			mem := NewMemFS()
			inj := Fail(Nth(n, Mutations()))
			if applied {
				inj = FailApplied(Nth(n, Mutations()))
			}
			sw := NewSwitch(inj)
			l, bs, o := rewriteFixture(t, Wrap(mem, sw), 62)
			src := l.Segments()[1:4]
			kept := keepEveryOther(bs, src)
			newer := concat(rewriteModel(bs, kept, src[0].BaseOffset, src[2].NextOffset))
			older := concat(bs)
			sw.Arm()
			err := rewrite(l, src, kept)
			sw.Disarm()
			if err == nil {
				require.Equal(t, newer, readAll(t, l))
				if n == 1 {
					t.Fatalf("no mutation failed")
				}
				t.Logf("applied=%v: %d operations failed in turn", applied, n-1)
				break
			}
			require.ErrorIs(t, err, ErrInjected, "op %d", n)
			// The log as it stands is one of the two.
			got := readAll(t, l)
			require.True(t, bytes.Equal(got, older) || bytes.Equal(got, newer), "op %d: live log", n)

			o.FS = mem.Crash(0)
			l2, err := Open(o)
			require.NoError(t, err, "op %d", n)
			got = readAll(t, l2)
			require.True(t, bytes.Equal(got, older) || bytes.Equal(got, newer), "op %d applied=%v: recovered log is neither", n, applied)
			requireContiguous(t, l2)
			if bytes.Equal(got, newer) {
				require.Contains(t, l2.Rewritten(), src[0].BaseOffset, "op %d: a rewritten segment is marked", n)
			}
			names := strings.Join(mustReadDir(t, o.FS, "d"), " ")
			require.NotContains(t, names, cleanedSuffix)
			require.NotContains(t, names, swapSuffix)
			more := genBatches(rand.New(rand.NewPCG(3, 4)), l2.NextOffset(), 2, 0)
			require.NoError(t, l2.Append(concat(more)), "op %d", n)
			require.NoError(t, l2.Close())
			l3 := openLog(t, o)
			require.Equal(t, append(got, concat(more)...), readAll(t, l3))
			require.NoError(t, l3.Close())
		}
	}
}

// TestAppendFromGaps: a follower's log takes batches past its end (offsets
// the leader's cleaner removed), keeps them across a crash, and truncates
// into a gap at the end of the batch before it.
func TestAppendFromGaps(t *testing.T) {
	m := NewMemFS()
	o := Options{FS: m, Dir: "d", SegmentBytes: 600, IndexIntervalBytes: 100}
	l := openLog(t, o)
	var bs []testBatch
	off := int64(0)
	rng := rand.New(rand.NewPCG(63, 64))
	for i := 0; i < 40; i++ {
		b := genBatches(rng, off, 1, int64(i))[0]
		bs = append(bs, b)
		off = b.last + 1 + int64(rng.IntN(3)) // a gap of 0-2 offsets
	}
	require.ErrorIs(t, l.Append(bs[1].data), ErrNotContiguous, "Append stays strict")
	for _, b := range bs {
		require.NoError(t, l.AppendFrom(b.data))
	}
	require.ErrorIs(t, l.AppendFrom(bs[3].data), ErrNotContiguous, "offsets must still increase")
	require.Equal(t, bs[len(bs)-1].last+1, l.NextOffset())
	require.Equal(t, concat(bs), readAll(t, l))
	requireContiguous(t, l)
	require.NoError(t, l.Flush(math.MaxInt64))

	o.FS = m.Crash(0)
	l2 := openLog(t, o)
	require.Equal(t, concat(bs), readAll(t, l2))
	requireContiguous(t, l2)

	// Truncate into a gap before batch k: the log ends at batch k-1's end.
	k := -1
	for i := 20; i < len(bs); i++ {
		if bs[i].base > bs[i-1].last+1 {
			k = i
			break
		}
	}
	require.Positive(t, k)
	require.NoError(t, l2.TruncateTo(bs[k].base-1))
	require.Equal(t, bs[k-1].last+1, l2.NextOffset())
	require.Equal(t, concat(bs[:k]), readAll(t, l2))
	err := l2.TruncateTo(bs[k-1].base + 1)
	if bs[k-1].last > bs[k-1].base {
		require.ErrorIs(t, err, ErrOffsetOutOfRange, "inside a batch")
	}
	require.NoError(t, l2.Close())
}

func TestCleanedOffset(t *testing.T) {
	m := NewMemFS()
	l, bs, o := rewriteFixture(t, m, 65)
	require.Equal(t, int64(0), l.CleanedOffset())
	require.NoError(t, l.SetCleanedOffset(bs[30].base))
	require.NoError(t, l.Close())
	l = openLog(t, o)
	require.Equal(t, bs[30].base, l.CleanedOffset())
	require.NoError(t, l.TruncateTo(bs[20].base))
	require.Equal(t, bs[20].base, l.CleanedOffset())
	require.NoError(t, l.Close())
	// A corrupt checkpoint counts as nothing cleaned.
	f, err := m.OpenFile("d/"+cleanerCheckpointName, 1, 0)
	require.NoError(t, err)
	_, _ = f.Write([]byte("x"))
	require.NoError(t, f.Close())
	l = openLog(t, o)
	require.Equal(t, int64(0), l.CleanedOffset())
	require.True(t, errors.Is(l.Close(), nil))
}

// TestRewrittenMarks: a rewrite marks its segment with a new generation
// (a later rewrite that swallows it takes the mark over); the marks
// survive a restart and a crash; an ack clears only the generation it
// names; a version 1 checkpoint reads as its offset and no marks.
func TestRewrittenMarks(t *testing.T) {
	m := NewMemFS()
	l, bs, o := rewriteFixture(t, m, 66)
	require.Empty(t, l.Rewritten())
	segs := l.Segments()
	src := segs[1:3]
	kept := keepEveryOther(bs, src)
	require.NoError(t, rewrite(l, src, kept))
	require.Equal(t, map[int64]uint64{src[0].BaseOffset: 1}, l.Rewritten())

	// Segments 0 and the rewritten one, merged: one mark, generation 2.
	segs = l.Segments()
	var keep []testBatch
	for _, b := range rewriteModel(bs, kept, src[0].BaseOffset, src[1].NextOffset) {
		if b.last < segs[1].NextOffset {
			keep = append(keep, b)
		}
	}
	require.NoError(t, rewrite(l, segs[:2], keep))
	require.Equal(t, map[int64]uint64{segs[0].BaseOffset: 2}, l.Rewritten())
	require.NoError(t, l.Close())
	l = openLog(t, o)
	require.Equal(t, map[int64]uint64{segs[0].BaseOffset: 2}, l.Rewritten(), "after a restart")
	o.FS = m.Crash(0)
	l = openLog(t, o)
	require.Equal(t, map[int64]uint64{segs[0].BaseOffset: 2}, l.Rewritten(), "after a crash")

	require.NoError(t, l.AckRewritten(segs[0].BaseOffset, 1))
	require.Len(t, l.Rewritten(), 1, "an older generation clears nothing")
	require.NoError(t, l.AckRewritten(segs[0].BaseOffset, 2))
	require.Empty(t, l.Rewritten())
	require.NoError(t, l.Close())
	l = openLog(t, o)
	require.Empty(t, l.Rewritten())

	// A truncation forgets the marks of the segments it removes.
	segs = l.Segments()
	w, err := l.BeginRewrite([]int64{segs[2].BaseOffset})
	require.NoError(t, err)
	for _, b := range bs {
		if b.base >= segs[2].BaseOffset && b.last < segs[2].NextOffset {
			require.NoError(t, w.Add(b.data))
		}
	}
	require.NoError(t, w.Commit())
	require.Contains(t, l.Rewritten(), segs[2].BaseOffset)
	require.NoError(t, l.TruncateTo(segs[1].BaseOffset))
	require.Empty(t, l.Rewritten())
	require.NoError(t, l.Close())

	// Version 1: the offset alone.
	v1 := append([]byte(cleanerCheckpointMagic), 1)
	v1 = binary.BigEndian.AppendUint64(v1, uint64(bs[3].base))
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	require.NoError(t, writeFileAtomic(o.FS, "d/"+cleanerCheckpointName, v1))
	l = openLog(t, o)
	require.Equal(t, bs[3].base, l.CleanedOffset())
	require.Empty(t, l.Rewritten())
	require.NoError(t, l.Close())
}

// FuzzCleanerCheckpoint: any bytes as the cleaner checkpoint open a log
// (no panic, no allocation beyond the file's size: a mark count must
// match the length); a valid one round-trips.
func FuzzCleanerCheckpoint(f *testing.F) {
	m := NewMemFS()
	l, _, o := rewriteFixture(f, m, 67)
	segs := l.Segments()
	l.mu.Lock()
	_ = l.writeCleanerState(segs[1].BaseOffset, map[int64]uint64{segs[0].BaseOffset: 3, segs[2].BaseOffset: 5}, 5)
	l.mu.Unlock()
	valid, _ := readFile(m, "d/"+cleanerCheckpointName)
	require.NoError(f, l.Close())
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	huge := append([]byte(nil), valid...)
	binary.BigEndian.PutUint32(huge[21:], 1<<31)
	f.Add(huge)
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := m.Crash(0)
		if err := writeFileAtomic(fsys, "d/"+cleanerCheckpointName, data); err != nil {
			t.Fatal(err)
		}
		oo := o
		oo.FS = fsys
		l, err := Open(oo)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if len(l.Rewritten()) > len(l.Segments()) {
			t.Fatalf("%d marks for %d segments", len(l.Rewritten()), len(l.Segments()))
		}
		if bytes.Equal(data, valid) && (l.CleanedOffset() != segs[1].BaseOffset || len(l.Rewritten()) != 2) {
			t.Fatalf("valid checkpoint read as %d, %v", l.CleanedOffset(), l.Rewritten())
		}
	})
}
