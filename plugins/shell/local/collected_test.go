package local

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/plugins/shell"
)

// The seam's Collected is ctx.subprocess's field for field (names,
// numbers, kinds), and collected carries every field across: the two
// encode to the same bytes.
func TestCollectedIsSubprocessCollected(t *testing.T) {
	src := (&subprocessv1.Collected{}).ProtoReflect().Descriptor().Fields()
	dst := (&shell.Collected{}).ProtoReflect().Descriptor().Fields()
	if src.Len() != dst.Len() {
		t.Fatalf("%d fields in dsh.subprocess.v1.Collected, %d in dsh.shell.v1.Collected", src.Len(), dst.Len())
	}
	c := &subprocessv1.Collected{}
	m := c.ProtoReflect()
	for i := 0; i < src.Len(); i++ {
		f := src.Get(i)
		g := dst.ByName(f.Name())
		if g == nil || g.Number() != f.Number() || g.Kind() != f.Kind() || g.Cardinality() != f.Cardinality() {
			t.Fatalf("field %s (%d, %v) has no twin in dsh.shell.v1.Collected", f.Name(), f.Number(), f.Kind())
		}
		switch n := int64(f.Number()); f.Kind() {
		case protoreflect.BytesKind:
			m.Set(f, protoreflect.ValueOfBytes([]byte{byte(n)}))
		case protoreflect.Int64Kind:
			m.Set(f, protoreflect.ValueOfInt64(n))
		case protoreflect.BoolKind:
			m.Set(f, protoreflect.ValueOfBool(true))
		case protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString(string(f.Name())))
		default:
			t.Fatalf("field %s: kind %v not covered here", f.Name(), f.Kind())
		}
	}
	det := proto.MarshalOptions{Deterministic: true}
	want, err := det.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := det.Marshal(collected(c))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("collected lost fields:\n got %x\nwant %x", got, want)
	}
	if collected(nil) != nil {
		t.Fatal("collected(nil) is not nil")
	}
}
