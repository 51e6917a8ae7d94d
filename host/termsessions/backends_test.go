//go:build linux

package termsessions

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/terminals"
)

// Backends by name: another plugin cannot take a name; another process of
// the same plugin entry takes it over, and gives it back if its scope goes
// while the first still serves; an open names one, or takes the only one.
func TestBackends(t *testing.T) {
	f := newFixture(t, nil)
	other := &testCaller{id: "other", slot: f.serve(t, f.b)}
	err := f.m.RegisterBackend(other, "bash", "bash")
	if !errors.Is(err, terminals.ErrDuplicateBackend) || !strings.Contains(err.Error(), `plugin "term"`) || !strings.Contains(err.Error(), `plugin "other"`) {
		t.Fatalf("another plugin's name: %v", err)
	}
	if err := f.m.RegisterBackend(other, "pwsh", "pwsh"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{}); !errors.Is(err, terminals.ErrNoBackend) || !strings.Contains(err.Error(), "bash, pwsh") {
		t.Fatalf("an open naming none of two: %v", err)
	}
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{Backend: "zsh"}); !errors.Is(err, terminals.ErrNoBackend) {
		t.Fatalf("an open naming none registered: %v", err)
	}
	if in := f.open(t, "agent", OpenRequest{Backend: "pwsh"}); in.Backend != "pwsh" {
		t.Fatalf("opened with %q", in.Backend)
	}
	other.dispose(t)
	if got := f.m.Backends(); len(got) != 1 || got[0] != "bash" {
		t.Fatalf("after the plugin went: %v", got)
	}
	// A reload of "term": its new scope takes bash over, and gives it
	// back when it goes while the old one serves.
	reloaded := &testCaller{id: "term", slot: f.serve(t, f.b)}
	if err := f.m.RegisterBackend(reloaded, "bash", "bash"); err != nil {
		t.Fatal(err)
	}
	if f.m.backends["bash"].slot != reloaded.slot {
		t.Fatal("not taken over")
	}
	reloaded.dispose(t)
	if b := f.m.backends["bash"]; b == nil || b.slot != f.c.slot {
		t.Fatal("not given back")
	}
	// Gone with its only scope: nothing to open with.
	f.c.dispose(t)
	if _, err := f.m.Open(context.Background(), "agent", OpenRequest{}); !errors.Is(err, terminals.ErrNoBackend) {
		t.Fatalf("an open with no backend: %v", err)
	}
	if err := f.m.RegisterBackend(&testCaller{id: "x"}, "bash", "bash"); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("a caller that serves nothing: %v", err)
	}
	if err := f.m.RegisterBackend(other, "no spaces", "bash"); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("a bad name: %v", err)
	}
}

// A session opened through a backend goes on when the backend goes, and
// a send then says the backend is not there; reads, signals and close
// need no backend.
func TestSessionOutlivesItsBackend(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	f.c.dispose(t)
	if _, err := f.m.Send(context.Background(), "agent", in.ID, "echo x", true, ""); !errors.Is(err, terminals.ErrNoBackend) {
		t.Fatalf("a send without its backend: %v", err)
	}
	// Its successor (the same entry, a new process) types again.
	again := &testCaller{id: "term", slot: f.serve(t, f.b)}
	if err := f.m.RegisterBackend(again, "bash", "bash"); err != nil {
		t.Fatal(err)
	}
	f.send(t, "agent", in.ID, "echo ba''ck")
	f.readToPrompt(t, "agent", in.ID, "back")
}
