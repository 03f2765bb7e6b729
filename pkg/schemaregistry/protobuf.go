package schemaregistry

import (
	"context"
	"fmt"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoFormat is PROTOBUF: a .proto file (proto2, proto3 or editions),
// whose references are the files it imports, by import path. The
// google/protobuf well-known types can be imported without a reference.
type protoFormat struct{}

type protoSchema struct{ fd protoreflect.FileDescriptor }

// canonical is the text as given: Confluent's canonical Protobuf text is
// regenerated from the parsed file, which is not reproduced here.
func (protoFormat) canonical(text string, _ bool) (string, error) { return text, nil }

func (protoFormat) parse(text string, deps []dep) (parsed, error) {
	srcs := make(map[string]string, len(deps)+1)
	for _, d := range deps {
		if d.typ != typeProtobuf {
			return nil, fmt.Errorf("reference %q is a %s schema, not PROTOBUF", d.name, d.typ)
		}
		srcs[d.name] = d.text
	}
	name := "schema.proto"
	for i := 1; srcs[name] != ""; i++ {
		name = fmt.Sprintf("schema%d.proto", i)
	}
	srcs[name] = text
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(srcs)}),
		MaxParallelism: 1,
	}
	files, err := c.Compile(context.Background(), name)
	if err != nil {
		return nil, err
	}
	return protoSchema{files[0]}, nil
}
