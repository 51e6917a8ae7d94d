package outputv1_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/output/outputv1"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
)

// A shared message now, by its name in testdata/contracts-before.binpb
// (the subprocess, jobs and shell contracts as they were when each
// declared its own Collected, LimitHit and sandbox facts), and the message
// that stands for it now.
type carrierCase struct {
	before string
	now    func() proto.Message
}

// The messages that carry a stream's collected output.
var collectedCarriers = []carrierCase{
	{"dsh.subprocess.v1.Collected", func() proto.Message { return &outputv1.Collected{} }},
	{"dsh.subprocess.v1.Result", func() proto.Message { return &subprocessv1.Result{} }},
	{"dsh.subprocess.v1.ReadResponse", func() proto.Message { return &subprocessv1.ReadResponse{} }},
	{"dsh.jobs.v1.Collected", func() proto.Message { return &outputv1.Collected{} }},
	{"dsh.jobs.v1.JobRead", func() proto.Message { return &jobsv1.JobRead{} }},
	{"dsh.shell.v1.Collected", func() proto.Message { return &outputv1.Collected{} }},
	{"dsh.shell.v1.RunResult", func() proto.Message { return &shellv1.RunResult{} }},
	{"dsh.shell.v1.ProcessRead", func() proto.Message { return &shellv1.ProcessRead{} }},
}

// The messages that carry the limits a command's tree hit or the sandbox
// facts of a run, and every message of the three contracts that holds one.
var factCarriers = []carrierCase{
	{"dsh.subprocess.v1.LimitHit", func() proto.Message { return &outputv1.LimitHit{} }},
	{"dsh.subprocess.v1.Result", func() proto.Message { return &subprocessv1.Result{} }},
	{"dsh.subprocess.v1.ReadResponse", func() proto.Message { return &subprocessv1.ReadResponse{} }},
	{"dsh.jobs.v1.LimitHit", func() proto.Message { return &outputv1.LimitHit{} }},
	{"dsh.jobs.v1.Sandbox", func() proto.Message { return &outputv1.SandboxInfo{} }},
	{"dsh.jobs.v1.Job", func() proto.Message { return &jobsv1.Job{} }},
	{"dsh.jobs.v1.JobRead", func() proto.Message { return &jobsv1.JobRead{} }},
	{"dsh.jobs.v1.ListResponse", func() proto.Message { return &jobsv1.ListResponse{} }},
	{"dsh.shell.v1.LimitHit", func() proto.Message { return &outputv1.LimitHit{} }},
	{"dsh.shell.v1.SandboxInfo", func() proto.Message { return &outputv1.SandboxInfo{} }},
	{"dsh.shell.v1.RunResult", func() proto.Message { return &shellv1.RunResult{} }},
	{"dsh.shell.v1.StartResponse", func() proto.Message { return &shellv1.StartResponse{} }},
	{"dsh.shell.v1.ProcessRead", func() proto.Message { return &shellv1.ProcessRead{} }},
	{"dsh.shell.v1.ProcessState", func() proto.Message { return &shellv1.ProcessState{} }},
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// Every message that carries collected output encodes, every field set,
// to the bytes it did when each contract declared its own Collected
// (testdata/collected-wire.golden), and each side reads the other's bytes
// to the same values with nothing left unknown: a plugin built against
// either definition talks to one built against the other.
func TestCollectedWireUnchanged(t *testing.T) {
	wireUnchanged(t, "collected-wire", collectedCarriers)
}

// Likewise every message that carries a limit hit or sandbox facts, to the
// bytes of when each contract declared its own (testdata/facts-wire.golden).
func TestFactsWireUnchanged(t *testing.T) {
	wireUnchanged(t, "facts-wire", factCarriers)
}

// wireUnchanged checks carriers against testdata/<name>.golden and the
// definitions before.
func wireUnchanged(t *testing.T, name string, carriers []carrierCase) {
	t.Helper()
	before := contractsBefore(t)
	var text strings.Builder
	for _, c := range carriers {
		now := c.now()
		fill(t, now.ProtoReflect(), messageBefore(t, before, c.before))
		b, err := deterministic.Marshal(now)
		if err != nil {
			t.Fatalf("%s: %v", c.before, err)
		}
		fmt.Fprintf(&text, "%s %x\n", c.before, b)

		// Now's bytes, read with the definition before.
		old := dynamicpb.NewMessage(messageBefore(t, before, c.before))
		if err := proto.Unmarshal(b, old); err != nil {
			t.Fatalf("%s before cannot read the bytes now: %v", c.before, err)
		}
		noUnknown(t, c.before+" before", old.ProtoReflect())
		sameValues(t, c.before, old, now)
	}
	golden.Check(t, name, text.String())

	// The golden bytes (written with the definitions before), read now.
	for msg, b := range goldenBytes(t, name, len(carriers)) {
		c := carrier(t, name, carriers, msg)
		now := c.now()
		if err := proto.Unmarshal(b, now); err != nil {
			t.Fatalf("%s now cannot read the bytes before: %v", msg, err)
		}
		noUnknown(t, msg+" now", now.ProtoReflect())
		want := c.now()
		fill(t, want.ProtoReflect(), messageBefore(t, before, msg))
		if !proto.Equal(now, want) {
			t.Fatalf("%s: the bytes before read now as\n%v\nwant\n%v", msg, now, want)
		}
		old := dynamicpb.NewMessage(messageBefore(t, before, msg))
		if err := proto.Unmarshal(b, old); err != nil {
			t.Fatal(err)
		}
		sameValues(t, msg, old, now)
	}
}

func carrier(t *testing.T, golden string, carriers []carrierCase, name string) carrierCase {
	t.Helper()
	for _, c := range carriers {
		if c.before == name {
			return c
		}
	}
	t.Fatalf("testdata/%s.golden names %s, which no carrier is", golden, name)
	panic("unreachable")
}

func contractsBefore(t *testing.T) *protoregistry.Files {
	t.Helper()
	raw, err := os.ReadFile("testdata/contracts-before.binpb")
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		t.Fatalf("testdata/contracts-before.binpb: %v", err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatalf("testdata/contracts-before.binpb: %v", err)
	}
	return files
}

func messageBefore(t *testing.T, files *protoregistry.Files, name string) protoreflect.MessageDescriptor {
	t.Helper()
	d, err := files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatalf("testdata/contracts-before.binpb: %s: %v", name, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		t.Fatalf("testdata/contracts-before.binpb: %s is no message", name)
	}
	return md
}

// goldenBytes are the bytes of testdata/<name>.golden, by message; it
// holds n messages.
func goldenBytes(t *testing.T, name string, n int) map[string][]byte {
	t.Helper()
	path := "testdata/" + name + ".golden"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		msg, h, ok := strings.Cut(line, " ")
		b, err := hex.DecodeString(h)
		if !ok || err != nil {
			t.Fatalf("%s:%d: want a message name and hex bytes", path, i+1)
		}
		out[msg] = b
	}
	if len(out) != n {
		t.Fatalf("%s holds %d messages, want %d", path, len(out), n)
	}
	return out
}

// sameValues fails unless old and now hold the same values field by field
// (the names of fields are the same in both; those of messages are not,
// and JSON does not carry them).
func sameValues(t *testing.T, name string, old, now proto.Message) {
	t.Helper()
	o, err := protojson.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	n, err := protojson.Marshal(now)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o, n) {
		t.Fatalf("%s: before and now read different values:\nbefore %s\n   now %s", name, o, n)
	}
}

// noUnknown fails if m or a message in it kept fields it does not know.
func noUnknown(t *testing.T, name string, m protoreflect.Message) {
	t.Helper()
	if len(m.GetUnknown()) > 0 {
		t.Fatalf("%s: %s kept unknown fields %x", name, m.Descriptor().FullName(), m.GetUnknown())
	}
	m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case f.IsMap():
		case f.IsList() && f.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				noUnknown(t, name, v.List().Get(i).Message())
			}
		case f.Message() != nil:
			noUnknown(t, name, v.Message())
		}
		return true
	})
}

// fill sets every field of m that its definition before (was) also has,
// recursively, to a value that depends only on the field's name and
// number, so that a message and its twin of another definition fill
// alike. Fields added since are left unset: they are new, not moved.
func fill(t *testing.T, m protoreflect.Message, was protoreflect.MessageDescriptor) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		old := was.Fields().ByNumber(f.Number())
		if old == nil {
			continue
		}
		switch {
		case f.IsMap():
			m.Mutable(f).Map().Set(scalar(t, f.MapKey()).MapKey(), scalar(t, f.MapValue()))
		case f.IsList() && f.Message() != nil:
			l := m.Mutable(f).List()
			e := l.NewElement()
			fill(t, e.Message(), old.Message())
			l.Append(e)
		case f.IsList():
			m.Mutable(f).List().Append(scalar(t, f))
		case f.Message() != nil:
			fill(t, m.Mutable(f).Message(), old.Message())
		default:
			m.Set(f, scalar(t, f))
		}
	}
}

func scalar(t *testing.T, f protoreflect.FieldDescriptor) protoreflect.Value {
	t.Helper()
	n := int64(f.Number())*1000 + int64(len(f.Name()))
	switch f.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(n)
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", f.Name(), f.Number()))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprintf("%s\n%d", f.Name(), f.Number())))
	case protoreflect.EnumKind:
		vs := f.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(vs.Len() - 1).Number())
	}
	t.Fatalf("field %s: kind %v not covered here", f.FullName(), f.Kind())
	return protoreflect.Value{}
}
