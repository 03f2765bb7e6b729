package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Control batches end transactions: a partition leader writes one commit
// or abort marker per transaction that touched the partition. A control
// batch is transactional and control (attributes 0x30), uncompressed, and
// holds one record whose key is the control record key (int16 version 0,
// int16 type: 0 abort, 1 commit) and whose value is the end-transaction
// marker (int16 version 0, int32 coordinator epoch), as in Kafka.

// Control record types.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// Marker is what a control batch says.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// AppendControlBatch appends to dst a control batch holding m, with base
// offset 0 and leader epoch -1 (the appender sets both), timestamp ts
// (Unix milliseconds) and a valid CRC.
func AppendControlBatch(dst []byte, m Marker, ts int64) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	var rec []byte
	rec = append(rec, 0)                        // attributes
	rec = binary.AppendVarint(rec, 0)           // timestamp delta
	rec = binary.AppendVarint(rec, 0)           // offset delta
	rec = binary.AppendVarint(rec, 4)           // key length
	rec = binary.BigEndian.AppendUint16(rec, 0) // key version
	rec = binary.BigEndian.AppendUint16(rec, uint16(typ))
	rec = binary.AppendVarint(rec, 6)           // value length
	rec = binary.BigEndian.AppendUint16(rec, 0) // marker version
	rec = binary.BigEndian.AppendUint32(rec, uint32(m.CoordinatorEpoch))
	rec = binary.AppendVarint(rec, 0) // header count

	start := len(dst)
	be := binary.BigEndian
	dst = be.AppendUint64(dst, 0)          // base offset
	dst = be.AppendUint32(dst, 0)          // batch length, below
	dst = be.AppendUint32(dst, ^uint32(0)) // partition leader epoch -1
	dst = append(dst, 2)                   // magic
	dst = be.AppendUint32(dst, 0)          // CRC, below
	dst = be.AppendUint16(dst, uint16(attrTransactional|attrControl))
	dst = be.AppendUint32(dst, 0)          // last offset delta
	dst = be.AppendUint64(dst, uint64(ts)) // first timestamp
	dst = be.AppendUint64(dst, uint64(ts)) // max timestamp
	dst = be.AppendUint64(dst, uint64(m.ProducerID))
	dst = be.AppendUint16(dst, uint16(m.ProducerEpoch))
	dst = be.AppendUint32(dst, ^uint32(0)) // base sequence -1
	dst = be.AppendUint32(dst, 1)          // one record
	dst = binary.AppendVarint(dst, int64(len(rec)))
	dst = append(dst, rec...)
	b := dst[start:]
	be.PutUint32(b[offLength:], uint32(len(b)-lengthPrefix))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst
}

// ParseControlBatch returns the marker a control batch holds. b must hold
// the whole batch; an uncompressed control batch whose first record does
// not carry a control key of version 0 wraps ErrCorrupt.
func ParseControlBatch(b []byte) (Marker, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Marker{}, err
	}
	if !h.IsControl() || h.Compression() != 0 || h.NumRecords < 1 || h.Size() > len(b) {
		return Marker{}, fmt.Errorf("control batch at %d: not an uncompressed control batch: %w", h.BaseOffset, ErrCorrupt)
	}
	m := Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
	r := b[HeaderSize:h.Size()]
	bad := fmt.Errorf("control batch at %d: malformed control record: %w", h.BaseOffset, ErrCorrupt)
	varint := func() (int64, bool) {
		v, n := binary.Varint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	if _, ok := varint(); !ok || len(r) < 1 { // record length
		return Marker{}, bad
	}
	r = r[1:]                   // attributes
	if _, ok := varint(); !ok { // timestamp delta
		return Marker{}, bad
	}
	if _, ok := varint(); !ok { // offset delta
		return Marker{}, bad
	}
	klen, ok := varint()
	if !ok || klen < 4 || int64(len(r)) < klen {
		return Marker{}, bad
	}
	key := r[:klen]
	r = r[klen:]
	if binary.BigEndian.Uint16(key) != 0 {
		return Marker{}, bad
	}
	switch int16(binary.BigEndian.Uint16(key[2:])) {
	case ControlCommit:
		m.Commit = true
	case ControlAbort:
	default:
		return Marker{}, bad
	}
	if vlen, ok := varint(); ok && vlen >= 6 && int64(len(r)) >= vlen {
		m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r[2:6]))
	}
	return m, nil
}
