package broker

// ACL enforcement per request. Resources a principal may not touch are
// taken out of the request before its handler runs and answered with the
// matching *_AUTHORIZATION_FAILED code afterwards, so handlers stay
// unaware of ACLs. Metadata lists only the topics the principal may
// describe.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

var (
	errTopicAuthz   = kerr.TopicAuthorizationFailed.Code
	errGroupAuthz   = kerr.GroupAuthorizationFailed.Code
	errClusterAuthz = kerr.ClusterAuthorizationFailed.Code
	errTxnAuthz     = kerr.TransactionalIDAuthorizationFailed.Code
)

// dispatchAuthorized is dispatch with ACLs enforced.
func (b *Broker) dispatchAuthorized(cc *clientConn, req kmsg.Request, p *pending) bool {
	deny, fix := b.authorizeRequest(cc, req)
	if deny != nil {
		p.resp = deny
		return true
	}
	if !b.dispatch(cc, req, p) {
		return false
	}
	if fix != nil {
		switch {
		case p.resp != nil:
			fix(p.resp)
		case p.wait != nil:
			wait := p.wait
			p.wait = func() kmsg.Response {
				r := wait()
				if r != nil {
					fix(r)
				}
				return r
			}
		}
	}
	return true
}

// filter keeps the elements ok accepts, in place, and returns the others.
func filter[T any](s *[]T, ok func(*T) bool) (denied []T) {
	kept := (*s)[:0]
	for _, v := range *s {
		if ok(&v) {
			kept = append(kept, v)
		} else {
			denied = append(denied, v)
		}
	}
	*s = kept
	return denied
}

// authorizeRequest returns either a complete answer denying req, or a fix
// to apply to the handler's response (nil when nothing was taken out).
func (b *Broker) authorizeRequest(cc *clientConn, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	can := func(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
		return b.allowed(cc, op, rt, name)
	}
	cluster := func(op kmsg.ACLOperation) bool { return can(op, resCluster, clusterName) }
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		txnDenied := r.TransactionID != nil && !can(opWrite, resTxnID, *r.TransactionID)
		denied := filter(&r.Topics, func(t *kmsg.ProduceRequestTopic) bool { return !txnDenied && can(opWrite, resTopic, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		code := errTopicAuthz
		if txnDenied {
			code = errTxnAuthz
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.ProduceResponse)
			for _, t := range denied {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = t.Topic
				for _, tp := range t.Partitions {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.BaseOffset = tp.Partition, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}

	case *kmsg.FetchRequest:
		replica := r.ReplicaID >= 0
		var denied []kmsg.FetchRequestTopic
		if replica && !cluster(opClusterAction) {
			denied, r.Topics = r.Topics, nil
		} else if !replica {
			denied = filter(&r.Topics, func(t *kmsg.FetchRequestTopic) bool { return can(opRead, resTopic, t.Topic) })
		}
		if len(denied) == 0 {
			return nil, nil
		}
		fix := func(resp kmsg.Response) {
			rr := resp.(*kmsg.FetchResponse)
			for _, t := range denied {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, tp := range t.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode = tp.Partition, errTopicAuthz
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}
		if len(r.Topics) == 0 { // nothing left to wait for: answer now, not after MaxWait
			resp := r.ResponseKind().(*kmsg.FetchResponse)
			fix(resp)
			return resp, nil
		}
		return nil, fix

	case *kmsg.ListOffsetsRequest:
		denied := filter(&r.Topics, func(t *kmsg.ListOffsetsRequestTopic) bool { return can(opDescribe, resTopic, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.ListOffsetsResponse)
			for _, t := range denied {
				rt := kmsg.NewListOffsetsResponseTopic()
				rt.Topic = t.Topic
				for _, tp := range t.Partitions {
					rp := kmsg.NewListOffsetsResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.Offset, rp.Timestamp = tp.Partition, errTopicAuthz, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}

	case *kmsg.MetadataRequest:
		return nil, b.authorizeMetadata(cc, r)

	case *kmsg.OffsetCommitRequest:
		if !can(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, tp := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: tp.Partition, ErrorCode: errGroupAuthz})
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		denied := filter(&r.Topics, func(t *kmsg.OffsetCommitRequestTopic) bool { return can(opRead, resTopic, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.OffsetCommitResponse)
			for _, t := range denied {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, tp := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: tp.Partition, ErrorCode: errTopicAuthz})
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}

	case *kmsg.OffsetFetchRequest:
		return b.authorizeOffsetFetch(cc, r)

	case *kmsg.FindCoordinatorRequest:
		rt, code := resGroup, errGroupAuthz
		if r.CoordinatorType == 1 {
			rt, code = resTxnID, errTxnAuthz
		}
		if r.Version < 4 {
			if can(opDescribe, rt, r.CoordinatorKey) {
				return nil, nil
			}
			resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
			return resp, nil
		}
		denied := filter(&r.CoordinatorKeys, func(k *string) bool { return can(opDescribe, rt, *k) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.FindCoordinatorResponse)
			for _, k := range denied {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key, c.NodeID, c.Port, c.ErrorCode = k, -1, -1, code
				rr.Coordinators = append(rr.Coordinators, c)
			}
		}

	case *kmsg.JoinGroupRequest:
		if !can(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = errGroupAuthz, -1
			return resp, nil
		}
	case *kmsg.SyncGroupRequest:
		if !can(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = errGroupAuthz
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if !can(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = errGroupAuthz
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if !can(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = errGroupAuthz
			return resp, nil
		}
	case *kmsg.OffsetDeleteRequest:
		if !can(opDelete, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = errGroupAuthz
			return resp, nil
		}
		denied := filter(&r.Topics, func(t *kmsg.OffsetDeleteRequestTopic) bool { return can(opRead, resTopic, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.OffsetDeleteResponse)
			for _, t := range denied {
				rt := kmsg.NewOffsetDeleteResponseTopic()
				rt.Topic = t.Topic
				for _, tp := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: tp.Partition, ErrorCode: errTopicAuthz})
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}

	case *kmsg.DescribeGroupsRequest:
		denied := filter(&r.Groups, func(g *string) bool { return can(opDescribe, resGroup, *g) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.DescribeGroupsResponse)
			for _, g := range denied {
				rg := kmsg.NewDescribeGroupsResponseGroup()
				rg.Group, rg.ErrorCode = g, errGroupAuthz
				rr.Groups = append(rr.Groups, rg)
			}
		}

	case *kmsg.ListGroupsRequest:
		if cluster(opDescribe) {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.ListGroupsResponse)
			filter(&rr.Groups, func(g *kmsg.ListGroupsResponseGroup) bool { return can(opDescribe, resGroup, g.Group) })
		}

	case *kmsg.DeleteGroupsRequest:
		denied := filter(&r.Groups, func(g *string) bool { return can(opDelete, resGroup, *g) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.DeleteGroupsResponse)
			for _, g := range denied {
				rr.Groups = append(rr.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: errGroupAuthz})
			}
		}

	case *kmsg.CreateTopicsRequest:
		if cluster(opCreate) {
			return nil, nil
		}
		denied := filter(&r.Topics, func(t *kmsg.CreateTopicsRequestTopic) bool { return can(opCreate, resTopic, t.Topic) })
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

	case *kmsg.DeleteTopicsRequest:
		deniedNames := filter(&r.TopicNames, func(n *string) bool { return can(opDelete, resTopic, *n) })
		deniedTopics := filter(&r.Topics, func(t *kmsg.DeleteTopicsRequestTopic) bool {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			} else if n, ok := b.topicNameByID(t.TopicID); ok {
				name = n
			} else {
				return true // unknown id: the handler answers UNKNOWN_TOPIC_ID
			}
			return can(opDelete, resTopic, name)
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

	case *kmsg.DeleteRecordsRequest:
		denied := filter(&r.Topics, func(t *kmsg.DeleteRecordsRequestTopic) bool { return can(opDelete, resTopic, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.DeleteRecordsResponse)
			for _, t := range denied {
				rt := kmsg.NewDeleteRecordsResponseTopic()
				rt.Topic = t.Topic
				for _, tp := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsResponseTopicPartition{Partition: tp.Partition, LowWatermark: -1, ErrorCode: errTopicAuthz})
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}

	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if r.TransactionalID != nil {
			if !can(opWrite, resTxnID, *r.TransactionalID) {
				resp.ErrorCode = errTxnAuthz
				return resp, nil
			}
		} else if !cluster(opIdempotentWrite) && !b.mayWriteSomeTopic(cc) {
			// KIP-679: WRITE on any topic allows idempotence.
			resp.ErrorCode = errClusterAuthz
			return resp, nil
		}

	case *kmsg.OffsetForLeaderEpochRequest:
		var denied []kmsg.OffsetForLeaderEpochRequestTopic
		if r.ReplicaID >= 0 {
			if !cluster(opClusterAction) {
				denied, r.Topics = r.Topics, nil
			}
		} else {
			denied = filter(&r.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) bool { return can(opDescribe, resTopic, t.Topic) })
		}
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.OffsetForLeaderEpochResponse)
			for _, t := range denied {
				rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
				rt.Topic = t.Topic
				for _, tp := range t.Partitions {
					rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = tp.Partition, errTopicAuthz, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				rr.Topics = append(rr.Topics, rt)
			}
		}

	case *kmsg.DescribeConfigsRequest:
		denied := filter(&r.Resources, func(res *kmsg.DescribeConfigsRequestResource) bool {
			return b.configAllowed(cc, opDescribeConfigs, res.ResourceType, res.ResourceName)
		})
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.DescribeConfigsResponse)
			for _, res := range denied {
				rr.Resources = append(rr.Resources, kmsg.DescribeConfigsResponseResource{ErrorCode: configAuthzCode(res.ResourceType), ResourceType: res.ResourceType, ResourceName: res.ResourceName})
			}
		}

	case *kmsg.AlterConfigsRequest:
		denied := filter(&r.Resources, func(res *kmsg.AlterConfigsRequestResource) bool {
			return b.configAllowed(cc, opAlterConfigs, res.ResourceType, res.ResourceName)
		})
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.AlterConfigsResponse)
			for _, res := range denied {
				rr.Resources = append(rr.Resources, kmsg.AlterConfigsResponseResource{ErrorCode: configAuthzCode(res.ResourceType), ResourceType: res.ResourceType, ResourceName: res.ResourceName})
			}
		}

	case *kmsg.IncrementalAlterConfigsRequest:
		denied := filter(&r.Resources, func(res *kmsg.IncrementalAlterConfigsRequestResource) bool {
			return b.configAllowed(cc, opAlterConfigs, res.ResourceType, res.ResourceName)
		})
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.IncrementalAlterConfigsResponse)
			for _, res := range denied {
				rr.Resources = append(rr.Resources, kmsg.IncrementalAlterConfigsResponseResource{ErrorCode: configAuthzCode(res.ResourceType), ResourceType: res.ResourceType, ResourceName: res.ResourceName})
			}
		}

	case *kmsg.CreatePartitionsRequest:
		denied := filter(&r.Topics, func(t *kmsg.CreatePartitionsRequestTopic) bool { return can(opAlter, resTopic, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.CreatePartitionsResponse)
			for _, t := range denied {
				rr.Topics = append(rr.Topics, kmsg.CreatePartitionsResponseTopic{Topic: t.Topic, ErrorCode: errTopicAuthz})
			}
		}

	case *kmsg.ElectLeadersRequest:
		if !cluster(opAlter) {
			resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
			resp.ErrorCode = errClusterAuthz
			for _, t := range r.Topics {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewElectLeadersResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, errClusterAuthz
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		if !cluster(opAlter) {
			resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
			resp.ErrorCode = errClusterAuthz
			return resp, nil
		}
	case *kmsg.ListPartitionReassignmentsRequest:
		if !cluster(opDescribe) {
			resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
			resp.ErrorCode = errClusterAuthz
			return resp, nil
		}
	case *kmsg.DescribeClusterRequest:
		if !cluster(opDescribe) {
			resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
			resp.ErrorCode = errClusterAuthz
			return resp, nil
		}
	}
	// ApiVersions, SASL, ACL and SCRAM admin requests check in their
	// handlers.
	return nil, nil
}

// authorizeMetadata hides topics the principal may not describe and keeps
// it from auto-creating topics it may not create.
func (b *Broker) authorizeMetadata(cc *clientConn, r *kmsg.MetadataRequest) func(kmsg.Response) {
	can := func(op kmsg.ACLOperation, name string) bool { return b.allowed(cc, op, resTopic, name) }
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		return func(resp kmsg.Response) {
			rr := resp.(*kmsg.MetadataResponse)
			filter(&rr.Topics, func(t *kmsg.MetadataResponseTopic) bool { return t.Topic != nil && can(opDescribe, *t.Topic) })
		}
	}
	createCluster := b.allowed(cc, opCreate, resCluster, clusterName)
	var denied, unknown []kmsg.MetadataRequestTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else if n, ok := b.topicNameByID(t.TopicID); ok {
			name = n
		} else {
			kept = append(kept, t) // unknown id: UNKNOWN_TOPIC_ID
			continue
		}
		switch {
		case !can(opDescribe, name):
			denied = append(denied, t)
		case b.cat.Snapshot().Topic(name) == nil && !createCluster && !can(opCreate, name):
			unknown = append(unknown, t) // exists for nobody: no auto-creation
		default:
			kept = append(kept, t)
		}
	}
	r.Topics = kept
	dropAll := r.Version == 0 && len(kept) == 0 // v0: an empty list means every topic
	if len(r.Topics) == 0 && r.Version > 0 {
		r.Topics = []kmsg.MetadataRequestTopic{} // not nil: that would mean all topics
	}
	if len(denied)+len(unknown) == 0 {
		return nil
	}
	return func(resp kmsg.Response) {
		rr := resp.(*kmsg.MetadataResponse)
		if dropAll {
			rr.Topics = rr.Topics[:0]
		}
		add := func(ts []kmsg.MetadataRequestTopic, code int16) {
			for _, t := range ts {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID, mt.ErrorCode = t.Topic, t.TopicID, code
				rr.Topics = append(rr.Topics, mt)
			}
		}
		add(denied, errTopicAuthz)
		add(unknown, kerr.UnknownTopicOrPartition.Code)
	}
}

// authorizeOffsetFetch checks DESCRIBE on the groups and hides or refuses
// topics the principal may not describe.
func (b *Broker) authorizeOffsetFetch(cc *clientConn, r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	can := func(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
		return b.allowed(cc, op, rt, name)
	}
	if r.Version < 8 {
		if !can(opDescribe, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = errGroupAuthz
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errGroupAuthz
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		listed := r.Topics != nil
		return nil, func(resp kmsg.Response) {
			rr := resp.(*kmsg.OffsetFetchResponse)
			if !listed {
				filter(&rr.Topics, func(t *kmsg.OffsetFetchResponseTopic) bool { return can(opDescribe, resTopic, t.Topic) })
				return
			}
			for i := range rr.Topics {
				if t := &rr.Topics[i]; !can(opDescribe, resTopic, t.Topic) {
					for j := range t.Partitions {
						t.Partitions[j].Offset, t.Partitions[j].Metadata, t.Partitions[j].ErrorCode = -1, nil, errTopicAuthz
					}
				}
			}
		}
	}
	denied := filter(&r.Groups, func(g *kmsg.OffsetFetchRequestGroup) bool { return can(opDescribe, resGroup, g.Group) })
	listed := map[string]bool{}
	for _, g := range r.Groups {
		listed[g.Group] = g.Topics != nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.OffsetFetchResponse)
		for i := range rr.Groups {
			g := &rr.Groups[i]
			if !listed[g.Group] {
				filter(&g.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) bool { return can(opDescribe, resTopic, t.Topic) })
				continue
			}
			for j := range g.Topics {
				if t := &g.Topics[j]; !can(opDescribe, resTopic, t.Topic) {
					for k := range t.Partitions {
						t.Partitions[k].Offset, t.Partitions[k].Metadata, t.Partitions[k].ErrorCode = -1, nil, errTopicAuthz
					}
				}
			}
		}
		for _, g := range denied {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, errGroupAuthz
			rr.Groups = append(rr.Groups, rg)
		}
	}
}

// configAllowed checks a config operation: topics by name, brokers as the
// cluster.
func (b *Broker) configAllowed(cc *clientConn, op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) bool {
	if rt == kmsg.ConfigResourceTypeTopic {
		return b.allowed(cc, op, resTopic, name)
	}
	return b.allowed(cc, op, resCluster, clusterName)
}

func configAuthzCode(rt kmsg.ConfigResourceType) int16 {
	if rt == kmsg.ConfigResourceTypeTopic {
		return errTopicAuthz
	}
	return errClusterAuthz
}

// mayWriteSomeTopic reports whether the principal holds an ALLOW for WRITE
// (or ALL) on some topic pattern, for idempotent producers (KIP-679).
func (b *Broker) mayWriteSomeTopic(cc *clientConn) bool {
	return b.authz == nil || b.authz.AnyAllows(cc.sec.Principal(), cc.sec.Host(), opWrite, resTopic)
}

// topicNameByID resolves a topic id.
func (b *Broker) topicNameByID(id [16]byte) (string, bool) {
	if ts := b.cat.Snapshot().TopicByID(metastore.TopicID(id)); ts != nil {
		return ts.Meta.Name, true
	}
	return "", false
}
