package group

// ShareGroupDescribe (KIP-932): a share group's epoch, assignor and
// members with their subscriptions and assignments.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
)

// ShareDescribe handles ShareGroupDescribe.
func (c *Coordinator) ShareDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	view := c.topics()
	for _, name := range req.GroupIDs {
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID = name
		dg.AuthorizedOperations = -2147483648
		fail := func(code int16, msg string) {
			dg.ErrorCode = code
			if msg != "" {
				dg.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, dg)
		}
		if !validGroupID(name) {
			fail(kerr.InvalidGroupID.Code, "")
			continue
		}
		g, code := c.acquire(ctx, name)
		if code != 0 {
			fail(code, "")
			continue
		}
		if g.sg == nil {
			msg := fmt.Sprintf("Group %s not found.", name)
			if g.exists() {
				msg = fmt.Sprintf("Group %s is not a share group.", name)
			}
			g.mu.Unlock()
			fail(kerr.GroupIDNotFound.Code, msg)
			continue
		}
		sg := g.sg
		dg.GroupState, dg.GroupEpoch, dg.AssignmentEpoch, dg.Assignor = sg.stateName(), sg.epoch, sg.epoch, assign.SimpleName
		for _, m := range sg.sortedMembers() {
			dm := kmsg.NewShareGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
			if m.rackID != "" {
				dm.RackID = &m.rackID
			}
			dm.SubscribedTopicNames = append([]string{}, m.topics...)
			dm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
			for _, tp := range targetToStored(m.assigned) {
				t := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				t.TopicID, t.Partitions = tp.Topic, tp.Partitions
				if ti, ok := view.TopicByID(tp.Topic); ok {
					t.Topic = ti.Name
				}
				dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, t)
			}
			dg.Members = append(dg.Members, dm)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
