package broker

// Metadata, versions 0-12. v1 adds the controller and "null means all
// topics"; v2 the cluster id; v4 the auto-creation flag; v7 leader epochs;
// v9 is flexible; v10 adds topic ids; v12 allows a null topic name.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/metastore"
)

func (b *Broker) handleMetadata(req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	host, port := b.Addr()
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = b.cfg.NodeID, host, port
	if b.cfg.Rack != "" {
		br.Rack = &b.cfg.Rack
	}
	resp.Brokers = []kmsg.MetadataResponseBroker{br}
	resp.ClusterID = &b.cfg.ClusterID
	resp.ControllerID = b.cfg.NodeID

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		b.mu.RLock()
		states := make([]*topicState, 0, len(b.topics))
		for _, ts := range b.topics {
			states = append(states, ts)
		}
		b.mu.RUnlock()
		for _, ts := range states {
			resp.Topics = append(resp.Topics, b.topicMetadata(ts))
		}
		return resp
	}
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var ts *topicState
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
			ts = b.lookup(name)
		} else {
			b.mu.RLock()
			ts = b.byID[metastore.TopicID(rt.TopicID)]
			b.mu.RUnlock()
		}
		if ts == nil && rt.Topic != nil && autoCreate {
			ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
			var err error
			ts, err = b.createTopic(ctx, name, -1, -1, nil, false)
			cancel()
			if errors.Is(err, errTopicExists) {
				ts, err = b.lookup(name), nil
			}
			if err != nil || ts == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
				mt.ErrorCode = errorCode(err)
				if err == nil || errors.Is(err, metastore.ErrUnavailable) {
					// Retriable: the client asks again.
					mt.ErrorCode = kerr.LeaderNotAvailable.Code
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if ts == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			switch {
			case rt.Topic == nil:
				mt.ErrorCode = kerr.UnknownTopicID.Code
			case topic.ValidateName(name) != nil:
				mt.ErrorCode = kerr.InvalidTopicException.Code
			default:
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(ts))
	}
	return resp
}

func (b *Broker) topicMetadata(ts *topicState) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := ts.meta.Name
	mt.Topic = &name
	mt.TopicID = ts.meta.ID
	for _, p := range ts.parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index()
		mp.Leader = b.cfg.NodeID
		mp.LeaderEpoch = p.LeaderEpoch()
		mp.Replicas = []int32{b.cfg.NodeID}
		mp.ISR = []int32{b.cfg.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
