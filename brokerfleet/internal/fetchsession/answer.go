package fetchsession

import "github.com/twmb/franz-go/pkg/kmsg"

// What an answer tells a session's client, and what it may leave out.

// news reports whether a session must answer rp again: it carries
// records, an error or a preferred read replica, or a high watermark or
// log start offset other than the client was last told.
func (p *Part) news(rp *kmsg.FetchResponseTopicPartition) bool {
	return len(rp.RecordBatches) > 0 || rp.ErrorCode != 0 || rp.PreferredReadReplica >= 0 ||
		rp.HighWatermark != p.toldHWM || rp.LogStartOffset != p.toldStart
}

// News reports whether resp holds anything the client of a session has
// not been told (see Finish), without recording it. It is false for a
// sessionless fetch.
func (f *Fetch) News(resp *kmsg.FetchResponse) bool {
	if f.s == nil {
		return false
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if p := f.s.parts[key{rt.Topic, rp.Partition}]; p != nil && p.news(rp) {
				return true
			}
		}
	}
	return false
}

// Finish records what resp tells the session's client and sets
// resp.SessionID. An incremental fetch's answer leaves out the partitions
// with no news; a full one keeps every partition. Partitions that
// returned records move to the end of the session's order, so the next
// fetch reads the others first (the response's byte limit is shared).
// An error resets what the client was told, so the partition is answered
// again once the error clears. Record sets are not touched (they may be
// written uncopied). f.Parts go back to the session, for its next fetch.
func (f *Fetch) Finish(resp *kmsg.FetchResponse) {
	resp.SessionID = f.Session()
	if f.s == nil {
		return
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	s := f.s
	fed := s.fedSpare[:0]
	topics := resp.Topics[:0]
	for _, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k := key{rt.Topic, rp.Partition}
			p := s.parts[k]
			keep := p == nil || !f.incremental || p.news(rp)
			if p != nil {
				p.toldHWM, p.toldStart = rp.HighWatermark, rp.LogStartOffset
				if rp.ErrorCode != 0 {
					p.toldHWM, p.toldStart = -1, -1
				}
				if len(rp.RecordBatches) > 0 && !p.fed {
					p.fed = true
					fed = append(fed, p)
				}
			}
			if keep {
				parts = append(parts, *rp)
			}
		}
		if len(parts) > 0 {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	resp.Topics = topics
	if len(fed) > 0 && len(fed) < len(s.order) {
		// The fed parts go last, in the order they were answered.
		next := s.orderSpare[:0]
		for _, p := range s.order {
			if !p.fed {
				next = append(next, p)
			}
		}
		clear(s.order)
		s.orderSpare, s.order = s.order[:0], append(next, fed...)
	}
	for _, p := range fed {
		p.fed = false
	}
	clear(fed)
	s.fedSpare = fed[:0]
	s.lastUsed = f.c.opts.Clock.Now()
	if f.Parts != nil {
		clear(f.Parts) // no topic names or quiet notes kept alive by the spare
		s.spare, f.Parts = f.Parts[:0], nil
	}
}
