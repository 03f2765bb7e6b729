package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// makeBatch encodes a valid RecordBatch v2 with n records (offsets base to
// base+n-1), first and max timestamps, and records whose values have
// valueLen bytes, with a correct CRC.
func makeBatch(base int64, n int, firstTs, maxTs int64, valueLen int) []byte {
	var recs []byte
	for i := range n {
		var body []byte
		body = append(body, 0) // attributes
		tsDelta := int64(0)
		if i == n-1 {
			tsDelta = maxTs - firstTs
		}
		body = binary.AppendVarint(body, tsDelta)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, -1) // null key
		body = binary.AppendVarint(body, int64(valueLen))
		body = append(body, bytes.Repeat([]byte{byte(base + int64(i))}, valueLen)...)
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, HeaderSize, HeaderSize+len(recs))
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(base))
	be.PutUint32(b[offLength:], uint32(HeaderSize-lengthPrefix+len(recs)))
	be.PutUint32(b[offLeaderEpoch:], 7)
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], 0)
	be.PutUint32(b[offLastOffsetDelta:], uint32(n-1))
	be.PutUint64(b[offFirstTimestamp:], uint64(firstTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], ^uint64(0))
	be.PutUint16(b[offProducerEpoch:], ^uint16(0))
	be.PutUint32(b[offBaseSequence:], ^uint32(0))
	be.PutUint32(b[offNumRecords:], uint32(n))
	b = append(b, recs...)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// testBatch is one batch of the model of a log.
type testBatch struct {
	base, last int64
	maxTs      int64
	data       []byte
}

// genBatches returns count contiguous batches from offset start with 1-4
// records, values of 0-150 bytes, and timestamps that grow by about 10 per
// batch from ts0 with some going backwards.
func genBatches(rng *rand.Rand, start int64, count int, ts0 int64) []testBatch {
	bs := make([]testBatch, 0, count)
	off := start
	for i := range count {
		n := 1 + rng.IntN(4)
		maxTs := ts0 + int64(i)*10
		if rng.IntN(5) == 0 {
			maxTs -= int64(rng.IntN(50))
		}
		data := makeBatch(off, n, maxTs-5, maxTs, rng.IntN(151))
		bs = append(bs, testBatch{base: off, last: off + int64(n) - 1, maxTs: maxTs, data: data})
		off += int64(n)
	}
	return bs
}

// appendAll appends bs, up to three batches per Append call.
func appendAll(t testing.TB, l *Log, rng *rand.Rand, bs []testBatch) {
	t.Helper()
	for i := 0; i < len(bs); {
		k := min(1+rng.IntN(3), len(bs)-i)
		var buf []byte
		for _, b := range bs[i : i+k] {
			buf = append(buf, b.data...)
		}
		require.NoError(t, l.Append(buf))
		i += k
	}
}

// expectedRead is the model of Log.Read over all batches bs.
func expectedRead(bs []testBatch, offset int64, maxBytes int, maxOffset int64) []byte {
	var out []byte
	first := true
	for _, b := range bs {
		if b.last < offset {
			continue
		}
		if b.last >= maxOffset || (!first && len(out)+len(b.data) > maxBytes) {
			break
		}
		out = append(out, b.data...)
		first = false
	}
	return out
}

// containing returns the index of the batch of bs containing offset, or -1.
func containing(bs []testBatch, offset int64) int {
	for i, b := range bs {
		if b.base <= offset && offset <= b.last {
			return i
		}
	}
	return -1
}

func openLog(t testing.TB, o Options) *Log {
	t.Helper()
	l, err := Open(o)
	require.NoError(t, err)
	return l
}

func memOptions(fsys FS) Options {
	return Options{FS: fsys, Dir: "/data/topic-0", IndexIntervalBytes: 256, SegmentBytes: 4096}
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// wrapFS wraps an FS to count or fail operations on .log files.
type wrapFS struct {
	FS
	logSyncs  atomic.Int64
	readBytes atomic.Int64
	syncDelay time.Duration
	failWrite atomic.Bool // next .log write writes half and fails
	failTrunc atomic.Bool // .log truncates fail
	failSync  atomic.Bool // .log syncs fail
	// onMutate, if set, runs before every mutating operation.
	onMutate func(op string)
	// onLogSync, if set, runs inside every .log Sync before it syncs.
	onLogSync func()
}

var errInjected = errors.New("injected failure")

func (w *wrapFS) mutate(op string) {
	if w.onMutate != nil {
		w.onMutate(op)
	}
}

func (w *wrapFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		w.mutate("open " + filepath.Base(name))
	}
	f, err := w.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &wrapFile{File: f, fs: w, isLog: strings.HasSuffix(name, logSuffix)}, nil
}

func (w *wrapFS) Remove(name string) error {
	w.mutate("remove " + filepath.Base(name))
	return w.FS.Remove(name)
}

func (w *wrapFS) RemoveAll(path string) error {
	w.mutate("removeall")
	return w.FS.RemoveAll(path)
}

func (w *wrapFS) Rename(oldname, newname string) error {
	w.mutate("rename " + filepath.Base(newname))
	return w.FS.Rename(oldname, newname)
}

type wrapFile struct {
	File
	fs    *wrapFS
	isLog bool
}

func (f *wrapFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if f.isLog {
		f.fs.readBytes.Add(int64(n))
	}
	return n, err
}

func (f *wrapFile) Write(p []byte) (int, error) {
	f.fs.mutate("write")
	if f.isLog && f.fs.failWrite.CompareAndSwap(true, false) {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.File.Write(p)
}

func (f *wrapFile) Sync() error {
	f.fs.mutate("sync")
	if f.isLog {
		if f.fs.failSync.Load() {
			return errInjected
		}
		f.fs.logSyncs.Add(1)
		time.Sleep(f.fs.syncDelay)
		if f.fs.onLogSync != nil {
			f.fs.onLogSync()
		}
	}
	return f.File.Sync()
}

func (f *wrapFile) Truncate(size int64) error {
	f.fs.mutate("truncate")
	if f.isLog && f.fs.failTrunc.Load() {
		return errInjected
	}
	return f.File.Truncate(size)
}

// readAll reads the whole log from StartOffset in small pieces.
func readAll(t testing.TB, l *Log) []byte {
	t.Helper()
	var out []byte
	off, next := l.StartOffset(), l.NextOffset()
	for off < next {
		n := len(out)
		var err error
		out, err = l.Read(out, off, 1000, next)
		require.NoError(t, err)
		require.Greater(t, len(out), n, "read at %d returned nothing", off)
		var last int64
		require.NoError(t, Split(out[n:], func(h Header, _ []byte) error { last = h.LastOffset(); return nil }))
		off = last + 1
	}
	return out
}

// modelBytes concatenates the batches of bs from the one containing offset.
func modelBytes(bs []testBatch, offset int64) []byte {
	var out []byte
	for _, b := range bs {
		if b.last >= offset {
			out = append(out, b.data...)
		}
	}
	return out
}

// logFile returns the MemFS node of a file, for tests that corrupt files.
func (m *MemFS) node(t testing.TB, name string) *memNode {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[filepath.Clean(name)]
	require.True(t, ok, "no file %s", name)
	return n
}
