package group

// ConsumerGroupDescribe (KIP-848): the consumer groups coordinated here,
// their epochs, members and assignments.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeAssignment lists s with topic ids and names.
func describeAssignment(s partSet, view TopicView) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, tp := range toStored(s, false) {
		at := kmsg.NewAssignmentTopicPartition()
		at.TopicID, at.Partitions = tp.Topic, tp.Partitions
		if t, ok := view.TopicByID(tp.Topic); ok {
			at.Topic = t.Name
		}
		a.TopicPartitions = append(a.TopicPartitions, at)
	}
	return a
}

// ConsumerDescribe handles ConsumerGroupDescribe.
func (c *Coordinator) ConsumerDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = name
		if !validGroupID(name) {
			dg.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g, code := c.acquire(ctx, name)
		if code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if g.cg == nil || !g.exists() {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := fmt.Sprintf("Group %s is not a consumer group.", name)
			if !g.exists() {
				msg = fmt.Sprintf("Group %s not found.", name)
			}
			dg.ErrorMessage = &msg
			g.mu.Unlock()
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		cg := g.cg
		view := c.topics()
		dg.State, dg.Epoch, dg.AssignmentEpoch = cg.stateName(), cg.epoch, cg.assignmentEpoch
		dg.AssignorName = cg.assignor
		if dg.AssignorName == "" {
			dg.AssignorName = c.preferredAssignor(cg)
		}
		for _, m := range cg.sortedMembers() {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.RackID = m.id, strPtr(m.instanceID), strPtr(m.rackID)
			dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.epoch, m.clientID, m.clientHost
			dm.SubscribedTopics = slices.Clone(m.topics)
			if dm.SubscribedTopics == nil {
				dm.SubscribedTopics = []string{}
			}
			dm.SubscribedTopicRegex = strPtr(m.regex)
			owned := partSet{}
			for p, e := range m.assigned {
				owned[p] = e
			}
			for p, e := range m.pending {
				owned[p] = e
			}
			dm.Assignment = describeAssignment(owned, view)
			target := partSet{}
			for t, ps := range m.target {
				for _, p := range ps {
					target[partKey{t, p}] = 0
				}
			}
			dm.TargetAssignment = describeAssignment(target, view)
			dm.MemberType = 1
			if m.usesClassic() {
				dm.MemberType = 0
			}
			dg.Members = append(dg.Members, dm)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
