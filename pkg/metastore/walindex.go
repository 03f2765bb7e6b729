package metastore

// The WAL index of "object" durability: one item per broker node id that
// lists the shares of its WAL objects that partition manifests have not
// absorbed yet, so a flush costs one conditional write whatever the number
// of partitions in it.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

const (
	pkWALIndex     = "walindex" // sk zero-padded node id: that node's WAL index
	walIndexFormat = 1          // first byte of the encoded value
)

// WALEntry is one partition's share of a WAL object, written by a leader
// under LeaderEpoch: the batches [BaseOffset, NextOffset) at [Pos, Pos+Len)
// of Object.
type WALEntry struct {
	Topic        TopicID
	Partition    int32
	LeaderEpoch  int32
	BaseOffset   int64
	NextOffset   int64
	MaxTimestamp int64
	Object       string
	Pos, Len     int64
}

// Ref is the manifest entry that references the share (as a WAL flush
// that wrote the manifest itself would have).
func (e WALEntry) Ref() SegmentRef {
	end := e.Pos + e.Len
	return SegmentRef{BaseOffset: e.BaseOffset, NextOffset: e.NextOffset, LeaderEpoch: e.LeaderEpoch,
		Size: end, MaxTimestamp: e.MaxTimestamp, Object: e.Object, Pos: e.Pos, IndexPos: end}
}

// WALIndex is one node's WAL index. Owner is the incarnation that last
// wrote it; Version fences writers (compare-and-set).
type WALIndex struct {
	Node    int32
	Owner   string
	Entries []WALEntry
	Version int64
}

func walIndexKey(node int32) Key { return Key{PK: pkWALIndex, SK: fmt.Sprintf("%010d", node)} }

// WALIndexes returns every node's WAL index (one Query). An item that does
// not decode fails the read: its entries may hold acknowledged records.
func (m *Meta) WALIndexes(ctx context.Context) ([]WALIndex, error) {
	items, err := m.s.Query(ctx, pkWALIndex, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: WAL indexes: %w", err)
	}
	out := make([]WALIndex, 0, len(items))
	for _, it := range items {
		idx, err := decodeWALIndexItem(it)
		if err != nil {
			return nil, err
		}
		out = append(out, idx)
	}
	return out, nil
}

// WALIndex returns a node's WAL index (empty, Version 0, if none).
func (m *Meta) WALIndex(ctx context.Context, node int32) (WALIndex, error) {
	it, err := m.s.Get(ctx, walIndexKey(node))
	if errors.Is(err, ErrNotFound) {
		return WALIndex{Node: node}, nil
	}
	if err != nil {
		return WALIndex{}, fmt.Errorf("metastore: WAL index of node %d: %w", node, err)
	}
	return decodeWALIndexItem(it)
}

// PutWALIndex writes a node's WAL index if the stored one is still at
// idx.Version (absent for 0), and returns it with its new version. A write
// whose outcome is unknown is read back: if the stored value is this one,
// it succeeded. ErrTooLarge when the entries do not fit in one item.
func (m *Meta) PutWALIndex(ctx context.Context, idx WALIndex) (WALIndex, error) {
	c := IfVersion(idx.Version)
	if idx.Version == 0 {
		c = IfAbsent()
	}
	it, err := m.putSettled(ctx, Item{Key: walIndexKey(idx.Node), Value: EncodeWALIndex(idx)}, c, idx.Version+1)
	if err != nil {
		return idx, fmt.Errorf("metastore: WAL index of node %d: %w", idx.Node, err)
	}
	idx.Version = it.Version
	return idx, nil
}

// DeleteWALIndex removes a node's WAL index at version (a node gone for
// good whose entries no partition needs any more).
func (m *Meta) DeleteWALIndex(ctx context.Context, node int32, version int64) error {
	if err := m.s.Delete(ctx, walIndexKey(node), IfVersion(version)); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("metastore: delete WAL index of node %d: %w", node, err)
	}
	return nil
}

func decodeWALIndexItem(it Item) (WALIndex, error) {
	node, err := strconv.ParseInt(it.SK, 10, 32)
	if err != nil {
		return WALIndex{}, fmt.Errorf("metastore: WAL index key %q: %w", it.SK, err)
	}
	idx, err := DecodeWALIndex(it.Value)
	if err != nil {
		return WALIndex{}, fmt.Errorf("metastore: WAL index of node %d: %w", node, err)
	}
	idx.Node, idx.Version = int32(node), it.Version
	return idx, nil
}

// EncodeWALIndex lays an index out compactly (about 25 bytes an entry):
// a format byte, the owner, the topic ids and object keys the entries
// share, then the entries as varints naming them by position.
func EncodeWALIndex(idx WALIndex) []byte {
	topics, objects := map[TopicID]uint64{}, map[string]uint64{}
	var topicList []TopicID
	var objectList []string
	for _, e := range idx.Entries {
		if _, ok := topics[e.Topic]; !ok {
			topics[e.Topic] = uint64(len(topicList))
			topicList = append(topicList, e.Topic)
		}
		if _, ok := objects[e.Object]; !ok {
			objects[e.Object] = uint64(len(objectList))
			objectList = append(objectList, e.Object)
		}
	}
	b := []byte{walIndexFormat}
	b = appendString(b, idx.Owner)
	b = binary.AppendUvarint(b, uint64(len(topicList)))
	for _, t := range topicList {
		b = append(b, t[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(objectList)))
	for _, o := range objectList {
		b = appendString(b, o)
	}
	b = binary.AppendUvarint(b, uint64(len(idx.Entries)))
	for _, e := range idx.Entries {
		b = binary.AppendUvarint(b, topics[e.Topic])
		b = binary.AppendUvarint(b, uint64(uint32(e.Partition)))
		b = binary.AppendUvarint(b, uint64(uint32(e.LeaderEpoch)))
		b = binary.AppendUvarint(b, objects[e.Object])
		b = binary.AppendUvarint(b, uint64(e.BaseOffset))
		b = binary.AppendUvarint(b, uint64(e.NextOffset-e.BaseOffset))
		b = binary.AppendUvarint(b, uint64(e.Pos))
		b = binary.AppendUvarint(b, uint64(e.Len))
		b = binary.AppendVarint(b, e.MaxTimestamp)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// ErrCorruptWALIndex is returned when a WAL index item does not decode.
var ErrCorruptWALIndex = errors.New("metastore: corrupt WAL index")

// DecodeWALIndex reads what EncodeWALIndex wrote. Malformed input is an
// ErrCorruptWALIndex error, never a panic or an allocation beyond the
// input's size.
func DecodeWALIndex(b []byte) (WALIndex, error) {
	d := walDecoder{b: b}
	if len(b) == 0 || b[0] != walIndexFormat {
		return WALIndex{}, fmt.Errorf("%w: unknown format", ErrCorruptWALIndex)
	}
	d.b = b[1:]
	var idx WALIndex
	idx.Owner = d.str()
	topics := make([]TopicID, d.count(16))
	for i := range topics {
		if len(d.b) < 16 {
			d.fail()
			break
		}
		copy(topics[i][:], d.b[:16])
		d.b = d.b[16:]
	}
	objects := make([]string, d.count(1))
	for i := range objects {
		objects[i] = d.str()
	}
	n := d.count(9)
	if d.err == nil {
		idx.Entries = make([]WALEntry, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		var e WALEntry
		t, p, ep, o := d.uv(), d.uv(), d.uv(), d.uv()
		base, span, pos, ln := d.uv(), d.uv(), d.uv(), d.uv()
		e.MaxTimestamp = d.v()
		if d.err != nil {
			break
		}
		const maxInt = 1<<63 - 1
		if t >= uint64(len(topics)) || o >= uint64(len(objects)) || p > 1<<31-1 || ep > 1<<31-1 ||
			span == 0 || base > maxInt || span > maxInt-base || pos > maxInt || ln > maxInt-pos {
			d.fail()
			break
		}
		e.Topic, e.Object = topics[t], objects[o]
		e.Partition, e.LeaderEpoch = int32(p), int32(ep)
		e.BaseOffset, e.NextOffset, e.Pos, e.Len = int64(base), int64(base+span), int64(pos), int64(ln)
		idx.Entries = append(idx.Entries, e)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail()
	}
	if d.err != nil {
		return WALIndex{}, d.err
	}
	return idx, nil
}

type walDecoder struct {
	b   []byte
	err error
}

func (d *walDecoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or out of range", ErrCorruptWALIndex)
	}
}

func (d *walDecoder) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *walDecoder) v() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length whose elements take at least size bytes each, so
// it cannot exceed what the input holds.
func (d *walDecoder) count(size int) int {
	v := d.uv()
	if d.err != nil {
		return 0
	}
	if v > uint64(len(d.b)/size) {
		d.fail()
		return 0
	}
	return int(v)
}

func (d *walDecoder) str() string {
	n := d.count(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
