package broker

// CreateTopics, versions 2-7. v1 adds validate-only; v4 allows -1 for the
// partition count and replication factor (broker defaults); v5 is flexible
// and returns the created topic's configs, partitions and replication
// factor; v7 returns the topic id.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(19, 2, 7, answer(handleCreateTopics), authorizeCreateTopics) }

func handleCreateTopics(b *Broker, cc *clientConn, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		fail := func(err error) {
			st.ErrorCode, st.ErrorMessage = errCodeOf(err), errorMessage(err)
		}
		configs := map[string]string{}
		var err error
		switch {
		case seen[rt.Topic] > 1:
			err = coded(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		case len(rt.ReplicaAssignment) > 0:
			err = coded(kerr.InvalidRequest, "manual replica assignment is not supported; replicas are placed by the cluster")
		}
		for _, c := range rt.Configs {
			if c.Value == nil {
				err = coded(kerr.InvalidConfig, "config %q has a null value", c.Name)
				break
			}
			configs[c.Name] = *c.Value
		}
		if err != nil {
			fail(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
		ts, err := b.admin.createTopic(ctx, rt.Topic, rt.NumPartitions, rt.ReplicationFactor, configs, req.ValidateOnly)
		cancel()
		if err != nil {
			fail(fmt.Errorf("create topic %q: %w", rt.Topic, err))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = ts.Meta.ID
		st.NumPartitions = ts.Meta.Partitions
		st.ReplicationFactor = ts.Meta.ReplicationFactor
		for _, e := range b.defaults.Describe(ts.Meta.Configs) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name = e.Name
			v := e.Value
			c.Value = &v
			c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
			if e.IsDefault {
				c.Source = int8(kmsg.ConfigSourceDefaultConfig)
			}
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !req.ValidateOnly {
		syncIfAny(b, cc, len(resp.Topics), func(i int) int16 { return resp.Topics[i].ErrorCode })
	}
	return resp
}

// authorizeCreateTopics is the ACL rule of CreateTopics.
func authorizeCreateTopics(a access, r *kmsg.CreateTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(opCreate) {
		return nil, nil
	}
	denied := filter(&r.Topics, func(t *kmsg.CreateTopicsRequestTopic) bool { return a.can(opCreate, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range denied {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, errTopicAuthz, -1, -1
			rr.Topics = append(rr.Topics, rt)
		}
	}
}
