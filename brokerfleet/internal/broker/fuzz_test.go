package broker

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadFrame: any byte stream yields frames no larger than the cap, or
// an error; never a panic, and never a buffer much larger than the input.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 1, 2, 3, 4})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0x10, 0, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := readFrame(r, 1<<20)
			if err != nil {
				return
			}
			if len(fr) > len(in) {
				t.Fatalf("frame of %d bytes from %d bytes of input", len(fr), len(in))
			}
		}
	})
}

// FuzzParseRequest: any frame body parses into a request or an error.
func FuzzParseRequest(f *testing.F) {
	for _, k := range apiVersions {
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
		h, req, err := parseRequest(in)
		if err == nil && req != nil && (req.Key() != h.key || req.GetVersion() != h.version) {
			t.Fatalf("request %d v%d decoded as %d v%d", h.key, h.version, req.Key(), req.GetVersion())
		}
	})
}
