package segment

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// faultModel is what the log must hold.
type faultModel struct {
	acked []testBatch // acknowledged batches, oldest first (some may lie below the start offset)
	// maybe are batches that may follow acked: those of a failed append, or
	// those a failed TruncateTo or ResetTo was to remove. Recovery may keep
	// a prefix.
	maybe []testBatch
	// maybeVisible: the log may still show a prefix of maybe before it is
	// reopened (after a failed TruncateTo or ResetTo, not after a failed
	// append).
	maybeVisible bool
	// durable: every batch below it must survive a crash.
	durable int64
	// The start offset lies in [minStart, maxStart]: a failed DeleteTo or
	// retention may or may not have moved it.
	minStart, maxStart int64
}

func (m faultModel) clone() faultModel {
	m.acked, m.maybe = slices.Clone(m.acked), slices.Clone(m.maybe)
	return m
}

func (m faultModel) next() int64 {
	if len(m.acked) == 0 {
		return m.minStart
	}
	return m.acked[len(m.acked)-1].last + 1
}

// faultHarness is one log over Wrap(mem, sw) and its model.
type faultHarness struct {
	t     *testing.T
	mem   *MemFS
	sw    *Switch
	clock *fakeClock
	rng   *rand.Rand
	opts  Options
	log   *Log // nil when closed or not opened
	m     faultModel
	// dryStart is the start offset after the operation in the run without
	// faults: a failed retention may have moved it that far.
	dryStart int64
}

func newFaultHarness(t *testing.T, inj Injector) *faultHarness {
	h := &faultHarness{t: t, sw: NewSwitch(inj), clock: newFakeClock(), rng: rand.New(rand.NewPCG(50, 51))}
	h.opts = Options{Dir: "d", SegmentBytes: 1500, IndexIntervalBytes: 150, SegmentMs: time.Minute, Now: h.clock.Now}
	h.setFS(NewMemFS())
	return h
}

// setFS makes the harness use mem (for example a crashed copy).
func (h *faultHarness) setFS(mem *MemFS) {
	h.mem = mem
	h.opts.FS = Wrap(mem, h.sw)
}

func (h *faultHarness) open() error {
	l, err := Open(h.opts)
	if err == nil {
		h.log = l
	}
	return err
}

// batches returns n new batches at NextOffset with timestamps from the
// clock.
func (h *faultHarness) batches(n int) []testBatch {
	return genBatches(h.rng, h.log.NextOffset(), n, h.clock.Now().UnixMilli())
}

// append appends bs with one Append call and updates the model.
func (h *faultHarness) append(bs []testBatch) error {
	var buf []byte
	for _, b := range bs {
		buf = append(buf, b.data...)
	}
	if err := h.log.Append(buf); err != nil {
		h.m.maybe, h.m.maybeVisible = bs, false
		return err
	}
	h.m.acked, h.m.maybe, h.m.maybeVisible = append(h.m.acked, bs...), nil, false
	return nil
}

// fill appends n batches, up to three per Append, without faults.
func (h *faultHarness) fill(n int) {
	for n > 0 {
		k := min(1+h.rng.IntN(3), n)
		require.NoError(h.t, h.append(h.batches(k)))
		n -= k
	}
}

func (h *faultHarness) flush() error {
	next := h.log.NextOffset()
	if err := h.log.Flush(next); err != nil {
		return err
	}
	require.GreaterOrEqual(h.t, h.log.FlushedOffset(), next)
	h.m.durable = max(h.m.durable, h.log.FlushedOffset())
	return nil
}

func (h *faultHarness) close() error {
	l := h.log
	h.log = nil
	if err := l.Close(); err != nil {
		return err
	}
	// A clean Close flushes everything; one after a failure nothing.
	h.m.durable = max(h.m.durable, l.FlushedOffset())
	return nil
}

// setStart records a start offset the log made durable.
func (h *faultHarness) setStart(off int64) {
	h.m.minStart, h.m.maxStart = off, max(h.m.maxStart, off)
}

// faultScenario is one log operation to inject faults into.
type faultScenario struct {
	name string
	// setup prepares the log without faults.
	setup func(h *faultHarness)
	// run performs the operation with faults armed and updates the model
	// by its outcome.
	run func(h *faultHarness) error
	// must lists operations (kind and base name pattern) the operation has
	// to perform, so that the fault matrix is known to cover them.
	must []faultPoint
	// refusesOn selects the operations, besides the fsync and truncate of a
	// segment file, whose failure makes the log refuse writes.
	refusesOn Predicate
}

type faultPoint struct {
	kind OpKind
	glob string
}

func (p faultPoint) String() string { return p.kind.String() + " " + p.glob }

var (
	rollPoints = []faultPoint{
		{OpSync, "*.log"},
		{OpCreate, "*.index.tmp"}, {OpWrite, "*.index.tmp"}, {OpSync, "*.index.tmp"}, {OpRename, "*.index"},
		{OpWrite, "*.timeindex.tmp"}, {OpSync, "*.timeindex.tmp"}, {OpRename, "*.timeindex"},
		{OpCreate, "*.log"},
		checkpointPoints[0], checkpointPoints[1], checkpointPoints[2], checkpointPoints[3],
	}
	checkpointPoints = []faultPoint{{OpCreate, "checkpoint.tmp"}, {OpWrite, "checkpoint.tmp"}, {OpSync, "checkpoint.tmp"}, {OpRename, "checkpoint"}}
	deletePoints     = []faultPoint{{OpClose, "*.log"}, {OpRemove, "*.log"}, {OpRemove, "*.index"}, {OpRemove, "*.timeindex"}}
)

func points(lists ...[]faultPoint) []faultPoint { return slices.Concat(lists...) }

// standardSetup opens a log of several segments with some batches beyond
// the flushed offset.
func standardSetup(h *faultHarness) {
	require.NoError(h.t, h.open())
	h.fill(24)
	require.NoError(h.t, h.flush())
	h.fill(4)
	require.Greater(h.t, len(h.log.Segments()), 3)
	require.Greater(h.t, h.log.NextOffset(), h.log.FlushedOffset())
}

// activeFill appends small batches until the active segment holds at least
// half of segment.bytes, so the next big batch rolls it.
func activeFill(h *faultHarness) {
	for {
		segs := h.log.Segments()
		if segs[len(segs)-1].Size > h.opts.SegmentBytes/2 {
			return
		}
		h.fill(1)
	}
}

// crashSetup leaves a crashed directory: a torn tail after the flushed
// batches, a stale temporary file and a closed segment without index file.
func crashSetup(h *faultHarness) {
	standardSetup(h)
	segs := h.log.Segments()
	crashed := h.mem.Crash(90)
	f, err := crashed.OpenFile("d/checkpoint.tmp", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(h.t, err)
	_, err = f.Write([]byte("stale"))
	require.NoError(h.t, err)
	require.NoError(h.t, f.Close())
	require.NoError(h.t, crashed.Remove(filepath.Join("d", segmentName(segs[1].BaseOffset, indexSuffix))))
	// The crash lost what was not flushed, or kept some of it.
	durable := h.log.FlushedOffset()
	i := sort.Search(len(h.m.acked), func(i int) bool { return h.m.acked[i].last >= durable })
	h.m.acked, h.m.maybe, h.m.durable = h.m.acked[:i], h.m.acked[i:], durable
	h.m.maybeVisible = true // recovery may keep them
	h.log = nil
	h.setFS(crashed)
}

// bigBatch returns a batch at NextOffset whose size alone fills a segment.
func (h *faultHarness) bigBatch() []testBatch {
	next := h.log.NextOffset()
	ts := h.clock.Now().UnixMilli()
	return []testBatch{{base: next, last: next, maxTs: ts, data: makeBatch(next, 1, ts, ts, int(h.opts.SegmentBytes))}}
}

var faultScenarios = []faultScenario{
	{
		name:  "append",
		setup: func(h *faultHarness) { standardSetup(h); require.NoError(h.t, h.log.Roll()) },
		run:   func(h *faultHarness) error { return h.append(h.batches(3)) },
		must:  []faultPoint{{OpWrite, "*.log"}},
	},
	{
		name:  "append-roll-bytes",
		setup: func(h *faultHarness) { standardSetup(h); activeFill(h) },
		run:   func(h *faultHarness) error { return h.append(h.bigBatch()) },
		must:  points(rollPoints, []faultPoint{{OpWrite, "*.log"}}),
	},
	{
		name:  "append-roll-ms",
		setup: func(h *faultHarness) { standardSetup(h); h.clock.Advance(2 * time.Minute) },
		run:   func(h *faultHarness) error { return h.append(h.batches(1)) },
		must:  points(rollPoints, []faultPoint{{OpWrite, "*.log"}}),
	},
	{
		name:  "maybe-roll",
		setup: func(h *faultHarness) { standardSetup(h); h.clock.Advance(2 * time.Minute) },
		run:   func(h *faultHarness) error { return h.log.MaybeRoll() },
		must:  rollPoints,
	},
	{
		name:  "flush",
		setup: standardSetup,
		run:   func(h *faultHarness) error { return h.flush() },
		must:  []faultPoint{{OpSync, "*.log"}},
	},
	{
		name:  "close",
		setup: standardSetup,
		run:   func(h *faultHarness) error { return h.close() },
		must:  points(rollPoints[:8], checkpointPoints, []faultPoint{{OpClose, "*.log"}}),
	},
	{
		name:  "open-new",
		setup: func(*faultHarness) {},
		run:   func(h *faultHarness) error { return h.open() },
		must:  points([]faultPoint{{OpMkdirAll, "d"}, {OpReadDir, "d"}, {OpCreate, "*.log"}}, checkpointPoints),
	},
	{
		name: "open-clean",
		setup: func(h *faultHarness) {
			standardSetup(h)
			require.NoError(h.t, h.close())
		},
		run: func(h *faultHarness) error { return h.open() },
		must: points(checkpointPoints, []faultPoint{
			{OpOpen, "checkpoint"}, {OpRead, "checkpoint"}, {OpOpen, "*.log"}, {OpSize, "*.log"},
			{OpRead, "*.index"}, {OpRead, "*.timeindex"}, {OpRead, "*.log"}, {OpRemove, "*.index"},
		}),
	},
	{
		name:  "open-after-crash",
		setup: crashSetup,
		run:   func(h *faultHarness) error { return h.open() },
		must: points(checkpointPoints, rollPoints[1:5], []faultPoint{
			{OpReadDir, "d"}, {OpRemove, "checkpoint.tmp"}, {OpRead, "*.log"}, {OpTruncate, "*.log"}, {OpSync, "*.log"},
		}),
	},
	{
		name:  "retention-bytes",
		setup: standardSetup,
		run: func(h *faultHarness) error {
			_, err := h.log.ApplyRetention(0, h.log.Size()/2)
			h.retained(err, h.dryStart)
			return err
		},
		must: points(checkpointPoints, deletePoints),
	},
	{
		name:  "retention-time",
		setup: func(h *faultHarness) { standardSetup(h); h.clock.Advance(time.Hour) },
		run: func(h *faultHarness) error {
			_, err := h.log.ApplyRetention(time.Minute, -1)
			h.retained(err, h.dryStart)
			return err
		},
		must: points(rollPoints, deletePoints),
	},
	{
		name:  "delete-to",
		setup: standardSetup,
		run: func(h *faultHarness) error {
			off := h.m.acked[len(h.m.acked)/2].base + 1
			err := h.log.DeleteTo(off)
			h.retained(err, off)
			return err
		},
		must: points(checkpointPoints, deletePoints),
	},
	{
		name:  "delete-to-next",
		setup: standardSetup,
		run: func(h *faultHarness) error {
			off := h.log.NextOffset()
			err := h.log.DeleteTo(off)
			h.retained(err, off)
			return err
		},
		must: points(rollPoints, deletePoints),
	},
	{
		name:  "truncate-to",
		setup: standardSetup,
		run: func(h *faultHarness) error {
			// A batch boundary inside the second segment.
			seg := h.log.Segments()[1]
			i := slices.IndexFunc(h.m.acked, func(b testBatch) bool { return b.base > seg.BaseOffset })
			off := h.m.acked[i].base
			err := h.log.TruncateTo(off)
			h.m.durable = min(h.m.durable, off)
			if err != nil {
				h.m.maybe, h.m.maybeVisible = h.m.acked[i:], true
			}
			h.m.acked = slices.Clip(h.m.acked[:i])
			return err
		},
		must: points(deletePoints, []faultPoint{{OpTruncate, "*.log"}, {OpSync, "*.log"}}, checkpointPoints),
	},
	{
		name:  "reset-to",
		setup: standardSetup,
		run: func(h *faultHarness) error {
			off := h.log.NextOffset() + 100
			err := h.log.ResetTo(off)
			if err != nil {
				// Segments are removed oldest first: any suffix of them may remain.
				h.m.maybe, h.m.acked, h.m.durable = h.m.acked, nil, 0
				h.m.maybeVisible = true
				h.m.maxStart = off
			} else {
				h.m.acked, h.m.maybe, h.m.durable = nil, nil, off
				h.setStart(off)
			}
			return err
		},
		must: points(deletePoints, []faultPoint{{OpCreate, "*.log"}}, checkpointPoints),
		// Deleting the old segments or creating the new one; the reset is
		// done when only the checkpoint fails.
		refusesOn: Not(PathMatch("checkpoint*")),
	},
}

// retained updates the model after a retention or DeleteTo that was to
// move the start offset up to bound.
func (h *faultHarness) retained(err error, bound int64) {
	if err == nil {
		h.setStart(h.log.StartOffset())
		return
	}
	h.m.maxStart = max(h.m.maxStart, bound)
}

// faultMode is a way of failing the k-th operation of some kind.
type faultMode struct {
	name   string
	counts Predicate // the operations the mode counts
	inject func(k int64) Injector
	// undoFails: the mode also fails the truncate that undoes a short
	// write of a segment file, which makes the log refuse writes.
	undoFails bool
}

func half(n int) int { return n / 2 }

var faultModes = []faultMode{
	{name: "fail", counts: AnyOp, inject: func(k int64) Injector { return Fail(Nth(k, AnyOp)) }},
	{name: "applied", counts: Mutations(), inject: func(k int64) Injector { return FailApplied(Nth(k, Mutations())) }},
	{name: "short", counts: OnOps(OpWrite), inject: func(k int64) Injector { return ShortWrite(Nth(k, AnyOp), half) }},
	{name: "short-undo", counts: OnOps(OpWrite), undoFails: true, inject: func(k int64) Injector {
		// A double fault: the k-th write is short, and every truncate of a
		// segment file after it fails.
		var wrote atomic.Bool
		short := ShortWrite(Nth(k, AnyOp), half)
		undo := Fail(And(OnOps(OpTruncate), PathMatch("*.log")))
		return InjectorFunc(func(op Op) error {
			if wrote.Load() {
				return undo.Inject(op)
			}
			err := short.Inject(op)
			wrote.Store(err != nil)
			return err
		})
	}},
}

// faultOutcome summarizes one run, for the log of the test.
type faultOutcome struct {
	op        string
	failed    bool // the operation returned an error
	continued bool // the log was open after it (not a Close or failed Open)
	refuses   bool // after disarming, the log refused writes until reopened
}

func (o faultOutcome) String() string {
	then := "reopened"
	switch {
	case o.refuses:
		then = "refuses writes"
	case o.continued:
		then = "works"
	}
	return fmt.Sprintf("%-64s error: %-5v then: %s", o.op, o.failed, then)
}

// TestFaults runs each log operation of faultScenarios (appends, rolls by
// segment.bytes and segment.ms, a flush, a close, recovery of a new, a
// cleanly closed and a crashed directory, retention, DeleteTo, TruncateTo
// and ResetTo) over Wrap(MemFS) once per filesystem operation it performs
// (listed by a run without faults), failing that one operation in each
// way of faultModes: failed, carried out but reported failed, a short
// write, and a short write whose undo fails too. It checks the invariant
// that the log never acknowledges what it did not write and never loses
// what it acknowledged. After every injected fault:
//
//   - the operation returns an error wrapping ErrInjected, or succeeds if
//     it could work around the fault; nothing panics;
//   - reads return exactly the acknowledged batches (and, after a failed
//     TruncateTo or ResetTo, maybe some of those it was to remove);
//   - a machine crash right then (MemFS.Crash, losing unsynced bytes or
//     tearing them) recovers a prefix of the log that holds every batch
//     the log had reported flushed;
//   - once the fault is disarmed, the log refuses every write with the
//     injected error until it is reopened if a segment file's fsync or
//     truncate failed or ResetTo could not replace the segments, and
//     otherwise works again: it appends, rolls, flushes and a crash keeps
//     what it flushed;
//   - reopening on the same files (a process restart) recovers every
//     acknowledged batch.
//
// A failed append may leave whole batches that recovery keeps (when its
// bytes were written in full), never partial or foreign bytes. Run with -v
// to see, per fault point, whether the operation failed and what the log
// did next.
func TestFaults(t *testing.T) {
	for _, sc := range faultScenarios {
		t.Run(sc.name, func(t *testing.T) {
			// A run without faults lists the operations performed.
			var ops []Op
			dry := newFaultHarness(t, InjectorFunc(func(op Op) error { ops = append(ops, op); return nil }))
			sc.setup(dry)
			dry.sw.Arm()
			require.NoError(t, sc.run(dry))
			dry.sw.Disarm()
			dryStart := int64(0)
			if dry.log != nil {
				dryStart = dry.log.StartOffset()
			}
			for _, p := range sc.must {
				require.True(t, slices.ContainsFunc(ops, func(op Op) bool { return OnOps(p.kind)(op) && PathMatch(p.glob)(op) }),
					"the operation performs no %v; it did: %v", p, ops)
			}

			var outcomes []faultOutcome
			for _, mode := range faultModes {
				var counted []Op
				for _, op := range ops {
					if mode.counts(op) {
						counted = append(counted, op)
					}
				}
				for k := range counted {
					name := fmt.Sprintf("%s/%02d_%s", mode.name, k+1, counted[k].Kind)
					t.Run(name, func(t *testing.T) {
						o := runFault(t, sc, mode, k+1, counted[k], dryStart)
						o.op = mode.name + " " + counted[k].String()
						outcomes = append(outcomes, o)
					})
				}
			}
			var b strings.Builder
			for _, o := range outcomes {
				fmt.Fprintf(&b, "\n  %v", o)
			}
			t.Logf("%s: %d fault points:%s", sc.name, len(outcomes), b.String())
		})
	}
}

// runFault runs sc with the k-th fault of mode armed during its operation,
// which must fail want, and checks the invariants.
func runFault(t *testing.T, sc faultScenario, mode faultMode, k int, want Op, dryStart int64) (out faultOutcome) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	var hit *Op
	inj := mode.inject(int64(k))
	h := newFaultHarness(t, InjectorFunc(func(op Op) error {
		err := inj.Inject(op)
		if err != nil && hit == nil {
			hit = &op
		}
		return err
	}))
	h.dryStart = dryStart
	sc.setup(h)
	h.sw.Arm()
	err := sc.run(h)
	h.sw.Disarm()
	require.NotNil(t, hit, "no fault injected")
	require.Equal(t, want.String(), hit.String(), "the operations differ from the run without faults")
	out.failed = err != nil
	if err != nil {
		require.ErrorIs(t, err, ErrInjected)
	}

	// What a machine crash right now would leave.
	crashModel := h.m.clone()
	shown := len(h.m.acked) // batches of acked and maybe reads return
	if h.log != nil {
		crashModel.durable = max(crashModel.durable, h.log.FlushedOffset())
		shown = checkContent(t, "after the fault", h.log, h.m, true)
		require.True(t, shown == len(h.m.acked) || h.m.maybeVisible, "reads show batches of a failed append")
	}
	crashed, torn := h.mem.Crash(0), h.mem.Crash(100)

	if h.log != nil {
		// Disarmed, the log works again or refuses writes consistently.
		out.continued = true
		more := h.batches(2)
		before := h.m
		// Appends follow what the log shows it holds.
		model := slices.Concat(h.m.acked, h.m.maybe)
		h.m.acked, h.m.maybe = slices.Clip(model[:shown]), model[shown:]
		// The log refuses writes after a failed fsync or truncate of a
		// segment file (the file may no longer match memory), and after
		// ResetTo failed to replace the segments; after any other fault it
		// works again.
		segmentFile := PathMatch("*.log")(*hit)
		wantRefuse := out.failed && ((sc.refusesOn != nil && sc.refusesOn(*hit)) ||
			(segmentFile && OnOps(OpSync, OpTruncate)(*hit)) ||
			(segmentFile && mode.undoFails && hit.Kind == OpWrite))
		err := h.append(more)
		require.Equal(t, wantRefuse, err != nil, "refuses writes: %v", err)
		if err != nil {
			out.refuses = true
			require.ErrorIs(t, err, ErrInjected, "refuses with the injected error")
			require.ErrorIs(t, h.append(more), ErrInjected, "refuses again")
			require.ErrorIs(t, h.log.Roll(), ErrInjected, "refuses to roll")
			h.m = before // the log refused them before writing
		} else {
			// A roll at a base other than the one the fault may have hit.
			require.NoError(t, h.log.Roll())
			require.NoError(t, h.append(h.batches(1)))
			require.NoError(t, h.flush())
			checkContent(t, "after recovering from the fault", h.log, h.m, true)
			checkReopen(t, h.opts, h.mem.Crash(0), h.m, false, "crash after recovering from the fault")
		}
		require.NoError(t, h.close())
	}

	checkReopen(t, h.opts, crashed, crashModel, false, "crash after the fault")
	checkReopen(t, h.opts, torn, crashModel, false, "crash with torn writes after the fault")
	checkReopen(t, h.opts, h.mem, h.m, true, "restart")
	return out
}

// checkReopen opens the log on mem without faults, checks its content
// against m (all of acked if all is set) and that it appends and closes.
func checkReopen(t *testing.T, opts Options, mem *MemFS, m faultModel, all bool, what string) {
	t.Helper()
	opts.FS = mem
	l, err := Open(opts)
	require.NoError(t, err, "%s: open", what)
	checkContent(t, what, l, m, all)
	next := l.NextOffset()
	require.NoError(t, l.Append(makeBatch(next, 1, 0, 0, 10)), "%s: append", what)
	require.NoError(t, l.Close(), "%s: close", what)
	l, err = Open(opts)
	require.NoError(t, err, "%s: second open", what)
	require.Equal(t, next+1, l.NextOffset(), "%s: second open", what)
	require.NoError(t, l.Close())
}

// checkContent checks that l holds, from its start offset, whole batches
// of m.acked followed by a prefix of m.maybe, all of m.acked if all is set,
// and at least every batch below m.durable. It returns the end of what it
// found, an index into m.acked followed by m.maybe.
func checkContent(t *testing.T, what string, l *Log, m faultModel, all bool) int {
	t.Helper()
	start, next := l.StartOffset(), l.NextOffset()
	require.GreaterOrEqual(t, start, m.minStart, "%s: start offset went back", what)
	require.LessOrEqual(t, start, max(m.maxStart, m.minStart), "%s: start offset beyond what was deleted", what)
	require.GreaterOrEqual(t, next, m.durable, "%s: flushed batches lost", what)

	model := slices.Concat(m.acked, m.maybe)
	i := slices.IndexFunc(model, func(b testBatch) bool { return b.last >= start })
	if i < 0 {
		i = len(model)
	}
	j := i
	require.NoError(t, Split(readAll(t, l), func(h Header, b []byte) error {
		require.Less(t, j, len(model), "%s: batch at %d beyond the model", what, h.BaseOffset)
		require.Equal(t, model[j].data, b, "%s: batch at %d", what, h.BaseOffset)
		j++
		return nil
	}), what)
	if j > i {
		require.Equal(t, model[j-1].last+1, next, "%s: next offset", what)
	} else {
		require.Equal(t, start, next, "%s: empty log", what)
	}
	if all && i < len(m.acked) {
		require.GreaterOrEqual(t, j, len(m.acked), "%s: acknowledged batches lost: log ends at %d, acknowledged up to %d", what, next, m.next())
	}
	if all && i >= len(m.acked) && len(m.acked) > 0 {
		require.GreaterOrEqual(t, next, m.next(), "%s: acknowledged batches lost", what)
	}
	return j
}
