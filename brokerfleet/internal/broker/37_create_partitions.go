package broker

// CreatePartitions, versions 0-3. v1 is unchanged; v2 is flexible.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleCreatePartitions(req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if len(rt.Assignment) > 0 {
			err = coded(kerr.InvalidRequest, "manual replica assignment is not supported")
		} else {
			ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
			err = b.createPartitions(ctx, rt.Topic, rt.Count, req.ValidateOnly)
			cancel()
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errCodeOf(err), errorMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
