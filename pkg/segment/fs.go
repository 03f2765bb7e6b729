package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
)

// FS is the small filesystem interface the log is written against. Paths
// use the host separator. Implementations: OS and MemFS.
type FS interface {
	// OpenFile opens name with os flags (O_CREATE, O_RDWR, O_WRONLY,
	// O_RDONLY, O_TRUNC and O_EXCL are supported). Writes always append at
	// the end of the file.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory; the error wraps
	// os.ErrNotExist if name does not exist.
	Remove(name string) error
	// RemoveAll removes path and everything below it; a missing path is
	// not an error.
	RemoveAll(path string) error
	// Rename renames a file, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates path and any missing parents.
	MkdirAll(path string, perm os.FileMode) error
	// ReadDir returns the base names of the entries of dir, sorted; the
	// error wraps os.ErrNotExist if dir does not exist.
	ReadDir(dir string) ([]string, error)
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.Writer // appends at the end of the file
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// OS returns the FS of the real filesystem. Writable files are opened with
// O_APPEND. So that directory operations are durable when they return, as
// they are with MemFS, OpenFile with O_CREATE, Remove, RemoveAll and Rename
// fsync the parent directory before returning.
func OS() FS { return osFS{} }

type osFS struct{}

var _ FS = osFS{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		flag |= os.O_APPEND
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 {
		if err := syncDir(filepath.Dir(name)); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return newOSFile(f)
}

func (osFS) Remove(name string) error {
	if err := os.Remove(name); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

func (osFS) RemoveAll(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	err := syncDir(filepath.Dir(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (osFS) Rename(oldname, newname string) error {
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(newname)); err != nil {
		return err
	}
	if od := filepath.Dir(oldname); od != filepath.Dir(newname) {
		return syncDir(od)
	}
	return nil
}

func (osFS) MkdirAll(path string, perm os.FileMode) error {
	// Collect the missing directories, deepest first, to sync the new
	// entries in their parents afterwards.
	var missing []string
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := os.MkdirAll(path, perm); err != nil {
		return err
	}
	for _, p := range missing {
		if err := syncDir(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// syncDir fsyncs the directory dir so that entries created, renamed or
// removed in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// An osFile is a real file shared by its segment and the Spans taken of
// it: each holds a reference, and the descriptor closes with the last.
// The segment's Close gives up its reference once (a second Close is
// os.ErrClosed, as for an os.File); a Span's Close gives up the span's.
type osFile struct {
	*os.File
	fd     int          // f's descriptor, for sendfile
	refs   atomic.Int32 // the segment's and one per open Span
	closed atomic.Bool  // the segment gave up its reference
}

func newOSFile(f *os.File) (*osFile, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	o := &osFile{File: f}
	if err := rc.Control(func(fd uintptr) { o.fd = int(fd) }); err != nil {
		_ = f.Close()
		return nil, err
	}
	o.refs.Store(1)
	return o, nil
}

// retain takes a reference for a Span, or reports false if the last one
// is gone (the file is closed).
func (f *osFile) retain() bool {
	for {
		n := f.refs.Load()
		if n <= 0 {
			return false
		}
		if f.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives up a reference, closing the file with the last.
func (f *osFile) release() error {
	if f.refs.Add(-1) == 0 {
		return f.File.Close()
	}
	return nil
}

// Close gives up the segment's reference.
func (f *osFile) Close() error {
	if f.closed.Swap(true) {
		return os.ErrClosed
	}
	return f.release()
}

func (f *osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// writeFileAtomic replaces name with data: it writes name+".tmp", syncs and
// closes it, then renames it over name. A crash leaves either the old or
// the new contents under name (and maybe a stale .tmp file).
func writeFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// readFile returns the contents of name.
func readFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}
