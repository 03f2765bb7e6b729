package cleaner

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/segment"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type rec struct {
	key, value string
	tomb       bool
}

// batch encodes records as a client would (no compression), with an
// idempotent producer's fields when pid >= 0.
func batch(ts int64, pid int64, seq int32, rs ...rec) []byte {
	var body []byte
	for i, r := range rs {
		kr := kmsg.Record{OffsetDelta: int32(i), Key: []byte(r.key), Value: []byte(r.value)}
		if r.tomb {
			kr.Value = nil
		}
		if r.key == "" {
			kr.Key = nil
		}
		n := len(kr.AppendTo(nil))
		kr.Length = int32(n - varintLen(int64(n)))
		body = kr.AppendTo(body)
	}
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(len(rs) - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(rs)), Records: body}
	if pid >= 0 {
		b.ProducerEpoch, b.FirstSequence = 0, seq
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

func varintLen(n int64) int { return len(binary.AppendVarint(nil, n)) }

type harness struct {
	t     *testing.T
	fs    segment.FS
	dir   string
	cfg   topic.Config
	clock *clock.Fake
	p     *partition.Partition
	c     *Cleaner
}

func compactConfig() topic.Config {
	d, _ := topic.NewDefaults(nil)
	cfg, err := d.Resolve(map[string]string{topic.CleanupPolicy: "compact", topic.SegmentBytes: "4096"})
	if err != nil {
		panic(err)
	}
	return cfg
}

func newHarness(t *testing.T, fsys segment.FS, cfg topic.Config) *harness {
	h := &harness{t: t, fs: fsys, dir: "p", cfg: cfg, clock: clock.NewFake(time.UnixMilli(1_700_000_000_000))}
	h.open()
	h.c = New(Options{Partitions: func() []*partition.Partition { return []*partition.Partition{h.p} }, Clock: h.clock})
	return h
}

func (h *harness) open() {
	l, err := segment.Open(segment.Options{FS: h.fs, Dir: h.dir, SegmentBytes: h.cfg.SegmentBytes, IndexIntervalBytes: 256, Now: h.clock.Now})
	require.NoError(h.t, err)
	p, err := partition.New(partition.Options{Topic: "t", Index: 0, Log: l, Config: h.cfg, Now: h.clock.Now})
	require.NoError(h.t, err)
	h.p = p
}

func (h *harness) reopen() {
	require.NoError(h.t, h.p.Close())
	h.open()
}

func (h *harness) append(b []byte) partition.AppendResult {
	hd, err := segment.ParseHeader(b)
	require.NoError(h.t, err)
	res, err := h.p.Append(b, hd)
	require.NoError(h.t, err)
	return res
}

// got is a record as read back.
type got struct {
	offset     int64
	key, value string
	tomb       bool
}

// readAll returns every record of the partition, in order, checking that
// offsets increase.
func (h *harness) readAll() []got {
	var out []got
	off := h.p.LogStartOffset()
	for off < h.p.HighWatermark() {
		b, err := h.p.Read(nil, off, 1<<20, true)
		require.NoError(h.t, err)
		if len(b) == 0 {
			break
		}
		require.NoError(h.t, segment.Split(b, func(hd segment.Header, batch []byte) error {
			require.True(h.t, segment.CheckCRC(batch), "crc of batch at %d", hd.BaseOffset)
			body, err := records.Body(batch, hd, 1<<20)
			require.NoError(h.t, err)
			require.NoError(h.t, records.Entries(body, hd, func(r records.Entry) error {
				if len(out) > 0 {
					require.Greater(h.t, r.Offset, out[len(out)-1].offset)
				}
				g := got{offset: r.Offset, key: string(r.Key), tomb: r.Null}
				if !r.Null {
					g.value = string(r.Raw) // compared through latest()
				}
				out = append(out, g)
				return nil
			}))
			off = hd.LastOffset() + 1
			return nil
		}))
	}
	return out
}

// produceVersions writes keys×versions records in batches of 1-5, in a
// shuffled key order per version, and returns the offset of every key's
// latest record.
func (h *harness) produceVersions(keys, versions int, rng *rand.Rand) map[string]int64 {
	latest := map[string]int64{}
	for v := range versions {
		order := rng.Perm(keys)
		for i := 0; i < len(order); {
			n := min(1+rng.IntN(5), len(order)-i)
			var rs []rec
			for _, k := range order[i : i+n] {
				rs = append(rs, rec{key: fmt.Sprintf("k%03d", k), value: fmt.Sprintf("v%03d-%02d", k, v)})
			}
			res := h.append(batch(h.clock.Now().UnixMilli(), -1, 0, rs...))
			for j, r := range rs {
				latest[r.key] = res.BaseOffset + int64(j)
			}
			i += n
		}
		h.clock.Advance(time.Millisecond)
	}
	require.NoError(h.t, h.p.Roll())
	return latest
}

func keyOffsets(rs []got) map[string][]int64 {
	out := map[string][]int64{}
	for _, r := range rs {
		out[r.key] = append(out[r.key], r.offset)
	}
	return out
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	mem := segment.NewMemFS()
	h := newHarness(t, mem, compactConfig())
	latest := h.produceVersions(200, 50, rand.New(rand.NewPCG(1, 2)))
	before := len(h.readAll())
	require.Equal(t, 200*50, before)
	segsBefore := len(h.p.ClosedSegments())

	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	check := func(when string) {
		rs := h.readAll()
		require.Len(t, rs, 200, when)
		for k, offs := range keyOffsets(rs) {
			require.Equal(t, []int64{latest[k]}, offs, "%s: key %s", when, k)
		}
	}
	check("after the pass")
	require.Equal(t, h.p.ClosedSegments()[len(h.p.ClosedSegments())-1].NextOffset, h.p.CleanedOffset())
	st := h.c.Stats()
	require.Positive(t, st.ReadBytes)
	require.Positive(t, st.WrittenBytes)
	require.Less(t, st.WrittenBytes, st.ReadBytes)

	// A second pass changes nothing; the log survives a restart and a crash.
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	check("after a second pass")
	require.Less(t, len(h.p.ClosedSegments()), segsBefore/10, "the small cleaned segments were merged")
	h.reopen()
	check("reopened")
	h.fs = mem.Crash(0)
	h.open()
	check("after a crash")
}

// New versions after a pass: the next pass maps only the new (dirty) part
// and removes what it supersedes in the clean part.
func TestCompactIncremental(t *testing.T) {
	h := newHarness(t, segment.NewMemFS(), compactConfig())
	rng := rand.New(rand.NewPCG(3, 4))
	h.produceVersions(100, 5, rng)
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	latest := h.produceVersions(50, 3, rng) // keys k000-k049 again
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	rs := h.readAll()
	require.Len(t, rs, 100)
	for k, offs := range keyOffsets(rs) {
		require.Len(t, offs, 1, k)
		if off, ok := latest[k]; ok {
			require.Equal(t, off, offs[0], k)
		}
	}
}

func TestTombstonesAfterDeleteRetention(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetention = time.Hour
	h := newHarness(t, segment.NewMemFS(), cfg)
	for k := range 20 {
		h.append(batch(h.clock.Now().UnixMilli(), -1, 0, rec{key: fmt.Sprintf("k%d", k), value: "v"}))
	}
	for k := range 10 {
		h.append(batch(h.clock.Now().UnixMilli(), -1, 0, rec{key: fmt.Sprintf("k%d", k), tomb: true}))
	}
	h.append(batch(h.clock.Now().UnixMilli(), -1, 0, rec{key: "other", value: "x"}))
	require.NoError(t, h.p.Roll())
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	rs := h.readAll()
	tombs := 0
	for _, r := range rs {
		if r.tomb {
			tombs++
		}
	}
	require.Equal(t, 10, tombs, "tombstones stay until delete.retention.ms passed")
	require.Len(t, rs, 21, "their keys' values are gone")

	h.clock.Advance(59 * time.Minute)
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	require.Len(t, h.readAll(), 21, "not yet")
	h.clock.Advance(2 * time.Minute)
	// The cleaner knows the horizon is due without new dirty data.
	require.Equal(t, h.p, h.c.pick())
	h.c.parts[h.p].busy = false
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	rs = h.readAll()
	require.Len(t, rs, 11)
	for _, r := range rs {
		require.False(t, r.tomb)
	}
	h.reopen()
	require.Len(t, h.readAll(), 11)
}

// The batches an idempotent producer and the leader-epoch history need
// stay, empty, after every record in them was superseded.
func TestEmptyBatchesKeptForProducersAndEpochs(t *testing.T) {
	h := newHarness(t, segment.NewMemFS(), compactConfig())
	h.p.SetLeaderEpoch(1)
	h.append(batch(1, 9, 0, rec{key: "a", value: "1"}, rec{key: "b", value: "1"}))
	h.append(batch(1, 9, 2, rec{key: "a", value: "2"})) // producer 9's last batch
	h.p.SetLeaderEpoch(2)
	h.append(batch(1, -1, 0, rec{key: "b", value: "2"})) // epoch 2 starts here
	h.append(batch(1, -1, 0, rec{key: "a", value: "3"}, rec{key: "b", value: "3"}))
	h.p.SetLeaderEpoch(3)
	h.append(batch(1, -1, 0, rec{key: "c", value: "1"}))
	require.NoError(t, h.p.Roll())
	e2, end2 := h.p.EndOffsetForEpoch(1)
	require.NoError(t, h.c.CleanNow(context.Background(), h.p))
	rs := h.readAll()
	require.Equal(t, map[string][]int64{"a": {4}, "b": {5}, "c": {6}}, keyOffsets(rs))

	h.reopen()
	h.p.SetLeaderEpoch(3)
	ge, gend := h.p.EndOffsetForEpoch(1)
	require.Equal(t, []any{e2, end2}, []any{ge, gend}, "epoch 1 still ends where epoch 2's first batch was")
	// Producer 9 continues at sequence 3; a gap is refused.
	b := batch(1, 9, 5, rec{key: "d", value: "1"})
	hd, _ := segment.ParseHeader(b)
	_, err := h.p.Append(b, hd)
	require.ErrorIs(t, err, partition.ErrOutOfOrderSequence)
	h.append(batch(1, 9, 3, rec{key: "d", value: "1"}))
}

// A map too small for the dirty part cleans it over several passes, never
// losing a latest value.
func TestBoundedMapTakesSeveralPasses(t *testing.T) {
	h := newHarness(t, segment.NewMemFS(), compactConfig())
	h.c = New(Options{Partitions: h.c.o.Partitions, Clock: h.clock, DedupeBytes: minSlots * slotBytes})
	latest := h.produceVersions(1500, 3, rand.New(rand.NewPCG(5, 6)))
	passes := 0
	for h.p.CleanedOffset() < h.p.ClosedSegments()[len(h.p.ClosedSegments())-1].NextOffset {
		require.NoError(t, h.c.CleanNow(context.Background(), h.p))
		passes++
		require.Less(t, passes, 20)
	}
	require.Greater(t, passes, 1)
	rs := h.readAll()
	offs := keyOffsets(rs)
	require.Len(t, offs, 1500)
	for k, off := range latest {
		require.Contains(t, offs[k], off, k)
	}
}

// A partition the cleaner cannot read is marked uncleanable; the others
// are cleaned all the same.
func TestUncleanablePartitionDoesNotStopOthers(t *testing.T) {
	bad := newHarness(t, segment.NewMemFS(), compactConfig())
	good := newHarness(t, segment.NewMemFS(), compactConfig())
	good.produceVersions(20, 5, rand.New(rand.NewPCG(7, 8)))
	bad.produceVersions(20, 5, rand.New(rand.NewPCG(9, 10)))
	// A batch claiming gzip whose bytes are not: its CRC is right, so it
	// is stored, and only decompression fails.
	b := batch(1, -1, 0, rec{key: "x", value: "y"})
	binary.BigEndian.PutUint16(b[21:], 1)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	bad.append(b)
	require.NoError(t, bad.p.Roll())
	badSegs := bad.p.ClosedSegments()

	c := New(Options{Partitions: func() []*partition.Partition { return []*partition.Partition{bad.p, good.p} },
		Clock: good.clock, Backoff: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	require.Eventually(t, func() bool {
		var unclean, cleaned bool
		for _, s := range c.Stats().Partitions {
			unclean = unclean || (s.Uncleanable && s.Partition == bad.p.Index() && s.Topic == bad.p.Topic())
			cleaned = cleaned || (!s.LastClean.IsZero() && !s.Uncleanable)
		}
		return unclean && cleaned && len(good.readAll()) == 20
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	require.Equal(t, badSegs, bad.p.ClosedSegments(), "the uncleanable log is untouched")
}

// Crash points: every filesystem operation of a pass fails in turn, the
// machine crashes there, and the reopened log holds every key's latest
// record, offsets unique and increasing, a valid segment set.
func TestCrashDuringPass(t *testing.T) {
	for n := int64(1); ; n++ {
		mem := segment.NewMemFS()
		sw := segment.NewSwitch(segment.FailApplied(segment.Nth(n, segment.Mutations())))
		h := newHarness(t, segment.Wrap(mem, sw), compactConfig())
		latest := h.produceVersions(60, 8, rand.New(rand.NewPCG(11, 12)))
		sw.Arm()
		err := h.c.CleanNow(context.Background(), h.p)
		sw.Disarm()
		h.fs = mem.Crash(0)
		h.open()
		rs := h.readAll()
		offs := keyOffsets(rs)
		require.Len(t, offs, 60, "op %d", n)
		for k, off := range latest {
			require.Contains(t, offs[k], off, "op %d: key %s lost its latest record", n, k)
		}
		segs := h.p.ClosedSegments()
		for i := 1; i < len(segs); i++ {
			require.Equal(t, segs[i-1].NextOffset, segs[i].BaseOffset, "op %d: segments contiguous", n)
		}
		// The next pass completes the job.
		require.NoError(t, h.c.CleanNow(context.Background(), h.p), "op %d", n)
		rs = h.readAll()
		require.Len(t, rs, 60, "op %d", n)
		if err == nil {
			t.Logf("%d operations failed in turn", n-1)
			require.Greater(t, n, int64(5))
			return
		}
	}
}

func TestPlan(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	seg := func(base, next, size, maxTs int64) segment.SegmentInfo {
		return segment.SegmentInfo{BaseOffset: base, NextOffset: next, Size: size, MaxTimestamp: maxTs}
	}
	closed := []segment.SegmentInfo{seg(0, 10, 100, 1000), seg(10, 20, 100, 990_000), seg(20, 30, 200, 999_000)}
	cfg := compactConfig()
	a := plan(closed, 10, 0, false, cfg, now)
	require.Len(t, a.segs, 3)
	require.Equal(t, []int64{300, 100}, []int64{a.dirtyBytes, a.cleanBytes})
	require.InDelta(t, 0.75, a.ratio, 1e-9)
	require.False(t, a.forced)

	cfg.MinCompactionLag = 5 * time.Second // segment 3 is 1 s old
	a = plan(closed, 10, 0, false, cfg, now)
	require.Len(t, a.segs, 2)
	cfg.MinCompactionLag = 0

	a = plan(closed, 0, 20, true, cfg, now) // tiered: only what is uploaded
	require.Len(t, a.segs, 2)
	a = plan(closed, 0, -1, true, cfg, now)
	require.Empty(t, a.segs)

	cfg.MaxCompactionLag = 500 * time.Second // the first dirty segment is 999 s old
	a = plan(closed, 0, 0, false, cfg, now)
	require.True(t, a.forced)
	a = plan(closed, 10, 0, false, cfg, now) // 10 s old
	require.False(t, a.forced)
}

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap(64 << 10)
	require.Equal(t, 2048, m.maxSlots)
	keys := make([]string, 0, 1843)
	for i := range 1843 { // 90 % of 2048
		k := fmt.Sprintf("key-%d", i)
		keys = append(keys, k)
		require.True(t, m.put([]byte(k), int64(i)))
	}
	require.True(t, m.put([]byte("key-7"), 5000), "an update always fits")
	require.False(t, m.put([]byte("one-too-many"), 1), "full at its bound")
	sort.Strings(keys)
	for i := range 1843 {
		off, ok := m.get([]byte(fmt.Sprintf("key-%d", i)))
		require.True(t, ok)
		if i == 7 {
			require.EqualValues(t, 5000, off)
		} else {
			require.EqualValues(t, i, off)
		}
	}
	_, ok := m.get([]byte("absent"))
	require.False(t, ok)
}

// A replica drops tombstones only from a log that holds the start of its
// table: always without a tier; with one, a leader compares with the
// tier's start, a follower needs a log starting at 0.
func TestMayDropTombstones(t *testing.T) {
	h := newHarness(t, segment.NewMemFS(), compactConfig())
	h.produceVersions(10, 3, rand.New(rand.NewPCG(13, 14)))
	plain := New(Options{Partitions: h.c.o.Partitions, Clock: h.clock})
	tiered := New(Options{Partitions: h.c.o.Partitions, Clock: h.clock, Tier: true})
	require.True(t, plain.mayDropTombstones(h.p))
	require.True(t, tiered.mayDropTombstones(h.p), "a leader not tiered yet, its log from 0")

	_, err := h.p.DeleteRecords(5)
	require.NoError(t, err)
	require.True(t, plain.mayDropTombstones(h.p), "no tier: nothing lies below the log start")
	h.p.SetTier(-1, 0) // the tier holds nothing
	require.True(t, tiered.mayDropTombstones(h.p))
	h.p.SetTier(0, 5) // the tier holds [0, 5)
	require.False(t, tiered.mayDropTombstones(h.p), "the leader's tombstones hide values in the tier")
	h.p.SetReplication(1, false, []int32{0, 1}, []int32{0, 1})
	require.False(t, tiered.mayDropTombstones(h.p), "a follower starting past 0 cannot know")
	require.True(t, plain.mayDropTombstones(h.p))
}
