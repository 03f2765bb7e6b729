package segment

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

var _ FS = (*MemFS)(nil)

// MemFS is an in-memory FS that can simulate a crash. It tracks, for every
// file, the bytes that a Sync made durable. Directory operations (create,
// rename, remove) are durable at once. Open files keep referring to their
// data after a rename or remove, as on POSIX systems. MemFS is safe for
// concurrent use.
type MemFS struct {
	mu    sync.RWMutex
	files map[string]*memNode
	dirs  map[string]struct{}
}

// memNode is the data of one file.
type memNode struct {
	data   []byte // current contents
	synced []byte // contents as of the last Sync; never shares memory with data
	// rewritten is set when data stopped being synced plus appended bytes
	// (a truncate since the last Sync).
	rewritten bool
}

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	return &MemFS{files: map[string]*memNode{}, dirs: map[string]struct{}{}}
}

// Crash returns a new MemFS with the state a machine crash would leave: the
// same directories and files, each file holding its synced bytes plus at
// most tornBytes of the bytes appended after its last Sync (a torn write;
// 0 loses all unsynced bytes). A Truncate not followed by a Sync is lost
// along with any bytes written after it. Files open on m are not carried
// over.
func (m *MemFS) Crash(tornBytes int) *MemFS {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := NewMemFS()
	for d := range m.dirs {
		c.dirs[d] = struct{}{}
	}
	for name, n := range m.files {
		keep := slices.Clone(n.synced)
		if !n.rewritten && tornBytes > 0 && len(n.data) > len(n.synced) {
			keep = append(keep, n.data[len(n.synced):len(n.synced)+min(tornBytes, len(n.data)-len(n.synced))]...)
		}
		c.files[name] = &memNode{data: keep, synced: slices.Clone(keep)}
	}
	return c
}

func isRoot(dir string) bool { return dir == "." || dir == string(filepath.Separator) }

// dirExists reports whether the cleaned path dir is a directory; m.mu must be held.
func (m *MemFS) dirExists(dir string) bool {
	_, ok := m.dirs[dir]
	return ok || isRoot(dir)
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirExists(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	n, ok := m.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		if !m.dirExists(filepath.Dir(name)) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		n = &memNode{}
		m.files[name] = n
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if flag&os.O_TRUNC != 0 && writable && len(n.data) > 0 {
		n.data = n.data[:0]
		n.rewritten = true
	}
	return &memFile{fs: m, node: n, name: name, readable: flag&os.O_WRONLY == 0, writable: writable}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		return nil
	}
	if _, ok := m.dirs[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if m.hasChildren(name) {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(m.dirs, name)
	return nil
}

// hasChildren reports whether anything lives below dir; m.mu must be held.
func (m *MemFS) hasChildren(dir string) bool {
	prefix := dir + string(filepath.Separator)
	for f := range m.files {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	for d := range m.dirs {
		if strings.HasPrefix(d, prefix) {
			return true
		}
	}
	return false
}

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(path string) error {
	path = filepath.Clean(path)
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := path + string(filepath.Separator)
	if isRoot(path) {
		prefix = ""
	}
	for f := range m.files {
		if f == path || strings.HasPrefix(f, prefix) {
			delete(m.files, f)
		}
	}
	for d := range m.dirs {
		if d == path || strings.HasPrefix(d, prefix) {
			delete(m.dirs, d)
		}
	}
	return nil
}

// Rename implements FS. Only files can be renamed.
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[oldname]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if !m.dirExists(filepath.Dir(newname)) {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if m.dirExists(newname) {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EISDIR}
	}
	delete(m.files, oldname)
	m.files[newname] = n
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(path string, _ os.FileMode) error {
	path = filepath.Clean(path)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := path; !isRoot(d); d = filepath.Dir(d) {
		if _, ok := m.files[d]; ok {
			return &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
		}
	}
	for d := path; !isRoot(d); d = filepath.Dir(d) {
		m.dirs[d] = struct{}{}
	}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.dirExists(dir) {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	// A prefix test, not filepath.Dir of every name: a test fleet holds
	// thousands of partition directories, and each opens with a ReadDir.
	prefix := dir + string(filepath.Separator)
	switch dir {
	case ".":
		prefix = ""
	case string(filepath.Separator):
		prefix = dir
	}
	child := func(name string) (string, bool) {
		rest, ok := strings.CutPrefix(name, prefix)
		return rest, ok && rest != "" && !strings.ContainsRune(rest, filepath.Separator)
	}
	var names []string
	for f := range m.files {
		if base, ok := child(f); ok {
			names = append(names, base)
		}
	}
	for d := range m.dirs {
		if base, ok := child(d); ok {
			names = append(names, base)
		}
	}
	slices.Sort(names)
	return names, nil
}

// memFile is an open MemFS file.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	readable bool
	writable bool
	closed   bool // guarded by fs.mu
}

var errBadMode = errors.New("bad file descriptor")

func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case write && !f.writable, !write && !f.readable:
		return &fs.PathError{Op: op, Path: f.name, Err: errBadMode}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.node.data = append(f.node.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "sync", Path: f.name, Err: fs.ErrClosed}
	}
	n := f.node
	if n.rewritten {
		n.synced = slices.Clone(n.data)
		n.rewritten = false
	} else {
		n.synced = append(n.synced, n.data[len(n.synced):]...)
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	n := f.node
	switch {
	case size < int64(len(n.data)):
		n.data = n.data[:size]
	case size > int64(len(n.data)):
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	default:
		return nil
	}
	if size < int64(len(n.synced)) {
		// Synced bytes were cut: data no longer extends synced.
		n.rewritten = true
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if f.closed {
		return 0, &fs.PathError{Op: "stat", Path: f.name, Err: fs.ErrClosed}
	}
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}
