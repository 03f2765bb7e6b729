package broker

// CreatePartitions, versions 0-3. v1 is unchanged; v2 is flexible.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(37, 0, 3, answer(handleCreatePartitions), authorizeCreatePartitions) }

func handleCreatePartitions(b *Broker, cc *clientConn, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if len(rt.Assignment) > 0 {
			err = coded(kerr.InvalidRequest, "manual replica assignment is not supported")
		} else {
			ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
			err = b.admin.createPartitions(ctx, rt.Topic, rt.Count, req.ValidateOnly)
			cancel()
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errCodeOf(err), errorMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !req.ValidateOnly {
		syncIfAny(b, cc, len(resp.Topics), func(i int) int16 { return resp.Topics[i].ErrorCode })
	}
	return resp
}

// authorizeCreatePartitions is the ACL rule of CreatePartitions.
func authorizeCreatePartitions(a access, r *kmsg.CreatePartitionsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Topics, func(t *kmsg.CreatePartitionsRequestTopic) bool { return a.can(opAlter, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range denied {
			rr.Topics = append(rr.Topics, kmsg.CreatePartitionsResponseTopic{Topic: t.Topic, ErrorCode: errTopicAuthz})
		}
	}
}
