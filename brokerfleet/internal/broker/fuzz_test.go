package broker

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stratamq/strata/brokerfleet/internal/wire"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzParseRequest: any frame body parses into a request or an error.
func FuzzParseRequest(f *testing.F) {
	for _, k := range apiVersions() {
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			req := kmsg.RequestForKey(k.ApiKey)
			req.SetVersion(v)
			hdr := binary.BigEndian.AppendUint16(nil, uint16(k.ApiKey))
			hdr = binary.BigEndian.AppendUint16(hdr, uint16(v))
			hdr = binary.BigEndian.AppendUint32(hdr, 1)
			hdr = binary.BigEndian.AppendUint16(hdr, 0xffff)
			if req.IsFlexible() {
				hdr = append(hdr, 0)
			}
			f.Add(req.AppendTo(hdr))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, req, err := wire.ParseRequest(in, supportedVersions)
		if err == nil && req != nil && (req.Key() != h.Key || req.GetVersion() != h.Version) {
			t.Fatalf("request %d v%d decoded as %d v%d", h.Key, h.Version, req.Key(), req.GetVersion())
		}
	})
}

// TestHostileArrayLengthIsRejectedCheaply parses a Produce request whose
// partition count fits the bytes left but not the minimum size of a
// partition: it is refused before the claimed elements are allocated.
func TestHostileArrayLengthIsRejectedCheaply(t *testing.T) {
	const n = 1 << 20
	frame := binary.BigEndian.AppendUint16(nil, 0) // Produce
	frame = binary.BigEndian.AppendUint16(frame, 7)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)    // client id
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)    // transactional id
	frame = binary.BigEndian.AppendUint16(frame, 1)         // acks
	frame = binary.BigEndian.AppendUint32(frame, 1000)      // timeout
	frame = binary.BigEndian.AppendUint32(frame, 1)         // one topic
	frame = binary.BigEndian.AppendUint16(frame, 1)         // name length
	frame = append(frame, 't')                              // name
	frame = binary.BigEndian.AppendUint32(frame, uint32(n)) // partitions
	frame = append(frame, make([]byte, n)...)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, req, err := wire.ParseRequest(frame, supportedVersions)
	runtime.ReadMemStats(&after)
	if err == nil || req != nil {
		t.Fatalf("hostile produce request accepted: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("parsing a %d-byte frame allocated %d bytes", len(frame), grew)
	}
}
