package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
)

// termdrivesYAML has two dsh-termdrive entries, whose one tool each is
// named by config: term by the schema's default, and toolName.
func termdrivesYAML(toolName string) string {
	return fmt.Sprintf(`
plugins:
  - id: term
    name: terminal-bash
  - id: drive
    name: termdrive
  - id: drive2
    name: termdrive
    config:
      toolName: %s
`, toolName)
}

// A plugin registers the tool its config names and no other; a config
// that renames it reloads onto the new name, and one naming another
// entry's tool is refused before anything changes.
func TestToolNamedByConfig(t *testing.T) {
	h := startHost(t, writeComp(t, termdrivesYAML("term2")))
	for _, name := range []string{"term", "term2"} {
		if _, ok := h.tools.Get(name); !ok {
			t.Fatalf("tool %q is not registered", name)
		}
	}
	b := []byte(`{"op":"list"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "term2", Arguments: b}); err != nil {
		t.Fatalf("term2: %v", err)
	}
	for _, st := range h.Status() {
		if want := map[string]string{"drive": "[term]", "drive2": "[term2]"}[st.ID]; want != "" && fmt.Sprint(st.Tools) != want {
			t.Errorf("status of %s: tools %v, want %s", st.ID, st.Tools, want)
		}
	}

	// drive2 did not declare term, the default its config replaced.
	srv := tools.NewServer(h.tools.For(toolCaller{h.find("drive2").current()}))
	_, err := srv.Register(ctx, &toolsv1.ToolSpec{Name: "term", Description: "d", InputSchema: `{"type":"object"}`})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `did not declare tool "term"`) || !strings.Contains(err.Error(), "[term2]") {
		t.Fatalf("drive2 registering term: %v", err)
	}
	if ti, _ := h.tools.Get("term"); ti.Plugin != "drive" {
		t.Fatalf("term is %s's", ti.Plugin)
	}

	if err := h.ApplyComposition(ctx, writeComp(t, termdrivesYAML("term3"))); err != nil {
		t.Fatalf("renaming: %v", err)
	}
	if _, ok := h.tools.Get("term2"); ok {
		t.Fatal("term2 outlived the config that named it")
	}
	if _, err := h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "term3", Arguments: b}); err != nil {
		t.Fatalf("term3: %v", err)
	}

	next := writeComp(t, termdrivesYAML("term"))
	err = h.ApplyComposition(ctx, next)
	want := fmt.Sprintf(`%s:7:5: plugin "drive2": tool "term" is already registered by plugin "drive" (%s:5:5)`, next.File, next.File)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a collision by config: %v, want %s", err, want)
	}
	if ti, ok := h.tools.Get("term3"); !ok || ti.Plugin != "drive2" {
		t.Fatal("the refused composition changed drive2's tool")
	}
}
