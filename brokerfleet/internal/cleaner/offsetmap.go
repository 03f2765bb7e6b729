package cleaner

import "hash/maphash"

// slotBytes is the memory of one offset map entry.
const slotBytes = 24

// loadFactor is how full the map may get (Kafka's
// log.cleaner.io.buffer.load.factor default).
const loadFactor = 0.9

// offsetMap maps keys to the offset of their latest record in the dirty
// part of a log, in a fixed number of slots: keys are stored as 128-bit
// hashes (two 64-bit maphash sums under independent seeds), so memory is
// bounded whatever the keys' sizes. Two keys collide with probability
// about n²/2¹²⁹ for n keys: negligible, and a collision could only make
// the older key's latest record look superseded. Linear probing; not safe
// for concurrent use.
type offsetMap struct {
	slots     []slot
	mask      uint64
	used, max int
	maxSlots  int // the memory bound, in slots (a power of two)
	seed1     maphash.Seed
	seed2     maphash.Seed
}

type slot struct {
	h1, h2 uint64
	off    int64 // offset + 1; 0: empty
}

// minSlots is where a map starts; it doubles as keys come, up to maxBytes.
const minSlots = 1024

// newOffsetMap returns an empty map that grows up to maxBytes of slots
// (at least minSlots).
func newOffsetMap(maxBytes int64) *offsetMap {
	maxSlots := minSlots
	for int64(maxSlots)*2*slotBytes <= maxBytes {
		maxSlots *= 2
	}
	m := &offsetMap{maxSlots: maxSlots, seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed()}
	m.resize(minSlots)
	return m
}

func (m *offsetMap) resize(n int) {
	old := m.slots
	m.slots, m.mask, m.max = make([]slot, n), uint64(n-1), int(float64(n)*loadFactor)
	for _, s := range old {
		if s.off != 0 {
			i := s.h1 & m.mask
			for m.slots[i].off != 0 {
				i = (i + 1) & m.mask
			}
			m.slots[i] = s
		}
	}
}

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
}

// put records offset as the latest of key. It returns false, storing
// nothing, when key is new and the map is full at its memory bound.
func (m *offsetMap) put(key []byte, offset int64) bool {
	h1, h2 := m.hash(key)
	for i := h1 & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.off == 0 {
			if m.used >= m.max {
				if len(m.slots) >= m.maxSlots {
					return false
				}
				m.resize(2 * len(m.slots))
				return m.put(key, offset)
			}
			*s = slot{h1: h1, h2: h2, off: offset + 1}
			m.used++
			return true
		}
		if s.h1 == h1 && s.h2 == h2 {
			s.off = offset + 1
			return true
		}
	}
}

// get returns the latest offset of key, if the map has it.
func (m *offsetMap) get(key []byte) (int64, bool) {
	h1, h2 := m.hash(key)
	for i := h1 & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.off == 0 {
			return 0, false
		}
		if s.h1 == h1 && s.h2 == h2 {
			return s.off - 1, true
		}
	}
}

// bytes is the memory the slots take.
func (m *offsetMap) bytes() int64 { return int64(len(m.slots)) * slotBytes }
