package schemaregistry

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf compatibility follows Confluent's ProtobufSchema diff
// (protobuf-provider .../protobuf/diff, documented at
// https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-protobuf.html#protobuf-compatibility-rules
// and built on the Protobuf guide's "Updating A Message Type"). The schema
// whose data is read is the original, the reading one the update; fields
// are matched by number. Incompatible:
//   - the package changed;
//   - a message removed (top-level or nested; map entries do not count);
//   - a field's kind changed between scalar (enums included), message and
//     map;
//   - a scalar moved to another wire-compatible group: {int32, int64,
//     uint32, uint64, bool, enums}, {sint32, sint64}, {string, bytes},
//     {fixed32, sfixed32}, {fixed64, sfixed64}, {float}, {double};
//   - a numeric field's label changed between optional, required and
//     repeated (as in Confluent, a proto3 field without a label has none,
//     so changing it to repeated is not flagged);
//   - a message-typed field now names a message of another name, or the
//     same-named message changed incompatibly;
//   - a required field added or removed;
//   - a oneof member removed unless its whole oneof went;
//   - fields from more than one original oneof or top-level field moved
//     into one oneof.
//
// Compatible: field renames, fields added or removed (renumbering is a
// removal plus an addition, so it is compatible as long as the new number
// is unused), messages and enums added, enums removed or changed, string and
// bytes fields changing label, oneofs added or removed, fields moved out of
// a oneof.
type protoDiff struct {
	msgs []string
	seen map[[2]protoreflect.FullName]bool // message pairs compared
}

func (p protoSchema) canRead(w parsed) []string {
	ws, ok := w.(protoSchema)
	if !ok {
		return []string{"Incompatible because of different schema type"}
	}
	d := &protoDiff{seen: make(map[[2]protoreflect.FullName]bool)}
	d.file(ws.fd, p.fd)
	return d.msgs
}

func (d *protoDiff) add(kind, format string, args ...any) {
	d.msgs = append(d.msgs, fmt.Sprintf("%s: %s", kind, fmt.Sprintf(format, args...)))
}

func (d *protoDiff) file(o, u protoreflect.FileDescriptor) {
	if o.Package() != u.Package() {
		d.add("PACKAGE_CHANGED", "package %q is now %q", o.Package(), u.Package())
	}
	d.messages(o.Messages(), u.Messages())
}

// messages compares the messages declared at one level, by name.
func (d *protoDiff) messages(o, u protoreflect.MessageDescriptors) {
	for i := 0; i < o.Len(); i++ {
		om := o.Get(i)
		if om.IsMapEntry() {
			continue
		}
		um := u.ByName(om.Name())
		if um == nil {
			d.add("MESSAGE_REMOVED", "message %s was removed", om.FullName())
			continue
		}
		d.message(om, um)
	}
}

type protoField struct {
	fd    protoreflect.FieldDescriptor
	oneof string // the real oneof it belongs to, if any
}

func protoFields(m protoreflect.MessageDescriptor) (map[protoreflect.FieldNumber]protoField, map[string]protoreflect.OneofDescriptor) {
	fields := make(map[protoreflect.FieldNumber]protoField)
	oneofs := make(map[string]protoreflect.OneofDescriptor)
	for i := 0; i < m.Fields().Len(); i++ {
		fd := m.Fields().Get(i)
		f := protoField{fd: fd}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			f.oneof = string(od.Name())
			oneofs[f.oneof] = od
		}
		fields[fd.Number()] = f
	}
	return fields, oneofs
}

func (d *protoDiff) message(o, u protoreflect.MessageDescriptor) {
	key := [2]protoreflect.FullName{o.FullName(), u.FullName()}
	if d.seen[key] {
		return
	}
	d.seen[key] = true
	of, oo := protoFields(o)
	uf, uo := protoFields(u)

	// A oneof gone with all its members is a whole deletion (compatible).
	gone := make(map[string]bool)
	for name, od := range oo {
		if uo[name] != nil {
			continue
		}
		survives := false
		for i := 0; i < od.Fields().Len(); i++ {
			if _, ok := uf[od.Fields().Get(i).Number()]; ok {
				survives = true
			}
		}
		if !survives {
			gone[name] = true
		}
	}
	// Fields that were independent must not become mutually exclusive.
	for _, name := range sortedKeys(uo) {
		od := uo[name]
		groups := make(map[string]bool)
		movedIn := 0
		for i := 0; i < od.Fields().Len(); i++ {
			n := od.Fields().Get(i).Number()
			f, ok := of[n]
			switch {
			case !ok:
			case f.oneof != "":
				groups["oneof:"+f.oneof] = true
			default:
				groups[fmt.Sprint("field:", n)] = true
				movedIn++
			}
		}
		if len(groups) > 1 {
			if movedIn > 1 {
				d.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", "%s: fields moved into oneof %s", u.FullName(), name)
			} else {
				d.add("FIELD_MOVED_TO_EXISTING_ONEOF", "%s: a field moved into oneof %s", u.FullName(), name)
			}
		}
	}
	nums := make([]protoreflect.FieldNumber, 0, len(of)+len(uf))
	for n := range of {
		nums = append(nums, n)
	}
	for n := range uf {
		if _, ok := of[n]; !ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	for _, n := range nums {
		ofl, inO := of[n]
		ufl, inU := uf[n]
		switch {
		case !inU && ofl.oneof != "":
			if !gone[ofl.oneof] {
				d.add("ONEOF_FIELD_REMOVED", "%s: field %d (%s) removed from oneof %s", o.FullName(), n, ofl.fd.Name(), ofl.oneof)
			}
		case !inU:
			if ofl.fd.Cardinality() == protoreflect.Required {
				d.add("REQUIRED_FIELD_REMOVED", "%s: required field %d (%s) removed", o.FullName(), n, ofl.fd.Name())
			}
		case !inO:
			if ufl.oneof == "" && ufl.fd.Cardinality() == protoreflect.Required {
				d.add("REQUIRED_FIELD_ADDED", "%s: required field %d (%s) added", u.FullName(), n, ufl.fd.Name())
			}
		default:
			d.field(u.FullName(), ofl.fd, ufl.fd)
		}
	}
	d.messages(o.Messages(), u.Messages())
}

type protoKind int

const (
	protoScalar protoKind = iota
	protoMessage
	protoMap
)

func kindOf(fd protoreflect.FieldDescriptor) protoKind {
	switch {
	case fd.IsMap():
		return protoMap
	case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
		return protoMessage
	}
	return protoScalar
}

// scalarGroup is the group of scalars a field may move within
// (https://protobuf.dev/programming-guides/proto3/#updating, as Confluent
// groups them).
func scalarGroup(k protoreflect.Kind) string {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind,
		protoreflect.BoolKind, protoreflect.EnumKind:
		return "number"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "signed number"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "string or bytes"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	}
	return k.String() // float, double
}

// label is a field's label as written: "" for a field without one (proto3
// implicit presence), which Confluent does not compare.
func label(fd protoreflect.FieldDescriptor) string {
	switch fd.Cardinality() {
	case protoreflect.Repeated:
		return "repeated"
	case protoreflect.Required:
		return "required"
	}
	if fd.HasOptionalKeyword() {
		return "optional"
	}
	return ""
}

func (d *protoDiff) field(msg protoreflect.FullName, o, u protoreflect.FieldDescriptor) {
	where := fmt.Sprintf("%s: field %d (%s)", msg, u.Number(), u.Name())
	d.fieldTypes(where, o, u, label(o), label(u))
}

func (d *protoDiff) fieldTypes(where string, o, u protoreflect.FieldDescriptor, ol, ul string) {
	ok, uk := kindOf(o), kindOf(u)
	if ok != uk {
		d.add("FIELD_KIND_CHANGED", "%s changed kind", where)
		return
	}
	switch ok {
	case protoScalar:
		og, ug := scalarGroup(o.Kind()), scalarGroup(u.Kind())
		if og != ug {
			d.add("FIELD_SCALAR_KIND_CHANGED", "%s changed from %s to %s", where, o.Kind(), u.Kind())
			return
		}
		if ol != "" && ul != "" && ol != ul && og != "string or bytes" {
			d.add("FIELD_NUMERIC_LABEL_CHANGED", "%s changed from %s to %s", where, ol, ul)
		}
	case protoMessage:
		om, um := o.Message(), u.Message()
		if localName(om) != localName(um) {
			d.add("FIELD_NAMED_TYPE_CHANGED", "%s changed type from %s to %s", where, om.FullName(), um.FullName())
			return
		}
		sub := &protoDiff{seen: d.seen}
		sub.message(om, um)
		if len(sub.msgs) > 0 {
			d.msgs = append(d.msgs, sub.msgs...)
			d.add("FIELD_NAMED_TYPE_CHANGED", "%s: message %s changed incompatibly", where, localName(um))
		}
	case protoMap:
		d.fieldTypes(where+" key", o.MapKey(), u.MapKey(), "", "")
		d.fieldTypes(where+" value", o.MapValue(), u.MapValue(), "", "")
	}
}

// localName is a message's name within its package.
func localName(m protoreflect.MessageDescriptor) string {
	pkg := string(m.ParentFile().Package())
	name := string(m.FullName())
	if pkg != "" {
		name = strings.TrimPrefix(name, pkg+".")
	}
	return name
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
