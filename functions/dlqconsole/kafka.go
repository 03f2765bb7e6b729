package dlqconsole

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// metaPrefix starts the commit metadata in which the console keeps the
// offsets it handled after the committed offset of a partition.
const metaPrefix = "strata-dlq-console/v1 done="

// maxMetaBytes stays below Kafka's default offset.metadata.max.bytes (4096).
const maxMetaBytes = 3500

// partState is what the console group knows of one .dlq partition.
type partState struct {
	logStart int64          // log start offset
	start    int64          // first letter that may be shown: max(committed, log start)
	end      int64          // high watermark
	done     map[int64]bool // handled offsets at or after start
	commit   int64          // committed offset (-1: none)
}

func (ps partState) hidden(o int64) bool { return o < ps.start || ps.done[o] }

// count is the number of letters left (gaps from compaction are counted).
func (ps partState) count() int64 {
	n := ps.end - ps.start
	for o := range ps.done {
		if o >= ps.start && o < ps.end {
			n--
		}
	}
	return max(n, 0)
}

// topicState is the state of every partition of a .dlq topic.
type topicState struct {
	topic string
	parts map[int32]*partState
}

func (ts *topicState) partitions() []int32 {
	ps := make([]int32, 0, len(ts.parts))
	for p := range ts.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// dlqTopics lists the .dlq topics of the cluster, sorted.
func (c *Console) dlqTopics(ctx context.Context) ([]string, error) {
	td, err := c.adm.ListTopics(ctx)
	if err != nil {
		return nil, kafkaError("list topics", err)
	}
	var out []string
	for _, t := range td.Sorted() {
		if strings.HasSuffix(t.Topic, retry.DLQSuffix) && t.Err == nil {
			out = append(out, t.Topic)
		}
	}
	return out, nil
}

// state reads the partitions, offsets and the console group's commits of
// topics (which must exist and end in .dlq).
func (c *Console) state(ctx context.Context, topics ...string) (map[string]*topicState, error) {
	for _, t := range topics {
		if !strings.HasSuffix(t, retry.DLQSuffix) || len(t) == len(retry.DLQSuffix) {
			return nil, errorf(404, "topic %q is not a dead-letter topic (its name does not end in %s)", t, retry.DLQSuffix)
		}
	}
	td, err := c.adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, kafkaError("list topics", err)
	}
	out := make(map[string]*topicState, len(topics))
	for _, t := range topics {
		d, ok := td[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return nil, errorf(404, "topic %q does not exist", t)
		case d.Err != nil:
			return nil, kafkaError("describe topic "+t, d.Err)
		}
		ts := &topicState{topic: t, parts: map[int32]*partState{}}
		for p := range d.Partitions {
			ts.parts[p] = &partState{commit: -1, done: map[int64]bool{}}
		}
		out[t] = ts
	}
	starts, err := c.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, kafkaError("list log start offsets", err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, kafkaError("list log end offsets", err)
	}
	commits, err := c.adm.FetchOffsetsForTopics(ctx, c.group, topics...)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, kafkaError("fetch the console group's offsets", err)
	}
	for _, ts := range out {
		for p, ps := range ts.parts {
			lo, ok := starts.Lookup(ts.topic, p)
			if !ok || lo.Err != nil {
				return nil, kafkaError(fmt.Sprintf("log start offset of %s/%d", ts.topic, p), orMissing(lo.Err))
			}
			hi, ok := ends.Lookup(ts.topic, p)
			if !ok || hi.Err != nil {
				return nil, kafkaError(fmt.Sprintf("log end offset of %s/%d", ts.topic, p), orMissing(hi.Err))
			}
			ps.logStart, ps.start, ps.end = lo.Offset, lo.Offset, hi.Offset
			if cm, ok := commits.Lookup(ts.topic, p); ok && cm.Err == nil && cm.At >= 0 {
				ps.commit = cm.At
				ps.start = max(ps.start, cm.At)
				for _, o := range parseDone(cm.Metadata) {
					if o >= ps.start {
						ps.done[o] = true
					}
				}
			}
		}
	}
	return out, nil
}

func orMissing(err error) error {
	if err == nil {
		return errors.New("no answer for the partition")
	}
	return err
}

func parseDone(meta string) []int64 {
	s, ok := strings.CutPrefix(meta, metaPrefix)
	if !ok || s == "" {
		return nil
	}
	var out []int64
	for _, f := range strings.Split(s, ",") {
		if o, err := strconv.ParseInt(f, 10, 64); err == nil {
			out = append(out, o)
		}
	}
	return out
}

func formatDone(done map[int64]bool) string {
	if len(done) == 0 {
		return ""
	}
	os := make([]int64, 0, len(done))
	for o := range done {
		os = append(os, o)
	}
	slices.Sort(os)
	var b strings.Builder
	b.WriteString(metaPrefix)
	for i, o := range os {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(o, 10))
	}
	return b.String()
}

// markDone records that the offsets of partitions were handled and commits:
// the committed offset moves over the handled prefix, the rest goes into the
// commit's metadata. upTo, when set for a partition, handles every letter up
// to and including it.
func (c *Console) markDone(ctx context.Context, ts *topicState, offsets map[int32][]int64, upTo map[int32]int64) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	// Reread under the lock so concurrent requests of this process do not
	// undo each other's commits.
	fresh, err := c.state(ctx, ts.topic)
	if err != nil {
		return err
	}
	ts = fresh[ts.topic]
	commit := make(kadm.Offsets)
	for p, ps := range ts.parts {
		os, hasOs := offsets[p]
		u, hasU := upTo[p]
		if !hasOs && !hasU {
			continue
		}
		next := ps.start
		if hasU {
			next = max(next, min(u+1, ps.end))
		}
		for _, o := range os {
			if o >= next {
				ps.done[o] = true
			}
		}
		for ps.done[next] {
			delete(ps.done, next)
			next++
		}
		for o := range ps.done {
			if o < next {
				delete(ps.done, o)
			}
		}
		meta := formatDone(ps.done)
		if len(meta) > maxMetaBytes {
			return errorf(409, "too many letters of %s/%d were handled out of order; purge up to offset %d first", ts.topic, p, next)
		}
		commit.Add(kadm.Offset{Topic: ts.topic, Partition: p, At: next, LeaderEpoch: -1, Metadata: meta})
	}
	if len(commit) == 0 {
		return nil
	}
	resps, err := c.adm.CommitOffsets(ctx, c.group, commit)
	if err != nil {
		return kafkaError("commit the console group's offsets", err)
	}
	if err := resps.Error(); err != nil {
		return kafkaError("commit the console group's offsets", err)
	}
	return nil
}

// LetterRef names one letter: a record of a .dlq topic.
type LetterRef struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// readRecords reads, per partition, the records from the offset given in
// from up to the high watermark, keeping at most limit records per
// partition that keep(p, offset) accepts (limit < 0: all). It stops a
// partition early once it has limit records or stop(p, offset) is true.
func (c *Console) readRecords(ctx context.Context, topic string, from map[int32]int64, ends map[int32]int64, limit int, keep, stop func(int32, int64) bool) (map[int32][]*kgo.Record, error) {
	need := map[int32]kgo.Offset{}
	for p, o := range from {
		if o < ends[p] {
			need[p] = kgo.NewOffset().At(o)
		}
	}
	out := map[int32][]*kgo.Record{}
	if len(need) == 0 {
		return out, nil
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.opts.Seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: need}),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ClientID("strata-dlq-console"),
	}, c.opts.KgoOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, errorf(503, "kafka client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for len(need) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, errorf(503, "read %s: no complete answer from Kafka within %s", topic, c.timeout)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, kafkaError("read "+topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := need[r.Partition]; !ok {
				return
			}
			if keep(r.Partition, r.Offset) && (limit < 0 || len(out[r.Partition]) < limit) {
				out[r.Partition] = append(out[r.Partition], r)
			}
			if r.Offset+1 >= ends[r.Partition] || (limit >= 0 && len(out[r.Partition]) >= limit) || stop(r.Partition, r.Offset) {
				delete(need, r.Partition)
			}
		})
		if len(need) > 0 {
			var rm []int32
			fs.EachPartition(func(fp kgo.FetchTopicPartition) {
				// A fetch that reaches the high watermark ends the partition
				// even when the last offsets hold no record.
				if _, ok := need[fp.Partition]; ok && len(fp.Records) > 0 && fp.Records[len(fp.Records)-1].Offset+1 >= fp.HighWatermark {
					rm = append(rm, fp.Partition)
				}
			})
			for _, p := range rm {
				delete(need, p)
			}
		}
	}
	return out, nil
}

// readOne reads the record at offset o of topic/p, or returns a 404 error.
func (c *Console) readOne(ctx context.Context, ts *topicState, p int32, o int64) (*kgo.Record, error) {
	ps, ok := ts.parts[p]
	if !ok {
		return nil, errorf(404, "topic %q has no partition %d", ts.topic, p)
	}
	if o < ps.logStart {
		return nil, errorf(404, "no letter %s/%d@%d: the partition starts at offset %d", ts.topic, p, o, ps.logStart)
	}
	if o >= ps.end {
		return nil, errorf(404, "no letter %s/%d@%d: the partition ends at offset %d", ts.topic, p, o, ps.end)
	}
	recs, err := c.readRecords(ctx, ts.topic, map[int32]int64{p: o}, map[int32]int64{p: ps.end}, 1,
		func(_ int32, off int64) bool { return off == o }, func(_ int32, off int64) bool { return off >= o })
	if err != nil {
		return nil, err
	}
	if len(recs[p]) == 0 {
		return nil, errorf(404, "no letter %s/%d@%d (deleted by retention or compaction)", ts.topic, p, o)
	}
	return recs[p][0], nil
}

// listLetters reads the letters left in ts after the position after (nil:
// from the first), in partition then offset order, at most limit of them;
// more reports whether there are further ones.
func (c *Console) listLetters(ctx context.Context, ts *topicState, after *LetterRef, limit int) (recs []*kgo.Record, more bool, err error) {
	from, ends := map[int32]int64{}, map[int32]int64{}
	for p, ps := range ts.parts {
		start := ps.start
		if after != nil {
			if p < after.Partition {
				continue
			}
			if p == after.Partition {
				start = max(start, after.Offset+1)
			}
		}
		from[p], ends[p] = start, ps.end
	}
	byPart, err := c.readRecords(ctx, ts.topic, from, ends, limit+1,
		func(p int32, o int64) bool { return !ts.parts[p].hidden(o) }, func(int32, int64) bool { return false })
	if err != nil {
		return nil, false, err
	}
	for _, p := range ts.partitions() {
		recs = append(recs, byPart[p]...)
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	if len(recs) > limit {
		return recs[:limit], true, nil
	}
	return recs, false, nil
}

// ReplayResult says where a replayed letter went (POST .../replay answers {"replayed": [...]}).
type ReplayResult struct {
	Partition       int32  `json:"partition"`
	Offset          int64  `json:"offset"`
	OriginTopic     string `json:"originTopic"`
	OriginPartition int32  `json:"originPartition"`
	ReplayedOffset  int64  `json:"replayedOffset"` // its offset on the origin topic
	Replays         int    `json:"replays"`
}

// replay produces the letters back to their origin topics and partitions
// and marks them handled. Unless force, letters already replayed (or
// already handled by the console) are refused with 409 and nothing is
// produced. A letter of X.dlq whose origin header names another topic than
// X is refused with 409 even with force (pkg/retry State.CheckOrigin), and
// keeps its place.
func (c *Console) replay(ctx context.Context, topic string, refs []LetterRef, force bool) ([]ReplayResult, error) {
	if len(refs) == 0 {
		return nil, errorf(400, "name at least one letter to replay")
	}
	states, err := c.state(ctx, topic)
	if err != nil {
		return nil, err
	}
	ts := states[topic]
	type job struct {
		ref LetterRef
		rec *kgo.Record
		st  retry.State
	}
	var jobs []job
	var refused []string
	seen := map[LetterRef]bool{}
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		rec, err := c.readOne(ctx, ts, ref.Partition, ref.Offset)
		if err != nil {
			return nil, err
		}
		st, ok, err := retry.Parse(rec.Headers)
		if err != nil {
			return nil, errorf(409, "letter %s/%d@%d: %v", topic, ref.Partition, ref.Offset, err)
		}
		if !ok || st.OriginTopic == "" {
			return nil, errorf(409, "letter %s/%d@%d has no %s header: its origin is unknown", topic, ref.Partition, ref.Offset, retry.HeaderOriginTopic)
		}
		if err := st.CheckOrigin(topic); err != nil {
			// Not even with force: a letter of X.dlq goes back to X only.
			return nil, errorf(409, "refusing to replay letter %s/%d@%d: %v", topic, ref.Partition, ref.Offset, err)
		}
		switch {
		case force:
		case st.Replays >= 1:
			refused = append(refused, fmt.Sprintf("%d@%d was replayed %d time(s), last at %s", ref.Partition, ref.Offset, st.Replays, retry.FormatTime(st.ReplayedAt)))
		case ts.parts[ref.Partition].hidden(ref.Offset):
			refused = append(refused, fmt.Sprintf("%d@%d was already replayed or purged", ref.Partition, ref.Offset))
		}
		jobs = append(jobs, job{ref, rec, st})
	}
	if len(refused) > 0 {
		return nil, errorf(409, "refusing to replay %s: %s; force replays anyway (-force, \"force\": true, or the force box)", topic, strings.Join(refused, "; "))
	}
	// The origin partitions must exist: a replay keeps the partition.
	origins := map[string]bool{}
	for _, j := range jobs {
		origins[j.st.OriginTopic] = true
	}
	var names []string
	for t := range origins {
		names = append(names, t)
	}
	td, err := c.adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, kafkaError("list origin topics", err)
	}
	for _, j := range jobs {
		d, ok := td[j.st.OriginTopic]
		if !ok || d.Err != nil {
			return nil, errorf(409, "letter %d@%d: origin topic %q does not exist", j.ref.Partition, j.ref.Offset, j.st.OriginTopic)
		}
		if _, ok := d.Partitions[j.st.OriginPartition]; !ok {
			return nil, errorf(409, "letter %d@%d: origin topic %q has no partition %d", j.ref.Partition, j.ref.Offset, j.st.OriginTopic, j.st.OriginPartition)
		}
	}
	now := time.Now()
	recs := make([]*kgo.Record, len(jobs))
	results := make([]ReplayResult, len(jobs))
	for i, j := range jobs {
		st := j.st
		st.ReplayedAt = now
		st.Replays++
		recs[i] = &kgo.Record{
			Topic:     st.OriginTopic,
			Partition: st.OriginPartition,
			Key:       j.rec.Key,
			Value:     j.rec.Value,
			Headers:   st.Headers(j.rec.Headers),
		}
		results[i] = ReplayResult{Partition: j.ref.Partition, Offset: j.ref.Offset, OriginTopic: st.OriginTopic, OriginPartition: st.OriginPartition, Replays: st.Replays}
	}
	pctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	prs := c.producer.ProduceSync(pctx, recs...)
	if err := prs.FirstErr(); err != nil {
		return nil, kafkaError("produce to the origin topic", err)
	}
	for i, pr := range prs {
		results[i].ReplayedOffset = pr.Record.Offset
	}
	done := map[int32][]int64{}
	for _, j := range jobs {
		done[j.ref.Partition] = append(done[j.ref.Partition], j.ref.Offset)
	}
	if err := c.markDone(ctx, ts, done, nil); err != nil {
		return results, err
	}
	return results, nil
}
