package broker

// DeleteTopics, versions 1-6. v4 is flexible; v5 adds error messages; v6
// names topics by name or by id.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func (b *Broker) handleDeleteTopics(req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
	}
	for _, t := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = t.name, t.id
		name := ""
		if t.name != nil {
			name = *t.name
		} else {
			ts := b.cat.Snapshot().TopicByID(metastore.TopicID(t.id))
			if ts == nil {
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			name = ts.Meta.Name
			st.Topic = &name
		}
		ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
		deleted, err := b.deleteTopic(ctx, name)
		cancel()
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			st.TopicID = deleted.ID
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
