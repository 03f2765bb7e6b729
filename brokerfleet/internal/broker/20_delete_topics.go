package broker

// DeleteTopics, versions 1-6. v4 is flexible; v5 adds error messages; v6
// names topics by name or by id.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() { register(20, 1, 6, answer(handleDeleteTopics), authorizeDeleteTopics) }

func handleDeleteTopics(b *Broker, cc *clientConn, req *kmsg.DeleteTopicsRequest) kmsg.Response {
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
		deleted, err := b.admin.deleteTopic(ctx, name)
		cancel()
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			st.TopicID = deleted.ID
		}
		resp.Topics = append(resp.Topics, st)
	}
	syncIfAny(b, cc, len(resp.Topics), func(i int) int16 { return resp.Topics[i].ErrorCode })
	return resp
}

// authorizeDeleteTopics is the ACL rule of DeleteTopics.
func authorizeDeleteTopics(a access, r *kmsg.DeleteTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	deniedNames := filter(&r.TopicNames, func(n *string) bool { return a.can(opDelete, resTopic, *n) })
	deniedTopics := filter(&r.Topics, func(t *kmsg.DeleteTopicsRequestTopic) bool {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else if n, ok := a.topicName(t.TopicID); ok {
			name = n
		} else {
			return true // unknown id: the handler answers UNKNOWN_TOPIC_ID
		}
		return a.can(opDelete, resTopic, name)
	})
	if len(deniedNames)+len(deniedTopics) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DeleteTopicsResponse)
		for _, n := range deniedNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(n), errTopicAuthz
			rr.Topics = append(rr.Topics, rt)
		}
		for _, t := range deniedTopics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, errTopicAuthz
			rr.Topics = append(rr.Topics, rt)
		}
	}
}
