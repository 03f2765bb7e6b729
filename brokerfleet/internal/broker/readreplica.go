package broker

import (
	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

// Where a consumer should read a partition this broker leads (KIP-392).

// readReplica is a follower a consumer may be sent to: live, in the ISR,
// reachable on the consumer's listener, with the range of offsets its
// fetches say it holds.
type readReplica struct {
	id               int32
	rack             string
	logStart, logEnd int64 // logStart -1: unknown
}

// preferredReadReplica returns the replica a consumer in rack should read
// a partition from, fetching at offset, or -1 for this broker, the leader.
func preferredReadReplica(b *Broker, cc *clientConn, s *catalog.Snapshot, topic string, idx int32, p *partition.Partition, rack string, offset int64) int32 {
	if rack == b.cfg.Rack {
		return -1
	}
	t := s.Topic(topic)
	if t == nil {
		return -1
	}
	st, _, ok := t.Partition(idx)
	if !ok {
		return -1
	}
	listener := ""
	if cc.sec != nil {
		listener = cc.sec.Listener().Name
	}
	var cands []readReplica
	for _, id := range st.ISR {
		br, live := s.Peers()[id]
		if id == s.Self() || !live || br.Rack != rack {
			continue
		}
		if _, ok := b.cfg.Security.Endpoint(br, listener); !ok {
			continue // the consumer could not reach it
		}
		if start, end, ok := p.ReplicaRange(id); ok {
			cands = append(cands, readReplica{id: id, rack: br.Rack, logStart: start, logEnd: end})
		}
	}
	return selectReadReplica(rack, b.cfg.Rack, offset, cands)
}

// selectReadReplica is the rack-aware choice (Kafka's
// RackAwareReplicaSelector): the leader (-1) when the client sends no
// rack, the leader is in its rack, or no candidate in its rack holds
// offset; else, of those, the one whose log ends furthest (the lowest id
// on a tie).
func selectReadReplica(clientRack, leaderRack string, offset int64, cands []readReplica) int32 {
	if clientRack == "" || clientRack == leaderRack {
		return -1
	}
	best := readReplica{id: -1}
	for _, c := range cands {
		if c.rack != clientRack || c.logEnd < offset || c.logStart > offset {
			continue
		}
		if best.id < 0 || c.logEnd > best.logEnd || (c.logEnd == best.logEnd && c.id < best.id) {
			best = c
		}
	}
	return best.id
}
