package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"testing"
)

func FuzzParseHeader(f *testing.F) {
	f.Add(makeBatch(0, 1, 0, 0, 0))
	f.Add(makeBatch(1<<40, 5, 100, 200, 30))
	f.Add(append(makeBatch(3, 2, 0, 0, 1), makeBatch(5, 1, 0, 0, 1)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		switch {
		case err == nil:
			if h.Magic != 2 || h.Size() < HeaderSize || h.LastOffsetDelta < 0 || h.NumRecords < 0 {
				t.Fatalf("accepted invalid header %+v", h)
			}
		case len(b) < HeaderSize:
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("short input: %v", err)
			}
		case !errors.Is(err, ErrCorrupt):
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		if CheckCRC(b) && (len(b) < HeaderSize || lengthPrefix+int(int32(binary.BigEndian.Uint32(b[offLength:]))) > len(b)) {
			t.Fatal("crc accepted for a batch longer than the input")
		}
		total := 0
		if err := Split(b, func(h Header, batch []byte) error {
			if len(batch) != h.Size() {
				t.Fatalf("batch of %d bytes, header says %d", len(batch), h.Size())
			}
			total += len(batch)
			return nil
		}); err == nil && total != len(b) {
			t.Fatalf("split covered %d of %d bytes", total, len(b))
		}
	})
}

func FuzzDecodeOffsetIndex(f *testing.F) {
	f.Add(encodeOffsetIndex([]offsetEntry{{0, 0}, {3, 4096}}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeOffsetIndex(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeOffsetIndex(entries), b) {
			t.Fatal("re-encoding differs")
		}
		x := segIndex{offsets: entries}
		for _, e := range entries {
			if pos, _ := x.floor(e.rel, math.MaxInt64); pos != int64(e.pos) {
				t.Fatalf("floor(%d) = %d, want %d", e.rel, pos, e.pos)
			}
		}
	})
}

func FuzzDecodeTimeIndex(f *testing.F) {
	f.Add(encodeTimeIndex([]timeEntry{{5, 0}, {10, 3}}))
	f.Add(make([]byte, 13))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeTimeIndex(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeTimeIndex(entries), b) {
			t.Fatal("re-encoding differs")
		}
		x := segIndex{times: entries}
		for _, e := range entries {
			_ = x.timeStart(e.ts)
		}
	})
}

// FuzzRecover opens a log whose only segment file holds arbitrary bytes:
// Open must succeed and keep a valid prefix, and the log must work after.
func FuzzRecover(f *testing.F) {
	valid := append(makeBatch(0, 2, 10, 20, 5), makeBatch(2, 1, 30, 30, 50)...)
	f.Add(valid, false)
	f.Add(append(append([]byte(nil), valid...), 1, 2, 3), true)
	f.Add(valid[:len(valid)-7], false)
	f.Add([]byte("garbage"), true)
	f.Fuzz(func(t *testing.T, data []byte, clean bool) {
		m := NewMemFS()
		if err := m.MkdirAll("d", 0o755); err != nil {
			t.Fatal(err)
		}
		file, err := m.OpenFile("d/00000000000000000000.log", os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.Write(data); err != nil {
			t.Fatal(err)
		}
		if clean { // a clean checkpoint and index files from bytes in data
			_ = writeFileAtomic(m, "d/checkpoint", encodeCheckpoint(checkpoint{clean: true}))
			half := len(data) / 2
			_ = writeFileAtomic(m, "d/00000000000000000000.index", data[:half-half%8])
			_ = writeFileAtomic(m, "d/00000000000000000000.timeindex", data[half:])
		}
		o := Options{FS: m, Dir: "d", IndexIntervalBytes: 16}
		l, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		next := l.NextOffset()
		all, err := l.Read(nil, l.StartOffset(), math.MaxInt32, math.MaxInt64)
		switch {
		case clean && errors.Is(err, ErrCorrupt):
			// After a clean shutdown index files are trusted once they pass
			// the structural checks; garbage ones can point into garbage.
			all = nil
		case err != nil:
			t.Fatal(err)
		case int64(len(all)) != l.Size() || !bytes.HasPrefix(data, all):
			t.Fatalf("read %d bytes, size %d: not a prefix of the file", len(all), l.Size())
		}
		if !clean {
			if err := Split(all, func(_ Header, b []byte) error {
				if !CheckCRC(b) {
					return errors.New("bad crc kept")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Append(makeBatch(next, 1, 0, 0, 3)); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = Open(o)
		if err != nil {
			t.Fatal(err)
		}
		if l.NextOffset() != next+1 {
			t.Fatalf("next offset %d after reopen, want %d", l.NextOffset(), next+1)
		}
		_ = l.Close()
	})
}
