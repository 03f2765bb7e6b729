package broker

// PartitionSize is what one broker stores of a partition: its local log
// and, when it leads a tiered partition, what the partition's manifest
// references in the object store (S3).
type PartitionSize struct {
	Broker     int32 // this broker's id
	Partition  int32
	Leader     bool
	LocalBytes int64
	// Tiered is set when TierBytes and TierSegments are known: the
	// broker leads the partition and has its manifest loaded.
	Tiered       bool
	TierBytes    int64
	TierSegments int
}

// PartitionSizes returns the sizes of the partitions of topic this broker
// hosts, in partition order; false when the topic is unknown here.
func (b *Broker) PartitionSizes(topic string) ([]PartitionSize, bool) {
	snap := b.cat.Snapshot()
	t := snap.Topic(topic)
	if t == nil {
		return nil, false
	}
	var out []PartitionSize
	for i, p := range t.Parts {
		if p == nil {
			continue
		}
		ps := PartitionSize{Broker: snap.Self(), Partition: int32(i), Leader: t.States[i].Leader == snap.Self(), LocalBytes: p.Size()}
		if ps.Leader && b.tier != nil {
			ps.TierBytes, ps.TierSegments, ps.Tiered = b.tier.Stored(t.Meta.ID, int32(i))
		}
		out = append(out, ps)
	}
	return out, true
}
