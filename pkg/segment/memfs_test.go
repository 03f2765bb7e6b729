package segment

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeString(t *testing.T, f File, s string) {
	t.Helper()
	n, err := f.Write([]byte(s))
	require.NoError(t, err)
	require.Equal(t, len(s), n)
}

func contents(t *testing.T, fsys FS, name string) string {
	t.Helper()
	b, err := readFile(fsys, name)
	require.NoError(t, err)
	return string(b)
}

func TestMemFSCrash(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/a/b", 0o755))
	f, err := m.OpenFile("/a/b/f", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	writeString(t, f, "hello ")
	require.NoError(t, f.Sync())
	writeString(t, f, "world")

	require.Equal(t, "hello ", contents(t, m.Crash(0), "/a/b/f"))
	require.Equal(t, "hello wo", contents(t, m.Crash(2), "/a/b/f"))
	require.Equal(t, "hello world", contents(t, m.Crash(100), "/a/b/f"))

	// A truncate is durable only after Sync, and takes later writes along.
	require.NoError(t, f.Truncate(3))
	writeString(t, f, "p!")
	require.Equal(t, "help!", contents(t, m, "/a/b/f"))
	require.Equal(t, "hello ", contents(t, m.Crash(100), "/a/b/f"))
	require.NoError(t, f.Sync())
	require.Equal(t, "help!", contents(t, m.Crash(0), "/a/b/f"))

	// Truncating only unsynced bytes keeps the append-only view.
	writeString(t, f, "xyz")
	require.NoError(t, f.Truncate(6))
	require.Equal(t, "help!x", contents(t, m.Crash(10), "/a/b/f"))

	// Directory operations are durable at once; unsynced files are empty.
	g, err := m.OpenFile("/a/g", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	writeString(t, g, "data")
	require.NoError(t, m.Rename("/a/g", "/a/b/h"))
	c := m.Crash(0)
	names, err := c.ReadDir("/a/b")
	require.NoError(t, err)
	require.Equal(t, []string{"f", "h"}, names)
	require.Equal(t, "", contents(t, c, "/a/b/h"))

	// O_TRUNC is a truncate too.
	require.NoError(t, g.Sync())
	h, err := m.OpenFile("/a/b/h", os.O_TRUNC|os.O_RDWR, 0)
	require.NoError(t, err)
	writeString(t, h, "new")
	require.Equal(t, "data", contents(t, m.Crash(10), "/a/b/h"))
}

func testFS(t *testing.T, fsys FS, root string) {
	dir := filepath.Join(root, "x", "y")
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	require.NoError(t, fsys.MkdirAll(dir, 0o755), "existing")
	_, err := fsys.ReadDir(filepath.Join(root, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = fsys.OpenFile(filepath.Join(dir, "nope"), os.O_RDWR, 0)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = fsys.OpenFile(filepath.Join(root, "missing", "f"), os.O_CREATE|os.O_RDWR, 0o644)
	require.ErrorIs(t, err, os.ErrNotExist)

	name := filepath.Join(dir, "b")
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	require.NoError(t, err)
	_, err = fsys.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	require.ErrorIs(t, err, os.ErrExist)
	writeString(t, f, "abcdef")
	require.NoError(t, f.Truncate(2))
	writeString(t, f, "XY") // appends at the end
	size, err := f.Size()
	require.NoError(t, err)
	require.Equal(t, int64(4), size)
	buf := make([]byte, 10)
	n, err := f.ReadAt(buf, 1)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "bXY", string(buf[:n]))
	n, err = f.ReadAt(buf[:2], 2)
	require.NoError(t, err)
	require.Equal(t, "XY", string(buf[:n]))
	require.NoError(t, f.Sync())

	ro, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	require.NoError(t, err)
	_, err = ro.Write([]byte("z"))
	require.Error(t, err)
	require.NoError(t, ro.Close())

	f2, err := fsys.OpenFile(filepath.Join(dir, "a"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	require.NoError(t, f2.Close())
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, names)

	require.NoError(t, fsys.Rename(name, filepath.Join(dir, "a")))
	require.Equal(t, "abXY", contents(t, fsys, filepath.Join(dir, "a")))
	n, err = f.ReadAt(buf[:1], 0)
	require.NoError(t, err, "open file survives rename")
	require.Equal(t, "a", string(buf[:n]))
	require.NoError(t, fsys.Remove(filepath.Join(dir, "a")))
	require.ErrorIs(t, fsys.Remove(filepath.Join(dir, "a")), os.ErrNotExist)
	require.NoError(t, f.Close())

	require.Error(t, fsys.Remove(filepath.Join(root, "x")), "not empty")
	require.NoError(t, fsys.RemoveAll(filepath.Join(root, "x")))
	require.NoError(t, fsys.RemoveAll(filepath.Join(root, "x")), "missing is fine")
	names, err = fsys.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, names)
}

func TestMemFS(t *testing.T) { testFS(t, NewMemFS(), "/root") }

func TestOSFS(t *testing.T) { testFS(t, OS(), t.TempDir()) }
