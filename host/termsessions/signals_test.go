//go:build linux

package termsessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/testplugins"
)

// Signals: SIGINT interrupts the foreground command and not the shell;
// a SIGKILL for the shell is refused in favour of close (at its prompt
// too, where it is the foreground); a SIGKILL of a foreground command is
// not; only the five signals are taken; a signal with a send comes first.
func TestSignals(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	term := f.m.sessions[in.ID].Terminal()
	// The command is in the foreground once the group's leader runs it
	// (before its exec it is the shell's child, which ignores SIGINT).
	waitForeground := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if g, err := term.Foreground(); err == nil && g != term.Pid() {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", g)); strings.HasPrefix(string(b), "sleep\x00") {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the command never came to the foreground")
			}
		}
	}
	f.send(t, "agent", in.ID, "sleep 4243")
	waitForeground()
	if ok, _, err := f.m.Signal("agent", in.ID, "SIGINT", false); !ok || err != nil {
		t.Fatalf("SIGINT: %v %v", ok, err)
	}
	f.readToPrompt(t, "agent", in.ID, "")
	f.send(t, "agent", in.ID, "echo st''atus=$?")
	f.readToPrompt(t, "agent", in.ID, "status=130")
	if len(testplugins.Matching("sleep 4243")) > 0 {
		t.Fatal("the interrupted sleep lives")
	}
	for _, shell := range []bool{true, false} {
		if _, _, err := f.m.Signal("agent", in.ID, "SIGKILL", shell); !errors.Is(err, terminals.ErrInvalid) || !strings.Contains(err.Error(), "close the session") {
			t.Errorf("SIGKILL for the shell (target shell %v): %v", shell, err)
		}
	}
	if _, _, err := f.m.Signal("agent", in.ID, "SIGUSR1", false); !errors.Is(err, terminals.ErrInvalid) || !strings.Contains(err.Error(), "SIGINT, SIGTERM, SIGKILL, SIGTSTP, SIGHUP") {
		t.Errorf("a signal off the list: %v", err)
	}
	f.send(t, "agent", in.ID, "sleep 4244")
	waitForeground()
	if ok, _, err := f.m.Signal("agent", in.ID, "SIGKILL", false); !ok || err != nil {
		t.Fatalf("SIGKILL of the foreground sleep: %v %v", ok, err)
	}
	f.readToPrompt(t, "agent", in.ID, "")
	// A signal with the send: SIGINT for what runs, then the next line.
	f.send(t, "agent", in.ID, "sleep 4245")
	waitForeground()
	if _, err := f.m.Send(context.Background(), "agent", in.ID, "echo af''ter", true, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	f.readToPrompt(t, "agent", in.ID, "after")
	if st, _, _ := term.State(); st != procs.Running {
		t.Fatal("the shell died")
	}
}
