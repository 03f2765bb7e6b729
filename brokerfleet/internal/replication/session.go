package replication

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch loop's side of its incremental fetch session with the leader
// (KIP-227). The first fetch is full: it lists every partition and asks
// for a session (epoch 0). Then each fetch lists only the partitions
// whose fetch state (offset, leader epoch, log start) changed or that
// were added, and forgets those no longer followed; the leader reads the
// rest at the offsets it holds and answers only what changed. A session
// error, a lost connection, or a leader without room for the session
// makes the next fetch full again.

// sentPart is the fetch state of a partition as the leader's session
// holds it.
type sentPart struct {
	offset, logStart int64
	epoch            int32
}

// fetchSession is owned by one fetch loop's goroutine.
type fetchSession struct {
	id    int32
	epoch int32 // 0: the next fetch is full and creates a session
	held  map[partKey]sentPart

	// What the request in flight tells (a full fetch: every partition;
	// an incremental one: those it sends), recorded once it is answered.
	full   bool
	told   map[partKey]sentPart
	forgot []partKey
}

func sentOf(f followed) sentPart {
	return sentPart{offset: f.p.LogEndOffset(), logStart: f.p.LocalLogStartOffset(), epoch: f.epoch}
}

// fill sets req's session fields and lists the partitions of parts it
// must tell: all of them for a full fetch, else those the leader's
// session does not hold as they are now, and the forgotten ones.
//
// hint, when not nil, holds the only positions of parts whose fetch
// state may have changed since the last fill of the same parts (those
// the last answer named: a follower's log moves only as it applies
// answers), and an incremental fill looks at those alone; nil looks at
// every partition (the fetch loop does so whenever its partitions
// change, and every fullFillEvery, for log starts that retention
// moves).
func (s *fetchSession) fill(req *kmsg.FetchRequest, parts []followed, hint []int) {
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	s.full = s.epoch == 0
	s.forgot = s.forgot[:0]
	// A full fetch tells every partition; an incremental one only those
	// the session does not hold as they are now (most of a large
	// session's partitions are held as they are: they cost one lookup).
	if s.full {
		s.told = make(map[partKey]sentPart, len(parts))
	} else {
		s.told = map[partKey]sentPart{}
	}
	byTopic := map[string]int{}
	if !s.full && hint != nil {
		for _, i := range hint {
			f := parts[i]
			k := partKey{f.topic, f.index}
			if _, dup := s.told[k]; dup {
				continue
			}
			st := sentOf(f)
			if held, ok := s.held[k]; !ok || held != st {
				s.tell(req, byTopic, k, st)
			}
		}
		return
	}
	present := 0 // parts the session holds (parts are distinct)
	for _, f := range parts {
		k := partKey{f.topic, f.index}
		st := sentOf(f)
		if !s.full {
			held, ok := s.held[k]
			if ok {
				present++
			}
			if ok && held == st {
				continue
			}
		}
		s.tell(req, byTopic, k, st)
	}
	if s.full || present == len(s.held) {
		return // every held partition is still followed
	}
	followedNow := make(map[partKey]struct{}, len(parts))
	for _, f := range parts {
		followedNow[partKey{f.topic, f.index}] = struct{}{}
	}
	forgotten := map[string]int{}
	for k := range s.held {
		if _, ok := followedNow[k]; ok {
			continue
		}
		s.forgot = append(s.forgot, k)
		ft := topicEntry(&req.ForgottenTopics, forgotten, k.topic, func(name string) kmsg.FetchRequestForgottenTopic {
			t := kmsg.NewFetchRequestForgottenTopic()
			t.Topic = name
			return t
		})
		ft.Partitions = append(ft.Partitions, k.index)
	}
}

// tell lists partition k at st in req (byTopic: where req lists each
// topic) and records it as told.
func (s *fetchSession) tell(req *kmsg.FetchRequest, byTopic map[string]int, k partKey, st sentPart) {
	s.told[k] = st
	rt := topicEntry(&req.Topics, byTopic, k.topic, func(name string) kmsg.FetchRequestTopic {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = name
		return t
	})
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = k.index
	rp.CurrentLeaderEpoch = st.epoch
	rp.FetchOffset = st.offset
	rp.LogStartOffset = st.logStart
	rp.PartitionMaxBytes = replicaPartMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
}

// topicEntry returns list's entry for topic, appending one made by mk the
// first time (byTopic holds where each topic sits). The pointer is valid
// until list grows again.
func topicEntry[T any](list *[]T, byTopic map[string]int, topic string, mk func(string) T) *T {
	i, ok := byTopic[topic]
	if !ok {
		*list = append(*list, mk(topic))
		i = len(*list) - 1
		byTopic[topic] = i
	}
	return &(*list)[i]
}

// answered records the leader's answer to the request fill built. It
// returns false when the answer is a session error (the next fetch is
// full; no reason to back off) or another top-level error.
func (s *fetchSession) answered(resp *kmsg.FetchResponse) bool {
	switch resp.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code:
		s.id, s.epoch, s.held = 0, 0, nil
		return false
	default: // INVALID_FETCH_SESSION_EPOCH and anything else
		s.reset()
		return false
	}
	switch {
	case resp.SessionID == 0:
		// The leader holds no session for us (no room, or sessions off):
		// fetches stay full; each asks for a session again.
		s.id, s.epoch, s.held = 0, 0, nil
	case s.full:
		s.id, s.epoch, s.held = resp.SessionID, 1, s.told
	case resp.SessionID != s.id:
		s.reset()
	default:
		for k, st := range s.told {
			s.held[k] = st
		}
		for _, k := range s.forgot {
			delete(s.held, k)
		}
		if s.epoch == math.MaxInt32 {
			s.epoch = 1 // the leader wraps the same way
		} else {
			s.epoch++
		}
	}
	s.told = nil
	return true
}

// reset makes the next fetch full; naming the old session in it (with
// epoch 0) closes it on the leader.
func (s *fetchSession) reset() {
	s.epoch, s.held, s.told = 0, nil, nil
}
