package broker

// ListPartitionReassignments, version 0 (KIP-455; flexible): the
// partitions with a reassignment in progress, all of them when Topics is
// null. Read from the metastore, so every broker answers alike.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(46, 0, 0, answer(handleListPartitionReassignments), authorizeListPartitionReassignments)
}

func handleListPartitionReassignments(b *Broker, cc *clientConn, req *kmsg.ListPartitionReassignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	want := map[string][]int32{} // nil slice: every partition
	var names []string
	if req.Topics == nil {
		topics, err := b.meta.Topics(ctx)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp
		}
		for _, t := range topics {
			want[t.Name] = nil
			names = append(names, t.Name)
		}
	} else {
		for _, rt := range req.Topics {
			if _, ok := want[rt.Topic]; !ok {
				names = append(names, rt.Topic)
			}
			want[rt.Topic] = append(want[rt.Topic], rt.Partitions...)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		t, err := b.meta.Topic(ctx, name)
		if err != nil {
			continue // unknown topics are left out, as Kafka does
		}
		states, err := b.meta.Partitions(ctx, t.ID)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp
		}
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = name
		for _, st := range states {
			if !st.Reassigning() || (want[name] != nil && !slices.Contains(want[name], st.Partition)) {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = st.Partition
			rp.Replicas = slices.Clone(st.Replicas)
			rp.AddingReplicas = slices.Clone(st.AddingReplicas)
			rp.RemovingReplicas = slices.Clone(st.RemovingReplicas)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

// authorizeListPartitionReassignments is the ACL rule of ListPartitionReassignments.
func authorizeListPartitionReassignments(a access, r *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.cluster(opDescribe) {
		resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode = errClusterAuthz
		return resp, nil
	}
	return nil, nil
}
