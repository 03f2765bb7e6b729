package segment

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// errorFSFixture is a MemFS with a directory /d holding file a (contents
// "hello", synced) and the same MemFS wrapped with inj.
func errorFSFixture(t *testing.T, inj Injector) (*MemFS, FS) {
	t.Helper()
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	f, err := m.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	writeString(t, f, "hello")
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	return m, Wrap(m, inj)
}

func exists(m *MemFS, name string) bool {
	_, err := m.OpenFile(name, os.O_RDONLY, 0)
	return err == nil
}

// requireInjected checks that err is an injected failure of an operation of
// kind k on path.
func requireInjected(t *testing.T, err error, k OpKind, path string) {
	t.Helper()
	require.ErrorIs(t, err, ErrInjected)
	var ie *InjectedError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, k, ie.Op.Kind)
	require.Equal(t, path, ie.Op.Path)
}

// TestErrorFSFailsEachOp fails one kind of operation at a time and checks
// that it reports ErrInjected with the operation, and had no effect.
func TestErrorFSFailsEachOp(t *testing.T) {
	tests := []struct {
		kind OpKind
		path string
		// do runs the operation on w and returns its error; check verifies
		// on m that it had no effect.
		do    func(t *testing.T, w FS) error
		check func(t *testing.T, m *MemFS)
	}{
		{OpOpen, "/d/a", func(t *testing.T, w FS) error {
			_, err := w.OpenFile("/d/a", os.O_RDWR, 0)
			return err
		}, nil},
		{OpCreate, "/d/b", func(t *testing.T, w FS) error {
			_, err := w.OpenFile("/d/b", os.O_CREATE|os.O_RDWR, 0o644)
			return err
		}, func(t *testing.T, m *MemFS) { require.False(t, exists(m, "/d/b")) }},
		{OpRead, "/d/a", func(t *testing.T, w FS) error {
			f := openRW(t, w, "/d/a")
			n, err := f.ReadAt(make([]byte, 5), 0)
			requireZeroOnError(t, n, err)
			return err
		}, nil},
		{OpWrite, "/d/a", func(t *testing.T, w FS) error {
			f := openRW(t, w, "/d/a")
			n, err := f.Write([]byte("world"))
			requireZeroOnError(t, n, err)
			return err
		}, func(t *testing.T, m *MemFS) { require.Equal(t, "hello", contents(t, m, "/d/a")) }},
		{OpSync, "/d/a", func(t *testing.T, w FS) error {
			f := openRW(t, w, "/d/a")
			writeString(t, f, " world")
			return f.Sync()
		}, func(t *testing.T, m *MemFS) {
			require.Equal(t, "hello world", contents(t, m, "/d/a"))
			require.Equal(t, "hello", contents(t, m.Crash(0), "/d/a"), "not synced")
		}},
		{OpTruncate, "/d/a", func(t *testing.T, w FS) error {
			return openRW(t, w, "/d/a").Truncate(1)
		}, func(t *testing.T, m *MemFS) { require.Equal(t, "hello", contents(t, m, "/d/a")) }},
		{OpSize, "/d/a", func(t *testing.T, w FS) error {
			n, err := openRW(t, w, "/d/a").Size()
			requireZeroOnError(t, n, err)
			return err
		}, nil},
		{OpClose, "/d/a", func(t *testing.T, w FS) error {
			f := openRW(t, w, "/d/a")
			err := f.Close()
			_, werr := f.Write([]byte("x"))
			require.ErrorIs(t, werr, fs.ErrClosed, "the file is closed all the same")
			return err
		}, nil},
		{OpRename, "/d/a", func(t *testing.T, w FS) error {
			return w.Rename("/d/a", "/d/c")
		}, func(t *testing.T, m *MemFS) {
			require.True(t, exists(m, "/d/a"))
			require.False(t, exists(m, "/d/c"))
		}},
		{OpRemove, "/d/a", func(t *testing.T, w FS) error {
			return w.Remove("/d/a")
		}, func(t *testing.T, m *MemFS) { require.True(t, exists(m, "/d/a")) }},
		{OpRemoveAll, "/d", func(t *testing.T, w FS) error {
			return w.RemoveAll("/d")
		}, func(t *testing.T, m *MemFS) { require.True(t, exists(m, "/d/a")) }},
		{OpMkdirAll, "/d/e/f", func(t *testing.T, w FS) error {
			return w.MkdirAll("/d/e/f", 0o755)
		}, func(t *testing.T, m *MemFS) {
			names, err := m.ReadDir("/d")
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, names)
		}},
		{OpReadDir, "/d", func(t *testing.T, w FS) error {
			names, err := w.ReadDir("/d")
			requireZeroOnError(t, len(names), err)
			return err
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			m, w := errorFSFixture(t, Fail(OnOps(tt.kind)))
			requireInjected(t, tt.do(t, w), tt.kind, tt.path)
			if tt.check != nil {
				tt.check(t, m)
			}
			// The same operation on the unwrapped FS works: only the kind
			// asked for was failed.
			m2, _ := errorFSFixture(t, nil)
			require.NoError(t, tt.do(t, m2))
		})
	}
}

// requireZeroOnError checks that a failed operation returned no result.
func requireZeroOnError[N int | int64](t *testing.T, n N, err error) {
	t.Helper()
	if err != nil {
		require.Zero(t, n)
	}
}

func openRW(t *testing.T, fsys FS, name string) File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	require.NoError(t, err)
	return f
}

// TestErrorFSApplied checks that FailApplied carries operations out before
// failing them.
func TestErrorFSApplied(t *testing.T) {
	m, w := errorFSFixture(t, FailApplied(Mutations()))

	_, err := w.OpenFile("/d/b", os.O_CREATE|os.O_RDWR, 0o644)
	requireInjected(t, err, OpCreate, "/d/b")
	require.True(t, exists(m, "/d/b"), "created")

	requireInjected(t, w.Rename("/d/b", "/d/c"), OpRename, "/d/b")
	require.True(t, exists(m, "/d/c"), "renamed")
	require.False(t, exists(m, "/d/b"))

	requireInjected(t, w.Remove("/d/c"), OpRemove, "/d/c")
	require.False(t, exists(m, "/d/c"), "removed")

	requireInjected(t, w.MkdirAll("/d/e", 0o755), OpMkdirAll, "/d/e")
	names, err := m.ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "e"}, names)

	f, err := w.OpenFile("/d/a", os.O_RDWR, 0) // OpOpen is no mutation
	require.NoError(t, err)
	n, err := f.Write([]byte(" world"))
	requireInjected(t, err, OpWrite, "/d/a")
	require.Equal(t, 6, n)
	requireInjected(t, f.Sync(), OpSync, "/d/a")
	require.Equal(t, "hello world", contents(t, m.Crash(0), "/d/a"), "synced")
	requireInjected(t, f.Truncate(5), OpTruncate, "/d/a")
	require.Equal(t, "hello", contents(t, m, "/d/a"), "truncated")

	requireInjected(t, w.RemoveAll("/d"), OpRemoveAll, "/d")
	require.False(t, exists(m, "/d/a"), "removed")
}

func TestErrorFSShortWrite(t *testing.T) {
	half := func(n int) int { return n / 2 }
	m, w := errorFSFixture(t, ShortWrite(PathMatch("a"), half))
	f := openRW(t, w, "/d/a")
	n, err := f.Write([]byte("0123456789"))
	requireInjected(t, err, OpWrite, "/d/a")
	require.Equal(t, 5, n)
	require.Equal(t, "hello01234", contents(t, m, "/d/a"))
	var ie *InjectedError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, 5, ie.Written)
	require.Equal(t, "segment: injected fault: write /d/a (10 bytes) (5 bytes written)", err.Error())
	require.NoError(t, f.Sync(), "ShortWrite fails writes only")

	// keep is clamped to the length of the write.
	for _, keep := range []int{-3, 0, 100} {
		m, w := errorFSFixture(t, ShortWrite(AnyOp, func(int) int { return keep }))
		n, err := openRW(t, w, "/d/a").Write([]byte("abc"))
		require.ErrorIs(t, err, ErrInjected)
		want := min(max(keep, 0), 3)
		require.Equal(t, want, n, "keep %d", keep)
		require.Equal(t, "hello"+"abc"[:want], contents(t, m, "/d/a"))
	}
}

func TestErrorFSPredicates(t *testing.T) {
	op := func(k OpKind, path string) Op { return Op{Kind: k, Path: path} }
	logW := op(OpWrite, "/x/00000000000000000005.log")
	idxW := op(OpWrite, "/x/00000000000000000005.index.tmp")
	cpRename := Op{Kind: OpRename, Path: "/x/checkpoint.tmp", NewPath: "/x/checkpoint"}
	sync := op(OpSync, "/x/00000000000000000005.log")

	tests := []struct {
		name string
		p    Predicate
		ops  []Op
		want []bool
	}{
		{"OnOps", OnOps(OpWrite, OpRename), []Op{logW, sync, cpRename}, []bool{true, false, true}},
		{"Mutations", Mutations(), []Op{sync, op(OpRead, "a"), op(OpOpen, "a"), op(OpRemove, "a")}, []bool{true, false, false, true}},
		{"PathMatch log", PathMatch("*.log"), []Op{logW, idxW, op(OpSync, "/y.log/a")}, []bool{true, false, false}},
		{"PathMatch tmp", PathMatch("*.tmp"), []Op{idxW, cpRename, logW}, []bool{true, true, false}},
		{"PathMatch rename target", PathMatch("checkpoint"), []Op{cpRename, op(OpRemove, "/x/checkpoint")}, []bool{true, true}},
		{"And", And(OnOps(OpWrite), PathMatch("*.log")), []Op{logW, idxW, sync}, []bool{true, false, false}},
		{"Or", Or(OnOps(OpSync), PathMatch("*.tmp")), []Op{logW, idxW, sync}, []bool{false, true, true}},
		{"Not", Not(OnOps(OpWrite)), []Op{logW, sync}, []bool{false, true}},
		{"Nth", Nth(2, OnOps(OpWrite)), []Op{sync, logW, sync, idxW, logW}, []bool{false, false, false, true, false}},
		{"After", After(1, OnOps(OpWrite)), []Op{logW, sync, idxW, logW}, []bool{false, false, true, true}},
		{"Once", Once(PathMatch("*.log")), []Op{idxW, sync, logW}, []bool{false, true, false}},
		// And asks left to right: the counter only sees writes.
		{"And counts after filter", And(OnOps(OpWrite), Nth(2, AnyOp)), []Op{sync, logW, sync, idxW}, []bool{false, false, false, true}},
		{"And counts before filter", And(Nth(2, AnyOp), OnOps(OpWrite)), []Op{sync, logW, sync, idxW}, []bool{false, true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []bool
			for _, op := range tt.ops {
				got = append(got, tt.p(op))
			}
			require.Equal(t, tt.want, got)
		})
	}
	require.Panics(t, func() { PathMatch("[") })
}

// TestErrorFSNthConcurrent checks that a counting predicate fires exactly
// once when many goroutines write at the same time.
func TestErrorFSNthConcurrent(t *testing.T) {
	m, w := errorFSFixture(t, Fail(Nth(150, OnOps(OpWrite))))
	var failed sync.Map
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := openRW(t, w, "/d/a")
			for i := range 40 {
				if _, err := f.Write([]byte{'x'}); err != nil {
					failed.Store([2]int{g, i}, err)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	failed.Range(func(_, v any) bool {
		require.ErrorIs(t, v.(error), ErrInjected)
		n++
		return true
	})
	require.Equal(t, 1, n)
	require.Len(t, contents(t, m, "/d/a"), len("hello")+8*40-1)
}

func TestErrorFSSwitchAndChain(t *testing.T) {
	sw := NewSwitch(Fail(Nth(2, OnOps(OpSync))))
	custom := errors.New("custom")
	_, w := errorFSFixture(t, Chain(sw, InjectorFunc(func(op Op) error {
		if op.Kind == OpTruncate {
			return custom
		}
		return nil
	})))
	f := openRW(t, w, "/d/a")
	for range 3 {
		require.NoError(t, f.Sync(), "disarmed: nothing fails and nothing is counted")
	}
	require.ErrorIs(t, f.Truncate(0), custom, "a plain error fails the operation")
	require.NotErrorIs(t, f.Truncate(0), ErrInjected)
	require.Equal(t, "hello", contents(t, w, "/d/a"), "not truncated")

	sw.Arm()
	require.True(t, sw.Armed())
	require.NoError(t, f.Sync())
	requireInjected(t, f.Sync(), OpSync, "/d/a")
	require.NoError(t, f.Sync(), "Nth fires once")
	sw.Disarm()
	require.False(t, sw.Armed())
	require.NoError(t, f.Sync())
}

// TestErrorFSPassThrough runs a log over a wrapped MemFS whose injector
// never fails and checks it behaves as over the MemFS itself.
func TestErrorFSPassThrough(t *testing.T) {
	var ops []Op
	rec := InjectorFunc(func(op Op) error { ops = append(ops, op); return nil })
	for _, inj := range []Injector{nil, rec} {
		rng := rand.New(rand.NewPCG(40, 41))
		m := NewMemFS()
		o := memOptions(Wrap(m, inj))
		l := openLog(t, o)
		bs := genBatches(rng, 0, 80, 0)
		appendAll(t, l, rng, bs)
		require.Greater(t, len(l.Segments()), 2)
		require.NoError(t, l.Close())
		l = openLog(t, memOptions(m))
		require.Equal(t, concat(bs), readAll(t, l))
		require.NoError(t, l.Close())
	}
	kinds := map[OpKind]bool{}
	for _, op := range ops {
		kinds[op.Kind] = true
	}
	for _, k := range []OpKind{OpCreate, OpWrite, OpSync, OpRename, OpClose, OpReadDir, OpMkdirAll} {
		require.True(t, kinds[k], "the injector saw no %v", k)
	}
}

func TestOpString(t *testing.T) {
	require.Equal(t, "rename d/checkpoint.tmp -> d/checkpoint", Op{Kind: OpRename, Path: "d/checkpoint.tmp", NewPath: "d/checkpoint"}.String())
	require.Equal(t, "read d/a (3 bytes)", Op{Kind: OpRead, Path: "d/a", Len: 3}.String())
	require.Equal(t, "sync d/a", Op{Kind: OpSync, Path: "d/a"}.String())
	require.Equal(t, "OpKind(99)", OpKind(99).String())
	err := error(&InjectedError{Op: Op{Kind: OpRemove, Path: "d/a"}, Applied: true})
	require.Equal(t, "segment: injected fault: remove d/a (carried out)", err.Error())
}
