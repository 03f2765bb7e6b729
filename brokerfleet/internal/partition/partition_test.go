package partition

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// spec describes a batch to build.
type spec struct {
	ts       []int64 // one timestamp per record; len is the record count
	pid      int64   // producer id; 0 means -1 (not idempotent)
	epoch    int16
	seq      int32
	gzip     bool
	valueLen int
	txn      bool // transactional
}

func plain(ts ...int64) spec { return spec{ts: ts} }

func idem(pid int64, epoch int16, seq int32, n int) spec {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = 1000 + int64(i)
	}
	return spec{ts: ts, pid: pid, epoch: epoch, seq: seq}
}

// buildBatch encodes a RecordBatch v2 as a producer sends it: base offset 0
// (here a junk value the broker must overwrite), a junk partition leader
// epoch, a valid CRC-32C over the bytes from the attributes on.
func buildBatch(s spec) []byte {
	var recs []byte
	first := s.ts[0]
	maxTs := first
	for i, ts := range s.ts {
		maxTs = max(maxTs, ts)
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, ts-first)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, -1) // null key
		body = binary.AppendVarint(body, int64(s.valueLen))
		body = append(body, bytes.Repeat([]byte{'v'}, s.valueLen)...)
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	var attrs uint16
	if s.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(recs); err != nil {
			panic(err)
		}
		if err := zw.Close(); err != nil {
			panic(err)
		}
		recs = buf.Bytes()
		attrs |= 1
	}
	if s.txn {
		attrs |= 0x10
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if s.pid != 0 {
		pid, epoch, seq = s.pid, s.epoch, s.seq
	}
	be := binary.BigEndian
	b := make([]byte, segment.HeaderSize, segment.HeaderSize+len(recs))
	be.PutUint64(b[0:], 999_999)                                 // base offset: overwritten by the broker
	be.PutUint32(b[8:], uint32(segment.HeaderSize-12+len(recs))) // batch length
	be.PutUint32(b[12:], 77)                                     // partition leader epoch: overwritten
	b[16] = 2                                                    // magic
	be.PutUint16(b[21:], attrs)
	be.PutUint32(b[23:], uint32(len(s.ts)-1))
	be.PutUint64(b[27:], uint64(first))
	be.PutUint64(b[35:], uint64(maxTs))
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(epoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], uint32(len(s.ts)))
	b = append(b, recs...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func testConfig(durability string) topic.Config {
	return topic.Config{
		Retention:         -1,
		RetentionBytes:    -1,
		SegmentBytes:      1 << 20,
		SegmentAge:        time.Hour,
		MaxMessageBytes:   1 << 20,
		MinInsyncReplicas: 1,
		Durability:        durability,
	}
}

const logDir = "/data/t-0"

func openLog(t *testing.T, fs segment.FS) *segment.Log {
	t.Helper()
	l, err := segment.Open(segment.Options{FS: fs, Dir: logDir, IndexIntervalBytes: 1})
	require.NoError(t, err)
	return l
}

// newPartition opens a log on fs and wraps it; the partition is closed at
// the end of the test.
func newPartition(t *testing.T, fs segment.FS, cfg topic.Config, now func() time.Time) (*Partition, *segment.Log) {
	t.Helper()
	l := openLog(t, fs)
	p, err := New(Options{Topic: "t", Index: 0, Log: l, Config: cfg, Now: now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p, l
}

func appendSpec(t *testing.T, p *Partition, s spec) (AppendResult, error) {
	t.Helper()
	b := buildBatch(s)
	h, err := segment.ParseHeader(b)
	require.NoError(t, err)
	return p.Append(b, h)
}

func mustAppend(t *testing.T, p *Partition, s spec) AppendResult {
	t.Helper()
	res, err := appendSpec(t, p, s)
	require.NoError(t, err)
	return res
}

type readBatch struct {
	h    segment.Header
	data []byte
}

// split parses batches, checking every CRC.
func split(t *testing.T, b []byte) []readBatch {
	t.Helper()
	var out []readBatch
	require.NoError(t, segment.Split(b, func(h segment.Header, data []byte) error {
		require.Equal(t, h.CRC, crc32.Checksum(data[21:], castagnoli), "CRC of batch at %d", h.BaseOffset)
		out = append(out, readBatch{h, data})
		return nil
	}))
	return out
}

func readAll(t *testing.T, p *Partition) []readBatch {
	t.Helper()
	b, err := p.Read(nil, p.LogStartOffset(), 1<<30, true)
	require.NoError(t, err)
	return split(t, b)
}

func bases(bs []readBatch) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.h.BaseOffset
	}
	return out
}

func fixedClock(ms int64) func() time.Time {
	return func() time.Time { return time.UnixMilli(ms) }
}

func TestAppendAssignsDenseOffsets(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	require.Equal(t, "t", p.Topic())
	require.EqualValues(t, 0, p.Index())
	require.EqualValues(t, 0, p.LeaderEpoch())
	require.EqualValues(t, 0, p.LogEndOffset())
	require.EqualValues(t, 0, p.HighWatermark())
	require.EqualValues(t, 0, p.Size())

	steps := []struct {
		spec             spec
		wantBase, wantLo int64
	}{
		{plain(10), 0, 0},
		{plain(10, 11, 12), 1, 3},
		{plain(20, 21), 4, 5},
		{plain(30), 6, 6},
		{spec{ts: make([]int64, 100)}, 7, 106},
		{spec{ts: []int64{5, 6}, gzip: true}, 107, 108},
	}
	for _, st := range steps {
		res := mustAppend(t, p, st.spec)
		require.Equal(t, AppendResult{BaseOffset: st.wantBase, LastOffset: st.wantLo, LogAppendTime: -1}, res)
		require.Equal(t, st.wantLo+1, p.LogEndOffset())
		require.Equal(t, st.wantLo+1, p.HighWatermark(), "replicated: the high watermark follows the log end at once")
	}
	got := readAll(t, p)
	require.Equal(t, []int64{0, 1, 4, 6, 7, 107}, bases(got))
	for i, b := range got {
		require.EqualValues(t, 0, b.h.PartitionLeaderEpoch, "batch %d leader epoch", i)
		require.Equal(t, steps[i].wantLo, b.h.LastOffset())
	}
	require.Positive(t, p.Size())
}

func TestConcurrentAppendsAreDense(t *testing.T) {
	for _, durability := range []string{topic.DurabilityReplicated, topic.DurabilityFsync} {
		t.Run(durability, func(t *testing.T) {
			p, _ := newPartition(t, segment.NewMemFS(), testConfig(durability), nil)
			const workers, perWorker = 4, 25
			var mu sync.Mutex
			var results []AppendResult
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWorker {
						n := 1 + (w+i)%3
						b := buildBatch(spec{ts: make([]int64, n)})
						res, err := p.Append(b, mustHeader(b))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						results = append(results, res)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			require.Len(t, results, workers*perWorker)
			slices.SortFunc(results, func(a, b AppendResult) int { return int(a.BaseOffset - b.BaseOffset) })
			next := int64(0)
			for _, r := range results {
				require.Equal(t, next, r.BaseOffset)
				next = r.LastOffset + 1
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(t, p.WaitCommitted(ctx, next))
			require.Equal(t, next, p.LogEndOffset())
			require.Equal(t, next, p.HighWatermark())
			require.Len(t, readAll(t, p), workers*perWorker)
		})
	}
}

func mustHeader(b []byte) segment.Header {
	h, err := segment.ParseHeader(b)
	if err != nil {
		panic(err)
	}
	return h
}

// gateFS blocks fsyncs of .log files while a gate is set, so a test can see
// the state between an append and its fsync.
type gateFS struct {
	*segment.MemFS
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
}

func newGateFS() *gateFS {
	return &gateFS{MemFS: segment.NewMemFS(), entered: make(chan struct{}, 1)}
}

func (g *gateFS) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gateFS) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (segment.File, error) {
	f, err := g.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, fs: g, isLog: strings.HasSuffix(name, ".log")}, nil
}

type gateFile struct {
	segment.File
	fs    *gateFS
	isLog bool
}

func (f *gateFile) Sync() error {
	if f.isLog {
		f.fs.mu.Lock()
		gate := f.fs.gate
		f.fs.mu.Unlock()
		if gate != nil {
			select {
			case f.fs.entered <- struct{}{}:
			default:
			}
			<-gate
		}
	}
	return f.File.Sync()
}

// reopenedEnd returns the log end offset a crash now would leave.
func reopenedEnd(t *testing.T, fs *segment.MemFS) int64 {
	t.Helper()
	l := openLog(t, fs.Crash(0))
	defer l.Close()
	return l.NextOffset()
}

func TestFsyncDurabilityCommitsAfterFlush(t *testing.T) {
	fs := newGateFS()
	p, l := newPartition(t, fs, testConfig(topic.DurabilityFsync), nil)
	t.Cleanup(fs.close) // runs before the partition's Close
	watch := make(chan struct{}, 1)
	defer p.Watch(watch)()

	fs.hold()
	res := mustAppend(t, p, plain(100, 101, 102))
	require.Equal(t, AppendResult{BaseOffset: 0, LastOffset: 2, LogAppendTime: -1}, res)
	select {
	case <-fs.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the flusher did not fsync")
	}

	// The batch is in the log but neither durable nor committed.
	require.EqualValues(t, 3, p.LogEndOffset())
	require.EqualValues(t, 0, p.HighWatermark())
	require.EqualValues(t, 0, l.FlushedOffset())
	require.EqualValues(t, 0, reopenedEnd(t, fs.MemFS))
	b, err := p.Read(nil, 0, 1<<20, true)
	require.NoError(t, err)
	require.Empty(t, b, "uncommitted data must not be readable")
	_, _, ok, err := p.OffsetForTimestamp(0)
	require.NoError(t, err)
	require.False(t, ok, "uncommitted data must not be found by timestamp")
	_, err = p.DeleteRecords(1)
	require.ErrorIs(t, err, segment.ErrOffsetOutOfRange)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	require.ErrorIs(t, p.WaitCommitted(ctx, 3), context.DeadlineExceeded)
	cancel()
	select {
	case <-watch:
		t.Fatal("watcher notified before the high watermark moved")
	default:
	}

	// A second append while the fsync runs is committed by a later one.
	res = mustAppend(t, p, plain(200, 201))
	require.Equal(t, AppendResult{BaseOffset: 3, LastOffset: 4, LogAppendTime: -1}, res)
	require.EqualValues(t, 0, p.HighWatermark())

	fs.close()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.WaitCommitted(ctx, 5))
	require.EqualValues(t, 5, p.HighWatermark())
	require.GreaterOrEqual(t, l.FlushedOffset(), int64(5))
	require.EqualValues(t, 5, reopenedEnd(t, fs.MemFS), "acknowledged data lost by a crash")
	select {
	case <-watch:
	case <-time.After(5 * time.Second):
		t.Fatal("watcher not notified when the high watermark moved")
	}
	require.Equal(t, []int64{0, 3}, bases(readAll(t, p)))
}

// Without a gate, each acknowledged fsync append survives a crash.
func TestFsyncDurabilitySurvivesCrash(t *testing.T) {
	fs := segment.NewMemFS()
	p, _ := newPartition(t, fs, testConfig(topic.DurabilityFsync), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 5 {
		res := mustAppend(t, p, plain(int64(i), int64(i)))
		require.NoError(t, p.WaitCommitted(ctx, res.LastOffset+1))
		require.GreaterOrEqual(t, p.HighWatermark(), res.LastOffset+1)
		require.GreaterOrEqual(t, reopenedEnd(t, fs), res.LastOffset+1)
	}
}

// Switching a topic from fsync to replicated commits what is pending.
func TestSetConfig(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityFsync), nil)
	require.Equal(t, topic.DurabilityFsync, p.Config().Durability)

	cfg := testConfig(topic.DurabilityReplicated)
	cfg.LogAppendTime = true
	p.SetConfig(cfg)
	require.Equal(t, cfg, p.Config())
	res := mustAppend(t, p, plain(1))
	require.NotEqualValues(t, -1, res.LogAppendTime)
	require.EqualValues(t, 1, p.HighWatermark())
}

func TestLogAppendTime(t *testing.T) {
	const now = int64(1_700_000_000_123)
	tests := []struct {
		name          string
		logAppendTime bool
		spec          spec
		wantAppend    int64
		wantMax       int64
	}{
		{name: "CreateTime keeps producer timestamps", spec: plain(10, 30, 20), wantAppend: -1, wantMax: 30},
		{name: "LogAppendTime stamps the batch", logAppendTime: true, spec: plain(10, 30, 20), wantAppend: now, wantMax: now},
		{name: "LogAppendTime on a compressed batch", logAppendTime: true, spec: spec{ts: []int64{1, 2}, gzip: true}, wantAppend: now, wantMax: now},
		{name: "LogAppendTime on an idempotent batch", logAppendTime: true, spec: idem(5, 0, 0, 3), wantAppend: now, wantMax: now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(topic.DurabilityReplicated)
			cfg.LogAppendTime = tt.logAppendTime
			p, _ := newPartition(t, segment.NewMemFS(), cfg, fixedClock(now))
			res := mustAppend(t, p, tt.spec)
			require.Equal(t, tt.wantAppend, res.LogAppendTime)
			got := readAll(t, p)
			require.Len(t, got, 1)
			h := got[0].h
			require.Equal(t, tt.logAppendTime, h.LogAppendTime())
			require.Equal(t, tt.wantMax, h.MaxTimestamp)
			require.Equal(t, tt.spec.ts[0], h.FirstTimestamp, "first timestamp is left alone")
			require.Equal(t, tt.spec.gzip, h.Compression() == 1)
			// split checked the CRC, which SetLogAppendTime must recompute.

			off, ts, ok, err := p.OffsetForTimestamp(0)
			require.NoError(t, err)
			require.True(t, ok)
			require.EqualValues(t, 0, off)
			if tt.logAppendTime {
				require.Equal(t, now, ts, "every record carries the append time")
			} else {
				require.Equal(t, tt.spec.ts[0], ts)
			}
		})
	}
}

func TestIdempotentAppend(t *testing.T) {
	type step struct {
		name     string
		spec     spec
		wantBase int64
		wantLast int64
		wantDup  bool
		wantErr  error
	}
	steps := []step{
		{name: "first batch", spec: idem(7, 0, 0, 3), wantBase: 0, wantLast: 2},
		{name: "non-idempotent batch", spec: plain(1), wantBase: 3, wantLast: 3},
		{name: "other producer", spec: idem(8, 2, 100, 1), wantBase: 4, wantLast: 4},
		{name: "second batch", spec: idem(7, 0, 3, 2), wantBase: 5, wantLast: 6},
		{name: "duplicate of first", spec: idem(7, 0, 0, 3), wantBase: 0, wantLast: 2, wantDup: true},
		{name: "duplicate of second", spec: idem(7, 0, 3, 2), wantBase: 5, wantLast: 6, wantDup: true},
		{name: "duplicate of other producer", spec: idem(8, 2, 100, 1), wantBase: 4, wantLast: 4, wantDup: true},
		{name: "gap", spec: idem(7, 0, 6, 1), wantErr: ErrOutOfOrderSequence},
		{name: "in sequence", spec: idem(7, 0, 5, 1), wantBase: 7, wantLast: 7},
		{name: "new epoch with a non-zero sequence", spec: idem(7, 1, 6, 1), wantErr: ErrOutOfOrderSequence},
		{name: "new epoch", spec: idem(7, 1, 0, 2), wantBase: 8, wantLast: 9},
		{name: "fenced epoch", spec: idem(7, 0, 6, 1), wantErr: ErrInvalidProducerEpoch},
		{name: "duplicate in the new epoch", spec: idem(7, 1, 0, 2), wantBase: 8, wantLast: 9, wantDup: true},
		{name: "non-idempotent batches are never duplicates", spec: plain(1), wantBase: 10, wantLast: 10},
		{name: "non-idempotent again", spec: plain(1), wantBase: 11, wantLast: 11},
	}
	fs := segment.NewMemFS()
	p, _ := newPartition(t, fs, testConfig(topic.DurabilityReplicated), nil)
	end := int64(0)
	for _, st := range steps {
		res, err := appendSpec(t, p, st.spec)
		if st.wantErr != nil {
			require.ErrorIs(t, err, st.wantErr, st.name)
			require.Equal(t, end, p.LogEndOffset(), "%s: nothing written", st.name)
			continue
		}
		require.NoError(t, err, st.name)
		require.Equal(t, AppendResult{BaseOffset: st.wantBase, LastOffset: st.wantLast, LogAppendTime: -1, Duplicate: st.wantDup}, res, st.name)
		if !st.wantDup {
			end = st.wantLast + 1
		}
		require.Equal(t, end, p.LogEndOffset(), "%s: log end", st.name)
	}
	require.Equal(t, []int64{0, 3, 4, 5, 7, 8, 10, 11}, bases(readAll(t, p)))
}

// New rebuilds the producer window from the log, including the append
// times of LogAppendTime batches.
func TestNewRebuildsProducerState(t *testing.T) {
	fs := segment.NewMemFS()
	cfg := testConfig(topic.DurabilityReplicated)
	cfg.LogAppendTime = true
	p, _ := newPartition(t, fs, cfg, fixedClock(5000))
	for i := range 7 {
		mustAppend(t, p, idem(3, 1, int32(i*2), 2))
	}
	mustAppend(t, p, plain(1))
	_, err := p.DeleteRecords(3)
	require.NoError(t, err)
	require.NoError(t, p.Close())

	p2, _ := newPartition(t, fs, cfg, fixedClock(9000))
	require.EqualValues(t, 15, p2.LogEndOffset())
	require.EqualValues(t, 15, p2.HighWatermark())
	require.EqualValues(t, 3, p2.LogStartOffset())

	tests := []struct {
		name    string
		spec    spec
		want    AppendResult
		wantErr error
	}{
		{name: "duplicate of the newest batch", spec: idem(3, 1, 12, 2),
			want: AppendResult{BaseOffset: 12, LastOffset: 13, LogAppendTime: 5000, LogStart: 3, Duplicate: true}},
		{name: "duplicate of the oldest remembered batch", spec: idem(3, 1, 4, 2),
			want: AppendResult{BaseOffset: 4, LastOffset: 5, LogAppendTime: 5000, LogStart: 3, Duplicate: true}},
		{name: "batch older than the window", spec: idem(3, 1, 2, 2), wantErr: ErrOutOfOrderSequence},
		{name: "fenced epoch", spec: idem(3, 0, 14, 1), wantErr: ErrInvalidProducerEpoch},
		{name: "next in sequence", spec: idem(3, 1, 14, 1),
			want: AppendResult{BaseOffset: 15, LastOffset: 15, LogAppendTime: 9000, LogStart: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := appendSpec(t, p2, tt.spec)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, res)
		})
	}
}

func TestRead(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	mustAppend(t, p, spec{ts: []int64{1}, valueLen: 100})      // offset 0
	mustAppend(t, p, spec{ts: []int64{2, 3, 4}, valueLen: 10}) // offsets 1-3
	mustAppend(t, p, spec{ts: []int64{5, 6}, valueLen: 10})    // offsets 4-5
	all := readAll(t, p)
	require.Len(t, all, 3)
	size0, size1 := len(all[0].data), len(all[1].data)

	prefix := []byte("prefix")
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		minOne    bool
		wantBases []int64
		wantErr   error
	}{
		{name: "everything", offset: 0, maxBytes: 1 << 20, wantBases: []int64{0, 1, 4}},
		{name: "from the middle of a batch", offset: 2, maxBytes: 1 << 20, wantBases: []int64{1, 4}},
		{name: "last offset", offset: 5, maxBytes: 1 << 20, wantBases: []int64{4}},
		{name: "exactly one batch", offset: 0, maxBytes: size0, wantBases: []int64{0}},
		{name: "two batches fit exactly", offset: 0, maxBytes: size0 + size1, wantBases: []int64{0, 1}},
		{name: "one byte short of two", offset: 0, maxBytes: size0 + size1 - 1, wantBases: []int64{0}},
		{name: "first batch too big", offset: 0, maxBytes: size0 - 1, wantBases: nil},
		{name: "first batch too big, minOne", offset: 0, maxBytes: size0 - 1, minOne: true, wantBases: []int64{0}},
		{name: "zero bytes, minOne", offset: 1, maxBytes: 0, minOne: true, wantBases: []int64{1}},
		{name: "zero bytes", offset: 1, maxBytes: 0, wantBases: nil},
		{name: "log end", offset: 6, maxBytes: 1 << 20, wantBases: nil},
		{name: "past log end", offset: 7, maxBytes: 1 << 20, wantErr: segment.ErrOffsetOutOfRange},
		{name: "negative", offset: -1, maxBytes: 1 << 20, wantErr: segment.ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := slices.Clone(prefix)
			out, err := p.Read(dst, tt.offset, tt.maxBytes, tt.minOne)
			require.Equal(t, prefix, out[:len(prefix)], "dst is kept")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, prefix, out)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantBases, nilIfEmpty(bases(split(t, out[len(prefix):]))))
		})
	}
}

func nilIfEmpty(s []int64) []int64 {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestWaitCommitted(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	mustAppend(t, p, plain(1, 2))

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		off     int64
		wantErr error
	}{
		{name: "below the high watermark", ctx: canceled, off: 1},
		{name: "at the high watermark", ctx: canceled, off: 2},
		{name: "zero", ctx: canceled, off: 0},
		{name: "above, canceled", ctx: canceled, off: 3, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.WaitCommitted(tt.ctx, tt.off)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}

	t.Run("woken by appends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.WaitCommitted(ctx, 5) }()
		mustAppend(t, p, plain(1)) // hwm 3: not enough
		select {
		case err := <-done:
			t.Fatalf("returned early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		mustAppend(t, p, plain(1, 2)) // hwm 5
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("WaitCommitted not woken")
		}
	})
}

func TestWatch(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	a, b := make(chan struct{}, 1), make(chan struct{}, 1)
	cancelA := p.Watch(a)
	cancelB := p.Watch(b)
	defer cancelB()

	received := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	mustAppend(t, p, plain(1))
	require.True(t, received(a), "append notifies")
	require.True(t, received(b), "append notifies every watcher")

	// A full channel does not block the append.
	mustAppend(t, p, plain(1))
	mustAppend(t, p, plain(1))
	require.True(t, received(a))
	require.False(t, received(a), "one pending notification at most")
	require.True(t, received(b))

	_, err := p.DeleteRecords(1)
	require.NoError(t, err)
	require.True(t, received(a), "DeleteRecords notifies")
	require.True(t, received(b))

	// A duplicate or failed append writes nothing and does not notify.
	mustAppend(t, p, idem(1, 0, 0, 1))
	require.True(t, received(a))
	require.True(t, received(b))
	res := mustAppend(t, p, idem(1, 0, 0, 1))
	require.True(t, res.Duplicate)
	require.False(t, received(a))

	cancelA()
	mustAppend(t, p, plain(1))
	require.False(t, received(a), "cancelled watcher not notified")
	require.True(t, received(b))
	cancelA() // cancelling twice is harmless
}

func TestDeleteRecords(t *testing.T) {
	fs := segment.NewMemFS()
	p, _ := newPartition(t, fs, testConfig(topic.DurabilityReplicated), nil)
	mustAppend(t, p, plain(1))       // 0
	mustAppend(t, p, plain(1, 2, 3)) // 1-3
	mustAppend(t, p, plain(1, 2))    // 4-5

	steps := []struct {
		name      string
		off       int64
		wantStart int64
		wantErr   error
		readBases []int64 // batches read from the new log start
	}{
		{name: "above the high watermark", off: 7, wantErr: segment.ErrOffsetOutOfRange},
		{name: "negative", off: -2, wantErr: segment.ErrOffsetOutOfRange},
		{name: "to a batch boundary", off: 1, wantStart: 1, readBases: []int64{1, 4}},
		{name: "into a batch", off: 2, wantStart: 2, readBases: []int64{1, 4}},
		{name: "backwards is a no-op", off: 1, wantStart: 2, readBases: []int64{1, 4}},
		{name: "same offset", off: 2, wantStart: 2, readBases: []int64{1, 4}},
		{name: "to the next batch", off: 4, wantStart: 4, readBases: []int64{4}},
		{name: "-1 means the high watermark", off: -1, wantStart: 6, readBases: nil},
		{name: "at the log end again", off: 6, wantStart: 6, readBases: nil},
	}
	for _, st := range steps {
		got, err := p.DeleteRecords(st.off)
		if st.wantErr != nil {
			require.ErrorIs(t, err, st.wantErr, st.name)
			continue
		}
		require.NoError(t, err, st.name)
		require.Equal(t, st.wantStart, got, st.name)
		require.Equal(t, st.wantStart, p.LogStartOffset(), st.name)
		b, err := p.Read(nil, st.wantStart, 1<<20, true)
		require.NoError(t, err, st.name)
		require.Equal(t, st.readBases, nilIfEmpty(bases(split(t, b))), st.name)
		if st.wantStart > 0 {
			_, err = p.Read(nil, st.wantStart-1, 1<<20, true)
			require.ErrorIs(t, err, segment.ErrOffsetOutOfRange, "%s: below the log start", st.name)
		}
	}
	res := mustAppend(t, p, plain(9))
	require.Equal(t, AppendResult{BaseOffset: 6, LastOffset: 6, LogAppendTime: -1, LogStart: 6}, res)
}

// Timestamps of the test log for OffsetForTimestamp:
//
//	offsets 0-2  [100 105 110]   uncompressed
//	offsets 3-4  [200 150]       gzip, timestamps not monotonic
//	offset  5    [300]           uncompressed
//	offsets 6-8  [400 350 390]   gzip
func timestampLog(t *testing.T) *Partition {
	t.Helper()
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	mustAppend(t, p, plain(100, 105, 110))
	mustAppend(t, p, spec{ts: []int64{200, 150}, gzip: true})
	mustAppend(t, p, plain(300))
	mustAppend(t, p, spec{ts: []int64{400, 350, 390}, gzip: true, valueLen: 50})
	return p
}

func TestOffsetForTimestamp(t *testing.T) {
	p := timestampLog(t)
	tests := []struct {
		ts      int64
		wantOff int64
		wantTS  int64
		wantOK  bool
	}{
		{ts: -1, wantOff: 0, wantTS: 100, wantOK: true},
		{ts: 0, wantOff: 0, wantTS: 100, wantOK: true},
		{ts: 100, wantOff: 0, wantTS: 100, wantOK: true},
		{ts: 101, wantOff: 1, wantTS: 105, wantOK: true},
		{ts: 106, wantOff: 2, wantTS: 110, wantOK: true},
		{ts: 110, wantOff: 2, wantTS: 110, wantOK: true},
		{ts: 111, wantOff: 3, wantTS: 200, wantOK: true},
		{ts: 150, wantOff: 3, wantTS: 200, wantOK: true},
		{ts: 200, wantOff: 3, wantTS: 200, wantOK: true},
		{ts: 201, wantOff: 5, wantTS: 300, wantOK: true},
		{ts: 300, wantOff: 5, wantTS: 300, wantOK: true},
		{ts: 301, wantOff: 6, wantTS: 400, wantOK: true},
		{ts: 360, wantOff: 6, wantTS: 400, wantOK: true},
		{ts: 400, wantOff: 6, wantTS: 400, wantOK: true},
		{ts: 401, wantOK: false},
	}
	for _, tt := range tests {
		off, ts, ok, err := p.OffsetForTimestamp(tt.ts)
		require.NoError(t, err, "ts %d", tt.ts)
		require.Equal(t, tt.wantOK, ok, "ts %d", tt.ts)
		if tt.wantOK {
			require.Equal(t, tt.wantOff, off, "offset for ts %d", tt.ts)
			require.Equal(t, tt.wantTS, ts, "timestamp for ts %d", tt.ts)
		}
	}

	off, ts, ok, err := p.MaxTimestamp()
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 6, off)
	require.EqualValues(t, 400, ts)
}

func TestOffsetForTimestampEmpty(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	_, _, ok, err := p.OffsetForTimestamp(0)
	require.NoError(t, err)
	require.False(t, ok)
	_, _, ok, err = p.MaxTimestamp()
	require.NoError(t, err)
	require.False(t, ok)
}

// After DeleteRecords, records below the log start are not returned.
func TestOffsetForTimestampRespectsLogStart(t *testing.T) {
	p := timestampLog(t)
	_, err := p.DeleteRecords(1)
	require.NoError(t, err)
	tests := []struct {
		ts              int64
		wantOff, wantTS int64
	}{
		{ts: 0, wantOff: 1, wantTS: 105},
		{ts: 100, wantOff: 1, wantTS: 105},
		{ts: 111, wantOff: 3, wantTS: 200},
	}
	for _, tt := range tests {
		off, ts, ok, err := p.OffsetForTimestamp(tt.ts)
		require.NoError(t, err)
		require.True(t, ok, "ts %d", tt.ts)
		require.Equal(t, tt.wantOff, off, "ts %d", tt.ts)
		require.Equal(t, tt.wantTS, ts, "ts %d", tt.ts)
	}
}

// The batch found by the segment's time index can have all its records at
// or after the log start older than ts; the search must go on to the next
// batch.
func TestOffsetForTimestampLogStartInsideBatch(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	mustAppend(t, p, plain(1000, 10)) // offsets 0-1: max timestamp 1000
	mustAppend(t, p, plain(1000))     // offset 2
	_, err := p.DeleteRecords(1)
	require.NoError(t, err)

	off, ts, ok, err := p.OffsetForTimestamp(500)
	require.NoError(t, err)
	require.True(t, ok, "offset 2 (timestamp 1000) is committed, above the log start, and at or after 500")
	require.EqualValues(t, 2, off)
	require.EqualValues(t, 1000, ts)
}

func TestOffsetForTimestampCorruptCompressedBatch(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	b := buildBatch(plain(100, 200))
	// Claim gzip for records that are not compressed; fix the CRC so only the
	// body is wrong.
	binary.BigEndian.PutUint16(b[21:], 1)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	_, err := p.Append(b, mustHeader(b))
	require.NoError(t, err)
	_, _, _, err = p.OffsetForTimestamp(150)
	require.ErrorIs(t, err, records.ErrMalformed)
	require.Contains(t, err.Error(), "batch at 0")
}

func TestOffsetForTimestampBomb(t *testing.T) {
	// A stored 1 MiB zstd batch that inflates to 32 GiB (RLE blocks after
	// a record claiming a 1 GiB body): the lookup stops at the bound of
	// max.message.bytes and allocates little.
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), nil)
	rec := append(binary.AppendVarint(nil, 1<<30), 0, 0)
	rec = binary.AppendVarint(rec, 0) // at 100 ms, before the 150 asked for: the lookup reads on
	z := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	z = append(z, 0x00, 7<<3)
	block := func(typ, size uint32, last bool) {
		h := size<<3 | typ<<1
		if last {
			h |= 1
		}
		z = append(z, byte(h), byte(h>>8), byte(h>>16))
	}
	block(0, uint32(len(rec)), false)
	z = append(z, rec...)
	for len(z) < 1<<20 {
		block(1, 128<<10, len(z)+8 >= 1<<20)
		z = append(z, 0)
	}
	b := buildBatch(plain(100, 200))
	b = append(b[:segment.HeaderSize:segment.HeaderSize], z...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint16(b[21:], 4)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	_, err := p.Append(b, mustHeader(b))
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, _, err = p.OffsetForTimestamp(150)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, records.ErrTooLarge)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "a copy of the batch and codec state")
}

func TestEachRecordTimestampMalformed(t *testing.T) {
	good := buildBatch(plain(100, 200))
	h := mustHeader(good)
	tests := []struct {
		name string
		body []byte
	}{
		{name: "no records", body: nil},
		{name: "bad length varint", body: []byte{0x80}},
		{name: "length past the end", body: binary.AppendVarint(nil, 50)},
		{name: "negative length", body: binary.AppendVarint(nil, -3)},
		{name: "empty record", body: binary.AppendVarint(nil, 0)},
		{name: "record without timestamp delta", body: append(binary.AppendVarint(nil, 1), 0)},
		{name: "record without offset delta", body: append(binary.AppendVarint(nil, 2), 0, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append(slices.Clone(good[:segment.HeaderSize]), tt.body...)
			bh := h
			bh.Length = int32(len(b) - 12)
			err := eachRecordTimestamp(b, bh, 1<<20, func(off, ts int64) bool { return true })
			require.ErrorIs(t, err, records.ErrMalformed)
		})
	}
	t.Run("stops when fn returns false", func(t *testing.T) {
		var seen []int64
		require.NoError(t, eachRecordTimestamp(good, h, 1<<20, func(off, ts int64) bool {
			seen = append(seen, ts)
			return false
		}))
		require.Equal(t, []int64{100}, seen)
	})
}

func TestMaintainAppliesRetention(t *testing.T) {
	cfg := testConfig(topic.DurabilityReplicated)
	cfg.SegmentBytes = topic.MinSegmentBytes
	p, l := newPartition(t, segment.NewMemFS(), cfg, nil)
	for range 20 {
		mustAppend(t, p, spec{ts: []int64{time.Now().UnixMilli()}, valueLen: 200})
	}
	require.Greater(t, len(l.Segments()), 3, "segment.bytes from the config rolls segments")
	before := p.Size()

	cfg.RetentionBytes = 0
	p.SetConfig(cfg)
	require.NoError(t, p.Maintain())
	require.Less(t, p.Size(), before)
	require.Positive(t, p.LogStartOffset())
	require.EqualValues(t, l.StartOffset(), p.LogStartOffset())
	require.EqualValues(t, 20, p.LogEndOffset())
}

// TestRetentionKeepsWhatIsNotCommitted: as in Kafka, retention deletes
// only segments below the high watermark, so a follower that is behind
// still finds what it has not fetched, and an uncommitted tail is never
// dropped by size or time.
func TestRetentionKeepsWhatIsNotCommitted(t *testing.T) {
	cfg := testConfig(topic.DurabilityReplicated)
	cfg.SegmentBytes = topic.MinSegmentBytes
	p, l := newPartition(t, segment.NewMemFS(), cfg, time.Now)
	p.SetReplication(1, true, []int32{1, 2}, []int32{1, 2})
	for range 20 {
		mustAppend(t, p, spec{ts: []int64{time.Now().Add(-time.Hour).UnixMilli()}, valueLen: 200})
	}
	require.Greater(t, len(l.Segments()), 3)
	require.Zero(t, p.HighWatermark(), "the follower has fetched nothing")

	cfg.RetentionBytes, cfg.Retention = 0, time.Minute // everything is over both limits
	p.SetConfig(cfg)
	require.NoError(t, p.Maintain())
	require.Zero(t, p.LocalLogStartOffset(), "retention deleted what the follower has not fetched")

	p.ReplicaFetched(2, 10, 0)
	require.EqualValues(t, 10, p.HighWatermark())
	require.NoError(t, p.Maintain())
	start := p.LocalLogStartOffset()
	require.Positive(t, start)
	require.LessOrEqual(t, start, int64(10), "deleted past the high watermark")
	require.Greater(t, l.Segments()[0].NextOffset, int64(10), "a segment wholly below the high watermark was kept")

	p.ReplicaFetched(2, 20, 0)
	require.NoError(t, p.Maintain())
	require.EqualValues(t, 20, p.LocalLogStartOffset(), "committed and expired: the log empties")
}

func TestClose(t *testing.T) {
	for _, durability := range []string{topic.DurabilityReplicated, topic.DurabilityFsync} {
		t.Run(durability, func(t *testing.T) {
			p, _ := newPartition(t, segment.NewMemFS(), testConfig(durability), nil)
			mustAppend(t, p, plain(1))
			require.NoError(t, p.Close())
			_, err := appendSpec(t, p, plain(2))
			require.ErrorIs(t, err, ErrClosed)
			require.NoError(t, p.Close(), "Close is idempotent")
			_, err = p.Read(nil, 0, 1<<20, true)
			require.ErrorIs(t, err, segment.ErrClosed)
		})
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name       string
		closeFirst bool
	}{
		{name: "open partition"},
		{name: "closed partition", closeFirst: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := segment.NewMemFS()
			p, _ := newPartition(t, fs, testConfig(topic.DurabilityFsync), nil)
			mustAppend(t, p, plain(1))
			if tt.closeFirst {
				require.NoError(t, p.Close())
			}
			require.NoError(t, p.Remove())
			_, err := fs.ReadDir(logDir)
			require.ErrorIs(t, err, os.ErrNotExist)
			_, err = appendSpec(t, p, plain(2))
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}
