package broker

import (
	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/group"
	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/metastore"
)

// topicView is the group coordinator's view of the topics: one catalog
// snapshot, numbered so that every new snapshot is a new version.
type topicView struct {
	s   *catalog.Snapshot
	seq int64
}

// topicView returns the view of the current snapshot. Takes b.viewMu
// (leaf).
func (b *Broker) topicView() group.TopicView {
	s := b.cat.Snapshot()
	b.viewMu.Lock()
	if s != b.viewSnap {
		b.viewSnap = s
		b.viewSeq++
	}
	seq := b.viewSeq
	b.viewMu.Unlock()
	return topicView{s: s, seq: seq}
}

func (v topicView) Version() int64 { return v.seq }

func toAssignTopic(t *catalog.Topic) assign.Topic {
	return assign.Topic{ID: t.Meta.ID, Name: t.Meta.Name, Partitions: t.Meta.Partitions}
}

func (v topicView) Topic(name string) (assign.Topic, bool) {
	t := v.s.Topic(name)
	if t == nil {
		return assign.Topic{}, false
	}
	return toAssignTopic(t), true
}

func (v topicView) TopicByID(id metastore.TopicID) (assign.Topic, bool) {
	t := v.s.TopicByID(id)
	if t == nil {
		return assign.Topic{}, false
	}
	return toAssignTopic(t), true
}

func (v topicView) Names() []string {
	ts := v.s.Topics()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Meta.Name
	}
	return out
}
