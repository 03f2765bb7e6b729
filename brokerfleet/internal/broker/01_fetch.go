package broker

// Fetch, versions 4-13. A fetch with a replica id (>= 0) is a follower
// pulling from its leader: it reads past the high watermark, and its fetch
// offset records how far it has replicated. v4 adds isolation level and the
// last stable offset: read_committed consumers read below the last stable
// offset and get the aborted transactions overlapping what they read (the
// client drops their records); v5 the log start offset; v7 fetch sessions; v9 the
// current leader epoch; v11 rack and preferred read replica; v12 is
// flexible and adds the last fetched epoch; v13 names topics by id
// (KIP-516), in the request, its forgotten topics and the answer.
//
// Topic ids (v13): resolveFetchIDs names the request's topics from this
// broker's view before the ACL rule runs, so the rule, the session and the
// read work on names as for v12; a topic id this broker does not know is
// taken out and answered UNKNOWN_TOPIC_ID, a forgotten one it does not
// know is dropped (a session holds names: the partitions of a topic
// deleted while in a session stay in it, answered with errors, until the
// session ends). Answers carry the id of each topic as this broker knows
// it.
//
// Fetch sessions (v7+, KIP-227; internal/fetchsession): epoch 0 creates a
// session holding the request's partitions (answered with its id; id 0
// when the cache has no room: the client goes on sessionless), epoch -1
// is sessionless (and closes the session named), epoch > 0 is an
// incremental fetch of its session: it lists only changed or added
// partitions and forgotten ones, reads every partition the session holds,
// and its answer leaves out those with nothing new. An unknown session
// (or another principal's) is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
// INVALID_FETCH_SESSION_EPOCH, both top-level with no partitions. A
// follower's fetch answers at once when a high watermark it has not been
// told moved, so consumers reading from it see records without waiting
// for its next append.
//
// Reading from followers (v11+, KIP-392): a consumer that sends its rack
// is told, for a partition this broker leads, the live in-sync follower in
// its rack to read from instead (PreferredReadReplica, no records), unless
// this broker is in that rack or none is. A follower serves consumer
// fetches (v11+) of partitions it hosts up to the high watermark it has
// learned from its leader: an offset between that and its log end gets an
// empty answer, one past its log end or below its local log start
// OFFSET_OUT_OF_RANGE (with its log start, so the client goes back to the
// leader), a partition it no longer hosts NOT_LEADER_OR_FOLLOWER with the
// leader's id. Older consumers and every follower fetch need the leader.
//
// Bounds: a response carries at most fetch.max.bytes of records, whatever
// MaxBytes asks (one batch larger than that still goes alone, KIP-74).
//
// Replica fetches are checked as Kafka's ReplicaManager checks them: the
// replica id must be a replica of the partition other than this leader
// (else NOT_LEADER_OR_FOLLOWER, or UNKNOWN_LEADER_EPOCH when the request
// names the current epoch), and the fetch offset must not pass the
// leader's log end (OFFSET_OUT_OF_RANGE); either way nothing is recorded,
// so no fetch raises the high watermark past what the leader holds. When
// followers authenticate, a replica fetch from an anonymous connection is
// refused (TOPIC_AUTHORIZATION_FAILED) even with ACLs off (replicaConn).
//
// ACLs: consumers need READ on each topic, followers CLUSTER_ACTION.
// authorizeFetch takes denied topics out of the request, so they never
// enter a session; the partitions a session already holds are not in the
// request, so sessionRule checks every partition read, on every fetch (a
// revoked ACL applies at the next fetch; the partition stays in the
// session, answered TOPIC_AUTHORIZATION_FAILED).

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/fetchsession"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

func init() {
	register(1, 4, 13, later(handleFetch), authorizeFetch)
	resolveWith(1, resolveFetchIDs)
}

// maxFetchWait caps a client's MaxWaitMillis.
const maxFetchWait = 30 * time.Second

// handleFetch returns the function that answers the fetch: it resolves the
// fetch session (there, in the connection's writer, so the fetches of one
// connection use it in request order), reads the partitions and, while
// fewer than MinBytes are available, waits up to MaxWaitMillis for a high
// watermark (or, for followers, a log end) to move.
func handleFetch(b *Broker, cc *clientConn, req *kmsg.FetchRequest) func() kmsg.Response {
	if req.ReplicaID >= 0 && !replicaConn(b, cc) {
		b.log.Debug("refusing a replica fetch from an unauthenticated connection", "remote", cc.remote, "replica", req.ReplicaID)
		return func() kmsg.Response { return refuseReplica(req) }
	}
	if req.ReplicaID >= 0 {
		noteReplicaOffsets(b, req)
	}
	return func() kmsg.Response {
		f, err := b.sessions.Begin(req, fetchsession.Owner{Principal: cc.sec.Principal(), Replica: req.ReplicaID})
		if err != nil {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = errorCode(err)
			return resp
		}
		// A client (or follower) that already knows of an election this
		// broker has not applied yet: catch up before answering
		// NOT_LEADER or UNKNOWN_LEADER_EPOCH. A consumer reading from a
		// follower (KIP-392) treats it as a replica, not as the leader.
		r := &fetchRead{b: b, cc: cc, req: req, f: f, readable: sessionRule(b, cc, req.ReplicaID >= 0)}
		r.skip.begin(f, req.ReplicaID)
		defer r.skip.abandon()
		s := b.cat.Snapshot()
		ahead := false
		for i := range f.Parts {
			fp := &f.Parts[i]
			if r.skip.noted(fp, s) {
				continue // not ahead when noted, and the catalog is as it was
			}
			ahead = ahead || aheadOfView(s, fp.Topic, fp.Partition, fp.LeaderEpoch, req.ReplicaID >= 0)
		}
		catchUpIf(b, cc.ctx, ahead)
		resp := r.serve()
		f.NoteQuiet(r.quietIdx, r.quietNotes)
		r.skip.end()
		f.Finish(resp)
		r.bufs.sendWith(resp) // released once written (conn.go)
		return resp
	}
}

// noteReplicaOffsets records a follower's fetch offsets, its claim to
// hold everything below them, as soon as the request is read: the high
// watermark, and the acks=all produces waiting for it, move without
// waiting for the connection's writer to take the fetch up. Partitions
// the fetch may not speak for (not led here, another leader epoch) are
// left to readPartition, which answers their errors; so are the errors
// ReplicaFetched finds (it changes nothing then).
func noteReplicaOffsets(b *Broker, req *kmsg.FetchRequest) {
	s := b.cat.Snapshot()
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p, leader, _ := servingReplica(s, req, rt.Topic, rp.Partition)
			if p == nil || !leader || (rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch != p.LeaderEpoch()) {
				continue
			}
			_ = p.ReplicaFetched(req.ReplicaID, rp.FetchOffset, rp.LogStartOffset)
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, idx := range ft.Partitions {
			if p, _ := leaderOf(s, ft.Topic, idx); p != nil {
				p.ReplicaForgot(req.ReplicaID) // its session no longer vouches for it (quiet)
			}
		}
	}
}

// fetchRead is one fetch being answered.
type fetchRead struct {
	b        *Broker
	cc       *clientConn
	req      *kmsg.FetchRequest
	f        *fetchsession.Fetch
	readable func(topic string) bool // nil: ACLs off
	bufs     fetchBufs               // the pooled buffers of the newest read

	// The quiet notes this fetch took and dropped, in order (nil: dropped;
	// fetchsession.Fetch.NoteQuiet), and its use of the session's
	// position (quietskip.go).
	quietIdx   []int
	quietNotes []any
	skip       quietView
}

// followerNewsDelay is how long a follower's fetch whose only news is a
// high watermark or log start it was not told waits for records before
// it is answered. The follower fetch that moved a high watermark is the
// one waiting: the acks=all produce it released writes its response
// first, instead of sharing the cores with this answer and the follower's
// next fetch, and a produce within the delay (one producer with one
// batch in flight sends the next in well under it) brings its records in
// the same answer. It bounds how stale a follower's high watermark gets
// (consumers reading from followers, KIP-392).
const followerNewsDelay = time.Millisecond

// serve reads until the answer is worth sending or MaxWait passes.
func (r *fetchRead) serve() *kmsg.FetchResponse {
	b, req := r.b, r.req
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
	deadline := b.clock.Now().Add(wait)
	first, n, now, moved := r.read()
	if len(r.f.Parts) == 0 || n >= int(req.MinBytes) || now || wait <= 0 {
		return first
	}
	news := r.news(first, nil, moved)
	// Register before re-reading so no move is missed. Consumers wait for
	// the high watermarks of their partitions; followers on one channel
	// that every partition they replicate signals, appends included (they
	// read uncommitted data).
	wake := make(chan struct{}, 1)
	if req.ReplicaID >= 0 {
		defer b.replicaWaiters.watch(req.ReplicaID, wake)() // replicawake.go
	} else {
		s := b.cat.Snapshot()
		for i := range r.f.Parts {
			if p, _, _ := servingReplica(s, req, r.f.Parts[i].Topic, r.f.Parts[i].Partition); p != nil {
				defer p.Watch(wake)()
			}
		}
	}
	until := deadline
	if news {
		until = earlier(deadline, b.clock.Now().Add(followerNewsDelay))
	}
	timer := b.clock.NewTimer(clock.Until(b.clock, until))
	defer timer.Stop()
	for {
		resp, n, now, moved := r.read()
		if n >= int(req.MinBytes) || now {
			return resp
		}
		if !news && r.news(resp, first, moved) {
			news = true
			if at := b.clock.Now().Add(followerNewsDelay); at.Before(deadline) {
				timer.Reset(followerNewsDelay)
			}
		}
		select {
		case <-wake:
		case <-timer.C():
			resp, _, _, _ = r.read()
			return resp
		case <-r.cc.ctx.Done():
			return resp
		}
	}
}

// earlier returns the earlier of two times.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// news reports whether a follower's fetch should be answered before
// MinBytes (after followerNewsDelay): a high watermark moved that it was not told (this fetch moved
// it, it differs from what its session last said, or it moved since the
// first read). Consumers wait for records.
func (r *fetchRead) news(resp, first *kmsg.FetchResponse, moved bool) bool {
	if r.req.ReplicaID < 0 {
		return false
	}
	if moved || r.f.News(resp) {
		return true
	}
	if first == nil {
		return false
	}
	// The reads may hold different partitions (quiet ones are left out):
	// compare those both hold. One only resp holds was quiet at first, so
	// the session was told its high watermark then: News covers it.
	type tp struct {
		topic string
		part  int32
	}
	was := map[tp]int64{}
	for _, t := range first.Topics {
		for _, p := range t.Partitions {
			was[tp{t.Topic, p.Partition}] = p.HighWatermark
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if hw, ok := was[tp{t.Topic, p.Partition}]; ok && hw != p.HighWatermark {
				return true
			}
		}
	}
	return false
}

// read builds one fetch response, in the order of the fetch's partitions,
// from what is committed now (for followers: written). It returns the
// bytes of records read, whether to answer now (a partition error or a
// preferred read replica: Kafka answers those at once), and whether a
// follower's fetch offsets moved a high watermark.
func (r *fetchRead) read() (resp *kmsg.FetchResponse, total int, now, moved bool) {
	// Only the newest read is ever sent; earlier ones are kept only for
	// their high watermarks (news), so their record sets can go.
	r.bufs.release()
	s := r.b.cat.Snapshot()
	resp = r.req.ResponseKind().(*kmsg.FetchResponse)
	// fetch.max.bytes caps what any fetch asks (2 GiB is served as the
	// cap); per partition, MaxBytes counts only up to what is left.
	remaining := int(r.req.MaxBytes)
	if remaining <= 0 || remaining > int(r.b.cfg.FetchMaxBytes) {
		remaining = int(r.b.cfg.FetchMaxBytes)
	}
	if r.req.ReplicaID >= 0 && r.f.Incremental() {
		// Every quiet partition, noted or not, is caught up as of now.
		now := r.b.clock.Now()
		r.f.Clock().Store(now.UnixNano())
		r.skip.refresh(&r.b.replicaWaiters, r.req.ReplicaID, s, now, r.b.cfg.quietFullLook)
	}
	for i := range r.f.Parts {
		fp := &r.f.Parts[i]
		if r.quiet(s, fp, i) {
			continue // no news: an incremental answer leaves it out anyway
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != fp.Topic {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = fp.Topic
			if t := s.Topic(fp.Topic); t != nil {
				st.TopicID = t.Meta.ID
			}
			resp.Topics = append(resp.Topics, st)
		}
		sp, n, pnow, pmoved := r.readPartition(s, fp, total, remaining)
		st := &resp.Topics[len(resp.Topics)-1]
		st.Partitions = append(st.Partitions, sp)
		total += n
		remaining -= n
		now, moved = now || pnow, moved || pmoved
	}
	return resp, total, now, moved
}

// quiet reports whether a follower's incremental fetch has nothing to
// say of a partition and nothing to tell it: the follower asks from this
// leader's log end, as before, and was told the current high watermark
// and log start. Such a partition (most of a large session) is recorded
// as caught up (ReplicaQuiet) and left out of the read, which otherwise
// costs a lookup, the read and a response entry per partition per pass.
//
// A partition found quiet gets a note (fp is the i-th of the fetch's
// parts; quietskip.go): the next reads and fetches skip it unseen until
// the change log names it, and then look only at its offsets
// (quietAgain), while the catalog is as it was. A 1,000-partition
// session's fetch costs a bit test per quiet partition then, not a
// lookup, a lock and a clock read each.
func (r *fetchRead) quiet(s *catalog.Snapshot, fp *fetchsession.Part, i int) bool {
	if r.req.ReplicaID < 0 || !r.f.Incremental() {
		return false
	}
	if r.readable != nil && !r.readable(fp.Topic) {
		r.unnote(fp, i)
		return false
	}
	v := &r.skip
	if p, ok := fp.Quiet.(*partition.Partition); ok && v.qs != nil && v.check {
		if v.trust && !v.changed.has(p) {
			return true
		}
		if quietAgain(fp, p) {
			return true
		}
	}
	p, leader, _ := servingReplica(s, r.req, fp.Topic, fp.Partition)
	if p == nil || !leader || (fp.LeaderEpoch >= 0 && fp.LeaderEpoch != p.LeaderEpoch()) ||
		aheadOfView(s, fp.Topic, fp.Partition, fp.LeaderEpoch, true) || !quietAgain(fp, p) ||
		!p.ReplicaQuiet(r.req.ReplicaID, fp.FetchOffset, fp.LogStartOffset, r.f.Clock()) {
		r.unnote(fp, i)
		return false
	}
	if v.qs != nil && fp.Quiet != p {
		fp.Quiet = p // the next reads of this long poll
		r.quietIdx, r.quietNotes = append(r.quietIdx, i), append(r.quietNotes, p)
	}
	return true
}

// quietAgain reports whether a noted partition is still quiet, as far as
// its offsets tell: the follower asks from its log end and was told its
// high watermark and local log start.
func quietAgain(fp *fetchsession.Part, p *partition.Partition) bool {
	hwm, start := fp.Told()
	return fp.FetchOffset == p.LogEndOffset() && p.HighWatermark() == hwm && p.LocalLogStartOffset() == start
}

// unnote drops the i-th part's note, if it has one: it is not quiet.
func (r *fetchRead) unnote(fp *fetchsession.Part, i int) {
	if fp.Quiet == nil {
		return
	}
	fp.Quiet = nil
	if r.skip.qs != nil {
		r.quietIdx, r.quietNotes = append(r.quietIdx, i), append(r.quietNotes, nil)
	}
}

// readPartition answers one partition; total and remaining are the bytes
// read so far and what the response may still take.
func (r *fetchRead) readPartition(s *catalog.Snapshot, fp *fetchsession.Part, total, remaining int) (sp kmsg.FetchResponseTopicPartition, n int, now, moved bool) {
	b, req := r.b, r.req
	sp = kmsg.NewFetchResponseTopicPartition()
	sp.Partition = fp.Partition
	sp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null record set
	if r.readable != nil && !r.readable(fp.Topic) {
		// Like the errors authorizeFetch appends: no reason to answer early.
		sp.ErrorCode = errTopicAuthz
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
		return sp, 0, false, false
	}
	p, leader, code := servingReplica(s, req, fp.Topic, fp.Partition)
	switch {
	case p == nil:
		sp.ErrorCode = code
		if code == kerr.NotLeaderForPartition.Code {
			if l, epoch, _, _, ok := currentLeader(s, fp.Topic, fp.Partition); ok && l != b.cfg.NodeID {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = l, epoch
			}
		}
		return sp, 0, true, false
	case fp.LeaderEpoch > p.LeaderEpoch():
		sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		return sp, 0, true, false
	case fp.LeaderEpoch >= 0 && fp.LeaderEpoch < p.LeaderEpoch():
		sp.ErrorCode = kerr.FencedLeaderEpoch.Code
		return sp, 0, true, false
	}
	replica := req.ReplicaID >= 0
	var fetched error
	if replica {
		// A follower: its fetch offset is its log end, which may move the
		// high watermark. A broker that is not a replica, or an offset past
		// this leader's log end, records nothing (Kafka's checks).
		before := p.HighWatermark()
		fetched = p.ReplicaFetched(req.ReplicaID, fp.FetchOffset, fp.LogStartOffset)
		moved = p.HighWatermark() != before
	}
	sp.HighWatermark = p.HighWatermark()
	sp.LastStableOffset = min(p.LastStableOffset(), sp.HighWatermark)
	sp.LogStartOffset = p.LogStartOffset()
	if replica {
		sp.LogStartOffset = p.LocalLogStartOffset() // where a follower can start
	}
	if fetched != nil {
		sp.ErrorCode = errorCode(fetched)
		if errors.Is(fetched, partition.ErrNotReplica) && fp.LeaderEpoch >= 0 {
			// Kafka: the epoch is current but the (replica, epoch) pair is
			// not known (a replica added before this leader applied it).
			sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		}
		return sp, 0, true, moved
	}
	if leader && !replica && req.Version >= 11 && req.Rack != "" {
		if id := preferredReadReplica(b, r.cc, s, fp.Topic, fp.Partition, p, req.Rack, fp.FetchOffset); id >= 0 {
			sp.PreferredReadReplica = id // and no records: the client moves there
			return sp, 0, true, moved
		}
	}
	limit := min(int(fp.MaxBytes), remaining)
	if limit <= 0 && total > 0 {
		return sp, 0, false, moved
	}
	var data []byte
	var err error
	last := int64(-1)                                // the last offset in data, when a span says it
	committed := !replica && req.IsolationLevel == 1 // read_committed
	var tierAborted *[]partition.AbortedTxn          // set when read_committed data came from the tier
	switch {
	case replica && fp.FetchOffset == p.LogEndOffset(), !replica && fp.FetchOffset == sp.HighWatermark:
		// Caught up (most partitions of a large session): nothing to read,
		// and no lock of the log taken to learn it.
	case replica && b.reassignThrottle != nil && throttled(s, fp.Topic, fp.Partition, req.ReplicaID):
		// A replica being added by a reassignment: at most the throttle's
		// rate (the follower polls again).
		if limit = b.reassignThrottle.Allow(max(limit, 0)); limit == 0 {
			return sp, 0, false, moved
		}
		data, _, err = r.readLog(p, fp, limit, true, partition.ToLogEnd, p.LogEndOffset())
		b.reassignThrottle.Spend(len(data))
	case replica:
		data, _, err = r.readLog(p, fp, max(limit, 0), true, partition.ToLogEnd, p.LogEndOffset())
		if len(data) > 0 {
			p.ReplicaAnswered(req.ReplicaID, fp.FetchOffset)
		}
	default:
		upTo := partition.ToHighWatermark // read_uncommitted
		if committed {
			upTo = partition.ToLastStable
		}
		data, last, err = r.readLog(p, fp, max(limit, 0), total == 0, upTo, p.HighWatermark())
		if errors.Is(err, segment.ErrOffsetOutOfRange) && fp.FetchOffset < p.LocalLogStartOffset() {
			switch {
			case !leader:
				// Below this follower's local log: the client goes back to
				// the leader, which may have it (KIP-392).
				sp.LogStartOffset = p.LocalLogStartOffset()
			case b.tier != nil && fp.FetchOffset >= p.LogStartOffset():
				// Below the local log: the tier has it.
				if ts := s.Topic(fp.Topic); ts != nil {
					ctx, cancel := context.WithTimeout(r.cc.ctx, 30*time.Second) // ends with the connection
					if committed {
						var aborted []partition.AbortedTxn
						data, aborted, err = b.tier.ReadCommitted(ctx, ts.Meta.ID, fp.Partition, fp.FetchOffset, max(limit, 1), p.LastStableOffset())
						tierAborted = &aborted
					} else {
						data, err = b.tier.Read(ctx, ts.Meta.ID, fp.Partition, fp.FetchOffset, max(limit, 1))
					}
					cancel()
				}
			}
		}
	}
	if err != nil {
		sp.ErrorCode = errorCode(err)
		return sp, 0, !errors.Is(err, partition.ErrClosed), moved
	}
	if len(data) > 0 {
		sp.RecordBatches = data
		switch {
		case tierAborted != nil:
			sp.AbortedTransactions = abortedList(*tierAborted)
		case committed && last >= 0:
			sp.AbortedTransactions = abortedList(p.AbortedTxns(fp.FetchOffset, last+1))
		case committed:
			sp.AbortedTransactions = abortedIn(p, fp.FetchOffset, data)
		}
	}
	return sp, len(data), false, moved
}

// readLog reads fp's records from p's log, up to upTo (end is that
// offset, known to the caller), into a pooled buffer; on a connection
// that takes sendfile, a record set of spanMinBytes or more stays in its
// segment file and data is its placeholder (fetchspans.go), with last its
// last offset (else -1).
func (r *fetchRead) readLog(p *partition.Partition, fp *fetchsession.Part, limit int, minOne bool, upTo partition.Bound, end int64) (data []byte, last int64, err error) {
	buf, took := r.bufs.take(fp.FetchOffset, end)
	minSpan := 0
	if took && r.cc.zeroCopy {
		minSpan = spanMinBytes
	}
	data, span, err := p.ReadSpan(buf, fp.FetchOffset, limit, minOne, upTo, minSpan)
	r.bufs.keep(took, data)
	if span == nil {
		return data, -1, err
	}
	if ph, ok := r.bufs.hold(span, fp.Topic); ok {
		return ph, span.LastOffset, nil
	}
	data, err = span.Bytes(data)
	_ = span.Close()
	r.bufs.keep(took, data)
	return data, -1, err
}

// resolveFetchIDs names the topics of a v13+ fetch, given by id, from
// this broker's view; topics with an unknown id are taken out of the
// request and answered UNKNOWN_TOPIC_ID by the returned fix, forgotten
// topics with an unknown id are dropped. Older versions name topics and
// pass through.
func resolveFetchIDs(b *Broker, req *kmsg.FetchRequest) func(kmsg.Response) {
	if req.Version < 13 {
		return nil
	}
	s := b.cat.Snapshot()
	var unknown []kmsg.FetchRequestTopic
	known := req.Topics[:0]
	for _, t := range req.Topics {
		if ts := s.TopicByID(metastore.TopicID(t.TopicID)); ts != nil {
			t.Topic = ts.Meta.Name
			known = append(known, t)
		} else {
			unknown = append(unknown, t)
		}
	}
	req.Topics = known
	forgotten := req.ForgottenTopics[:0]
	for _, t := range req.ForgottenTopics {
		if ts := s.TopicByID(metastore.TopicID(t.TopicID)); ts != nil {
			t.Topic = ts.Meta.Name
			forgotten = append(forgotten, t)
		}
	}
	req.ForgottenTopics = forgotten
	if len(unknown) == 0 {
		return nil
	}
	return func(resp kmsg.Response) {
		rr := resp.(*kmsg.FetchResponse)
		if rr.ErrorCode != 0 {
			return // a session error: no partitions at all
		}
		for _, t := range unknown {
			rt := kmsg.NewFetchResponseTopic()
			rt.TopicID = t.TopicID
			for _, tp := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = tp.Partition, kerr.UnknownTopicID.Code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

// abortedIn lists the aborted transactions a read_committed consumer must
// drop from data, batches read from offset on: those overlapping them.
func abortedIn(p *partition.Partition, offset int64, data []byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	end := offset
	_ = segment.Split(data, func(h segment.Header, _ []byte) error {
		end = max(end, h.LastOffset()+1)
		return nil
	})
	return abortedList(p.AbortedTxns(offset, end))
}

func abortedList(as []partition.AbortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, a := range as {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}

// servingReplica returns the local replica that serves a partition to req
// and whether this broker leads it, or nil and the error code: followers
// and consumers before v11 read from the leader only, consumers of v11+
// from any replica (KIP-392).
func servingReplica(s *catalog.Snapshot, req *kmsg.FetchRequest, name string, idx int32) (*partition.Partition, bool, int16) {
	p, code := leaderOf(s, name, idx)
	if p != nil {
		return p, true, 0
	}
	if code != kerr.NotLeaderForPartition.Code || req.ReplicaID >= 0 || req.Version < 11 {
		return nil, false, code
	}
	t := s.Topic(name)
	if t == nil {
		return nil, false, kerr.UnknownTopicOrPartition.Code
	}
	if st, local, ok := t.Partition(idx); ok && local != nil && slices.Contains(st.Replicas, s.Self()) {
		return local, false, 0
	}
	return nil, false, code
}

// replicaConn reports whether a fetch with a replica id may come from
// cc. When followers authenticate (the inter-broker listener has SASL or
// requires client certificates) every follower's connection has a
// principal, so a replica fetch from an anonymous one is a client posing
// as a follower: refused even with ACLs off, since a follower's fetch
// offset moves the high watermark that acks=all trusts. (With ACLs on,
// authorizeFetch also wants CLUSTER_ACTION.) When followers do not
// authenticate, nothing tells them from clients: the network is trusted,
// and the checks left are that the id is a replica and its offset within
// the log.
func replicaConn(b *Broker, cc *clientConn) bool {
	return !b.replicaAuth || cc.sec.Principal() != security.AnonymousUser
}

// refuseReplica answers a replica fetch refused by replicaConn: every
// partition it lists TOPIC_AUTHORIZATION_FAILED, no records, no session,
// nothing recorded.
func refuseReplica(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if len(req.Topics) == 0 && req.SessionEpoch > 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code // it never got one
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, tp := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = tp.Partition, errTopicAuthz
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// throttled reports whether replica's fetches of a partition count against
// the reassignment throttle: it is being added by a reassignment.
func throttled(s *catalog.Snapshot, topic string, idx, replica int32) bool {
	t := s.Topic(topic)
	if t == nil {
		return false
	}
	st, _, ok := t.Partition(idx)
	return ok && slices.Contains(st.AddingReplicas, replica)
}

// authorizeFetch is the ACL rule of Fetch for the partitions a request
// lists; sessionRule is the rest.
func authorizeFetch(a access, r *kmsg.FetchRequest) (kmsg.Response, func(kmsg.Response)) {
	replica := r.ReplicaID >= 0
	var denied []kmsg.FetchRequestTopic
	if replica && !a.cluster(opClusterAction) {
		denied, r.Topics = r.Topics, nil
	} else if !replica {
		denied = filter(&r.Topics, func(t *kmsg.FetchRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	fix := func(resp kmsg.Response) {
		rr := resp.(*kmsg.FetchResponse)
		for _, t := range denied {
			// Into the topic's entry if the answer has one (a session may
			// hold other partitions of it), once per partition.
			i := slices.IndexFunc(rr.Topics, func(rt kmsg.FetchResponseTopic) bool { return rt.Topic == t.Topic })
			if i < 0 {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				rr.Topics = append(rr.Topics, rt)
				i = len(rr.Topics) - 1
			}
			rt := &rr.Topics[i]
			for _, tp := range t.Partitions {
				if slices.ContainsFunc(rt.Partitions, func(p kmsg.FetchResponseTopicPartition) bool { return p.Partition == tp.Partition }) {
					continue
				}
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = tp.Partition, errTopicAuthz
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
	}
	if len(r.Topics) == 0 && r.SessionID == 0 && r.SessionEpoch == -1 {
		// Nothing left to wait for and no session to keep in step: answer
		// now, not after MaxWait.
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		fix(resp)
		return resp, nil
	}
	return nil, fix
}

// sessionRule returns the ACL check of every partition a fetch reads,
// those its session holds included (nil when ACLs are off): READ on the
// topic for consumers, CLUSTER_ACTION for followers. Decisions are kept
// for the one fetch.
func sessionRule(b *Broker, cc *clientConn, replica bool) func(topic string) bool {
	if b.authz == nil {
		return nil
	}
	a := access{b, cc}
	if replica {
		ok := a.cluster(opClusterAction)
		return func(string) bool { return ok }
	}
	seen := map[string]bool{}
	return func(topic string) bool {
		ok, done := seen[topic]
		if !done {
			ok = a.can(opRead, resTopic, topic)
			seen[topic] = ok
		}
		return ok
	}
}
