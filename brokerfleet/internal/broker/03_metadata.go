package broker

// Metadata, versions 0-12. v1 adds the controller and "null means all
// topics"; v2 the cluster id; v4 the auto-creation flag; v7 leader epochs;
// v9 is flexible; v10 adds topic ids; v12 allows a null topic name.

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/offsetlog"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/metastore"
)

func init() { register(3, 0, 12, answer(handleMetadata), authorizeMetadata) }

func handleMetadata(b *Broker, cc *clientConn, req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	s := b.cat.Snapshot()
	live := map[int32]bool{}
	for _, cb := range b.clusterBrokers(s) {
		host, port, err := security.SplitHostPort(cb.Endpoint)
		if err != nil {
			continue // a registration without a usable address is not advertised
		}
		live[cb.ID] = true
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = cb.ID, host, port
		if cb.Rack != "" {
			br.Rack = kmsg.StringPtr(cb.Rack)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterID = &b.cfg.ClusterID
	resp.ControllerID = s.Controller()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, ts := range s.Topics() {
			resp.Topics = append(resp.Topics, topicMetadata(ts, live))
		}
		return resp
	}
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var ts *catalog.Topic
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
			ts = s.Topic(name)
		} else {
			ts = s.TopicByID(metastore.TopicID(rt.TopicID))
		}
		if ts == nil && rt.Topic != nil && autoCreate {
			ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
			var err error
			ts, err = b.admin.createTopic(ctx, name, -1, -1, nil, false)
			cancel()
			if errors.Is(err, errTopicExists) {
				ts, err = b.cat.Snapshot().Topic(name), nil
			}
			if err != nil || ts == nil || ts.States == nil { // no States: created, not applied here yet
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
		resp.Topics = append(resp.Topics, topicMetadata(ts, live))
	}
	return resp
}

// topicMetadata describes a topic's partitions: leader, epoch, replicas,
// ISR, and the replicas on brokers that are not live. A partition whose
// leader is not live answers LEADER_NOT_AVAILABLE, so clients retry.
func topicMetadata(ts *catalog.Topic, live map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := ts.Meta.Name
	mt.Topic = &name
	mt.TopicID = ts.Meta.ID
	mt.IsInternal = name == offsetlog.Topic
	for i, st := range ts.States {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = st.Leader
		mp.LeaderEpoch = st.LeaderEpoch
		mp.Replicas = slices.Clone(st.Replicas)
		mp.ISR = slices.Clone(st.ISR)
		for _, r := range st.Replicas {
			if !live[r] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if !live[st.Leader] {
			mp.Leader = -1
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// authorizeMetadata is the ACL rule of Metadata.
func authorizeMetadata(a access, r *kmsg.MetadataRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, authorizeMetadataTopics(a, r)
}
