package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// ErrInjected is wrapped by the errors that the injectors of this package
// return: a test checks errors.Is(err, ErrInjected) to tell a fault it
// injected through Wrap from a real failure.
var ErrInjected = errors.New("segment: injected fault")

// OpKind is the kind of a filesystem operation seen by an Injector.
type OpKind uint8

// The operations of FS and File.
const (
	OpOpen      OpKind = iota + 1 // FS.OpenFile without os.O_CREATE
	OpCreate                      // FS.OpenFile with os.O_CREATE
	OpRead                        // File.ReadAt
	OpWrite                       // File.Write
	OpSync                        // File.Sync
	OpTruncate                    // File.Truncate
	OpSize                        // File.Size
	OpClose                       // File.Close
	OpRename                      // FS.Rename
	OpRemove                      // FS.Remove
	OpRemoveAll                   // FS.RemoveAll
	OpMkdirAll                    // FS.MkdirAll
	OpReadDir                     // FS.ReadDir
)

var opKindNames = [...]string{
	OpOpen: "open", OpCreate: "create", OpRead: "read", OpWrite: "write",
	OpSync: "sync", OpTruncate: "truncate", OpSize: "size", OpClose: "close",
	OpRename: "rename", OpRemove: "remove", OpRemoveAll: "removeall",
	OpMkdirAll: "mkdirall", OpReadDir: "readdir",
}

func (k OpKind) String() string {
	if int(k) < len(opKindNames) && opKindNames[k] != "" {
		return opKindNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Mutates reports whether operations of kind k change the filesystem.
// OpOpen does not count, although os.O_TRUNC without os.O_CREATE would
// change a file; the log passes O_TRUNC only with O_CREATE (OpCreate).
func (k OpKind) Mutates() bool {
	switch k {
	case OpCreate, OpWrite, OpSync, OpTruncate, OpRename, OpRemove, OpRemoveAll, OpMkdirAll:
		return true
	}
	return false
}

// Op describes one filesystem operation about to run.
type Op struct {
	Kind OpKind
	// Path is the file or directory operated on: for file methods the name
	// the file was opened with, for OpRename the old name.
	Path string
	// NewPath is the new name of an OpRename, empty otherwise.
	NewPath string
	// Len is the number of bytes of an OpRead or OpWrite.
	Len int
}

func (op Op) String() string {
	var b strings.Builder
	b.WriteString(op.Kind.String())
	b.WriteByte(' ')
	b.WriteString(op.Path)
	if op.Kind == OpRename {
		b.WriteString(" -> ")
		b.WriteString(op.NewPath)
	}
	if op.Kind == OpRead || op.Kind == OpWrite {
		fmt.Fprintf(&b, " (%d bytes)", op.Len)
	}
	return b.String()
}

// InjectedError is the error the injectors of this package return. It
// wraps ErrInjected. Besides failing an operation, it can describe what
// the failed operation did first, which Wrap carries out.
type InjectedError struct {
	Op Op
	// Applied: the operation was carried out in full and then reported
	// failure, as when a rename succeeded but the fsync of its directory
	// did not (OS does that).
	Applied bool
	// Written is, for an OpWrite that is not Applied, the number of leading
	// bytes written before the failure (a short write); it is clamped to
	// [0, Op.Len].
	Written int
}

func (e *InjectedError) Error() string {
	switch {
	case e.Applied:
		return fmt.Sprintf("%v: %v (carried out)", ErrInjected, e.Op)
	case e.Op.Kind == OpWrite:
		return fmt.Sprintf("%v: %v (%d bytes written)", ErrInjected, e.Op, e.Written)
	}
	return fmt.Sprintf("%v: %v", ErrInjected, e.Op)
}

func (e *InjectedError) Unwrap() error { return ErrInjected }

// Injector decides, for every operation of a wrapped FS, whether it fails.
// Inject runs before the operation and returns nil to let it run. A
// *InjectedError (possibly wrapped) fails it as the error describes; any
// other error fails it without carrying it out. Inject may be called
// concurrently.
type Injector interface {
	Inject(op Op) error
}

// InjectorFunc adapts a function to the Injector interface.
type InjectorFunc func(op Op) error

// Inject implements Injector.
func (f InjectorFunc) Inject(op Op) error { return f(op) }

// Predicate selects operations. Predicates built by Nth, After and Once
// count the operations they are asked about and so have state; they are
// safe for concurrent use.
type Predicate func(op Op) bool

// AnyOp selects every operation.
func AnyOp(Op) bool { return true }

// OnOps selects operations of the given kinds.
func OnOps(kinds ...OpKind) Predicate {
	var set uint64
	for _, k := range kinds {
		set |= 1 << k
	}
	return func(op Op) bool { return set&(1<<op.Kind) != 0 }
}

// Mutations selects the operations that change the filesystem (see
// OpKind.Mutates).
func Mutations() Predicate {
	return func(op Op) bool { return op.Kind.Mutates() }
}

// PathMatch selects operations whose path's base name matches glob, with
// the syntax of filepath.Match: "*.log", "*.index", "checkpoint",
// "checkpoint.tmp". For OpRename either name may match, so "checkpoint"
// selects the rename of checkpoint.tmp over checkpoint. PathMatch panics
// if glob is malformed, like regexp.MustCompile.
func PathMatch(glob string) Predicate {
	if _, err := filepath.Match(glob, ""); err != nil {
		panic(fmt.Sprintf("segment: PathMatch(%q): %v", glob, err))
	}
	match := func(p string) bool {
		ok, _ := filepath.Match(glob, filepath.Base(p))
		return ok
	}
	return func(op Op) bool {
		return match(op.Path) || (op.Kind == OpRename && match(op.NewPath))
	}
}

// And selects operations that all of ps select. The predicates are asked
// left to right and the first false ends it, so a counting predicate
// after others only counts the operations they selected.
func And(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if !p(op) {
				return false
			}
		}
		return true
	}
}

// Or selects operations that any of ps selects, asking left to right until
// one does.
func Or(ps ...Predicate) Predicate {
	return func(op Op) bool {
		for _, p := range ps {
			if p(op) {
				return true
			}
		}
		return false
	}
}

// Not selects the operations p does not select.
func Not(p Predicate) Predicate {
	return func(op Op) bool { return !p(op) }
}

// Nth selects the n-th operation (counting from 1) that p selects, and no
// other.
func Nth(n int64, p Predicate) Predicate {
	var seen atomic.Int64
	return func(op Op) bool { return p(op) && seen.Add(1) == n }
}

// After selects the operations that p selects except the first n.
func After(n int64, p Predicate) Predicate {
	var seen atomic.Int64
	return func(op Op) bool { return p(op) && seen.Add(1) > n }
}

// Once selects the first operation that p selects: Nth(1, p).
func Once(p Predicate) Predicate { return Nth(1, p) }

// Fail fails the operations p selects without carrying them out.
func Fail(p Predicate) Injector {
	return InjectorFunc(func(op Op) error {
		if !p(op) {
			return nil
		}
		return &InjectedError{Op: op}
	})
}

// FailApplied carries out the operations p selects in full and then
// reports that they failed: the outcome a caller cannot tell from a plain
// failure.
func FailApplied(p Predicate) Injector {
	return InjectorFunc(func(op Op) error {
		if !p(op) {
			return nil
		}
		return &InjectedError{Op: op, Applied: true}
	})
}

// ShortWrite fails writes that p selects after writing keep(n) of their n
// bytes (clamped to [0, n]), as a full disk does. p is asked about writes
// only, so it counts writes only.
func ShortWrite(p Predicate, keep func(n int) int) Injector {
	return InjectorFunc(func(op Op) error {
		if op.Kind != OpWrite || !p(op) {
			return nil
		}
		return &InjectedError{Op: op, Written: min(max(keep(op.Len), 0), op.Len)}
	})
}

// Chain asks injs in order and returns the first error, so an operation
// fails if any of them fails it; the ones after that are not asked.
func Chain(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) error {
		for _, inj := range injs {
			if err := inj.Inject(op); err != nil {
				return err
			}
		}
		return nil
	})
}

// Switch is an Injector that can be armed and disarmed while the
// filesystem is in use, so a test can set up a log without faults and
// then inject them into one operation. While disarmed it lets every
// operation run without asking its injector, so counting predicates only
// count operations seen while armed. The zero Switch is not usable; call
// NewSwitch.
type Switch struct {
	inj   Injector
	armed atomic.Bool
}

// NewSwitch returns a disarmed Switch over inj.
func NewSwitch(inj Injector) *Switch { return &Switch{inj: inj} }

// Arm makes s ask its injector about every operation from now on.
func (s *Switch) Arm() { s.armed.Store(true) }

// Disarm makes s let every operation run from now on.
func (s *Switch) Disarm() { s.armed.Store(false) }

// Armed reports whether s is armed.
func (s *Switch) Armed() bool { return s.armed.Load() }

// Inject implements Injector.
func (s *Switch) Inject(op Op) error {
	if !s.armed.Load() {
		return nil
	}
	return s.inj.Inject(op)
}

// Wrap returns an FS that runs every operation of fsys, and of the files
// it opens, past inj first: an operation inj fails returns inj's error,
// and is carried out as far as a *InjectedError says (Applied, Written).
// A nil inj injects nothing. Operations that read (OpRead, OpSize,
// OpReadDir) fail without a result whatever the error says;
// a failed OpClose closes the underlying file all the same, as close(2)
// releases the descriptor whatever it returns. A failed OpSync that is not
// Applied does not sync, so a later MemFS.Crash loses the unsynced bytes.
func Wrap(fsys FS, inj Injector) FS {
	if inj == nil {
		inj = InjectorFunc(func(Op) error { return nil })
	}
	return &errorFS{fs: fsys, inj: inj}
}

type errorFS struct {
	fs  FS
	inj Injector
}

var _ FS = (*errorFS)(nil)

// inject asks the injector about op. It returns whether to carry out op
// and the error to report afterwards.
func (e *errorFS) inject(op Op) (apply bool, err error) {
	err = e.inj.Inject(op)
	if err == nil {
		return true, nil
	}
	var ie *InjectedError
	return errors.As(err, &ie) && ie.Applied, err
}

// do runs fn unless op is failed without being carried out.
func (e *errorFS) do(op Op, fn func() error) error {
	apply, ierr := e.inject(op)
	if !apply {
		return ierr
	}
	if err := fn(); err != nil {
		return err
	}
	return ierr
}

func (e *errorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	op := Op{Kind: OpOpen, Path: name}
	if flag&os.O_CREATE != 0 {
		op.Kind = OpCreate
	}
	apply, ierr := e.inject(op)
	if !apply {
		return nil, ierr
	}
	f, err := e.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if ierr != nil {
		_ = f.Close() // the caller gets no handle to close
		return nil, ierr
	}
	return &errorFile{f: f, fs: e, name: name}, nil
}

func (e *errorFS) Remove(name string) error {
	return e.do(Op{Kind: OpRemove, Path: name}, func() error { return e.fs.Remove(name) })
}

func (e *errorFS) RemoveAll(path string) error {
	return e.do(Op{Kind: OpRemoveAll, Path: path}, func() error { return e.fs.RemoveAll(path) })
}

func (e *errorFS) Rename(oldname, newname string) error {
	return e.do(Op{Kind: OpRename, Path: oldname, NewPath: newname}, func() error { return e.fs.Rename(oldname, newname) })
}

func (e *errorFS) MkdirAll(path string, perm os.FileMode) error {
	return e.do(Op{Kind: OpMkdirAll, Path: path}, func() error { return e.fs.MkdirAll(path, perm) })
}

func (e *errorFS) ReadDir(dir string) ([]string, error) {
	if err := e.inj.Inject(Op{Kind: OpReadDir, Path: dir}); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(dir)
}

// errorFile is a File opened through an errorFS.
type errorFile struct {
	f    File
	fs   *errorFS
	name string
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.inj.Inject(Op{Kind: OpRead, Path: f.name, Len: len(p)}); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	apply, ierr := f.fs.inject(Op{Kind: OpWrite, Path: f.name, Len: len(p)})
	if !apply {
		var ie *InjectedError
		if !errors.As(ierr, &ie) || ie.Written <= 0 {
			return 0, ierr
		}
		p = p[:min(ie.Written, len(p))] // a short write
	}
	n, err := f.f.Write(p)
	if err != nil {
		return n, err
	}
	return n, ierr
}

func (f *errorFile) Sync() error {
	return f.fs.do(Op{Kind: OpSync, Path: f.name}, f.f.Sync)
}

func (f *errorFile) Truncate(size int64) error {
	return f.fs.do(Op{Kind: OpTruncate, Path: f.name}, func() error { return f.f.Truncate(size) })
}

func (f *errorFile) Size() (int64, error) {
	if err := f.fs.inj.Inject(Op{Kind: OpSize, Path: f.name}); err != nil {
		return 0, err
	}
	return f.f.Size()
}

func (f *errorFile) Close() error {
	ierr := f.fs.inj.Inject(Op{Kind: OpClose, Path: f.name})
	if err := f.f.Close(); err != nil {
		return err
	}
	return ierr
}
