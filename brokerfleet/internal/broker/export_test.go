package broker

// Test-only views of a broker's state, for the external tests.

// LocalLog returns the log end, high watermark and ISR of this broker's
// replica of a partition (ok is false when it hosts none).
func LocalLog(b *Broker, topic string, idx int32) (leo, hwm int64, isr []int32, ok bool) {
	t := b.cat.Snapshot().Topic(topic)
	if t == nil {
		return 0, 0, nil, false
	}
	_, p, found := t.Partition(idx)
	if !found || p == nil {
		return 0, 0, nil, false
	}
	return p.LogEndOffset(), p.HighWatermark(), p.ISR(), true
}

// HeldRequestBytes is what the broker's queued.max.request.bytes budget
// holds now.
func HeldRequestBytes(b *Broker) int64 { return b.budget.held() }
