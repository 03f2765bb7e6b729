package dlqconsole

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Shown is a key, value or header value made safe to show.
type Shown struct {
	// Encoding says how Data reads: "json" (decoded through the schema
	// registry, or a JSON Schema value), "text" (valid, printable UTF-8),
	// "hex" (anything else), or "null" (no bytes at all).
	Encoding   string `json:"encoding"`
	Data       string `json:"data"`
	Size       int    `json:"size"`                 // bytes on the wire
	SchemaID   int    `json:"schemaId,omitempty"`   // from the Confluent header
	SchemaType string `json:"schemaType,omitempty"` // AVRO, JSON or PROTOBUF
	Note       string `json:"note,omitempty"`       // why it is not decoded, for instance
	Truncated  bool   `json:"truncated,omitempty"`  // Data was cut (in lists)
}

// decoder decodes the payloads of one registered schema.
type decoder struct {
	typ    sr.SchemaType
	avro   avro.Schema
	errMsg string // the schema could not be used
}

// show renders b: through the registry when it has a Confluent header and
// a registry is configured, else as text or hex.
func (c *Console) show(ctx context.Context, b []byte) Shown {
	if b == nil {
		return Shown{Encoding: "null"}
	}
	plain := plainShown(b)
	if len(b) < 5 || b[0] != 0 || c.registry == nil {
		return plain
	}
	id := int(binary.BigEndian.Uint32(b[1:5]))
	d := c.decoderFor(ctx, id)
	if d.errMsg != "" {
		plain.Note = d.errMsg
		return plain
	}
	out := Shown{Size: len(b), SchemaID: id, SchemaType: d.typ.String()}
	payload := b[5:]
	switch d.typ {
	case sr.TypeAvro:
		var v any
		if err := avro.Unmarshal(d.avro, payload, &v); err != nil {
			plain.Note = fmt.Sprintf("schema %d (AVRO) does not decode the value: %v", id, err)
			return plain
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the page escapes; keep the JSON readable
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			plain.Note = fmt.Sprintf("schema %d (AVRO): %v", id, err)
			return plain
		}
		out.Encoding, out.Data = "json", strings.TrimSuffix(buf.String(), "\n")
	case sr.TypeJSON:
		var buf bytes.Buffer
		if err := json.Indent(&buf, payload, "", "  "); err != nil {
			plain.Note = fmt.Sprintf("schema %d (JSON) but the value is not JSON: %v", id, err)
			return plain
		}
		out.Encoding, out.Data = "json", buf.String()
	default:
		out.Encoding, out.Data = "hex", hex.EncodeToString(payload)
		out.Note = fmt.Sprintf("%s values are not decoded; shown is the payload after the 5-byte header (message indexes, then the message)", d.typ)
	}
	return out
}

// plainShown renders b as text when it is valid, printable UTF-8, else hex.
func plainShown(b []byte) Shown {
	if b == nil {
		return Shown{Encoding: "null"}
	}
	if printable(b) {
		return Shown{Encoding: "text", Data: string(b), Size: len(b)}
	}
	return Shown{Encoding: "hex", Data: hex.EncodeToString(b), Size: len(b)}
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}

// decoderFor fetches and parses schema id, caching the answer (failures
// other than "not found" are not cached, so a registry outage heals).
func (c *Console) decoderFor(ctx context.Context, id int) *decoder {
	c.schemaMu.Lock()
	d, ok := c.schemas[id]
	c.schemaMu.Unlock()
	if ok {
		return d
	}
	s, err := c.registry.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			d = &decoder{errMsg: fmt.Sprintf("schema id %d is not in the registry; shown undecoded", id)}
			c.cacheDecoder(id, d)
			return d
		}
		return &decoder{errMsg: fmt.Sprintf("schema registry unavailable (schema id %d): %v; shown undecoded", id, err)}
	}
	d = &decoder{typ: s.Type}
	if s.Type == sr.TypeAvro {
		cache := &avro.SchemaCache{}
		for _, ref := range s.References {
			rs, err := c.registry.SchemaByVersion(ctx, ref.Subject, ref.Version)
			if err != nil {
				return &decoder{errMsg: fmt.Sprintf("schema %d: reference %s version %d: %v; shown undecoded", id, ref.Subject, ref.Version, err)}
			}
			if _, err := avro.ParseWithCache(rs.Schema.Schema, "", cache); err != nil {
				d.errMsg = fmt.Sprintf("schema %d: reference %s: %v; shown undecoded", id, ref.Subject, err)
			}
		}
		if d.errMsg == "" {
			if d.avro, err = avro.ParseWithCache(s.Schema, "", cache); err != nil {
				d.errMsg = fmt.Sprintf("schema %d does not parse as AVRO: %v; shown undecoded", id, err)
			}
		}
	}
	c.cacheDecoder(id, d)
	return d
}

func (c *Console) cacheDecoder(id int, d *decoder) {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	if len(c.schemas) > 10000 {
		clear(c.schemas)
	}
	c.schemas[id] = d
}

// truncate shortens Data for lists.
func (s Shown) truncate(n int) Shown {
	if len(s.Data) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s.Data[cut]) {
		cut--
	}
	s.Data, s.Truncated = s.Data[:cut], true
	return s
}
