//go:build linux

package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// StopCalls answers the calls in flight with the plain sentence and what
// their commands printed (one ending on SIGTERM, one that ignores it and is
// SIGKILLed after the grace), refuses the calls that come after, and
// Shutdown kills the jobs before the plugins stop.
func TestStopCallsAnswersThenShutdownKills(t *testing.T) {
	// graceMs: 200. StopCalls waits for the answers up to the grace and
	// half the stop timeout, then cuts them: a generous stop timeout keeps
	// a loaded machine's late answer from being cut (the answers come at
	// once where it is not), since what is checked is that they carry
	// their output.
	h := startTools(t, "host:\n  stopTimeout: 20s\n"+toolsYAML)
	m := fmt.Sprint(830000 + os.Getpid()%99999)
	job := callTool(t, h, "agent", "bash", bashCall("sleep "+m+"1", "run_in_background", true))
	if job.IsError {
		t.Fatalf("job: %s", job.Text)
	}
	type answer struct {
		res *ToolResult
		err error
	}
	call := func(command string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			b, _ := json.Marshal(bashCall(command))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := h.CallTool(ctx, ToolCall{Owner: "agent", Tool: "bash", Arguments: b})
			ch <- answer{res, err}
		}()
		return ch
	}
	plain := call("echo started; sleep " + m + "2")
	stubborn := call("echo started; trap '' TERM; sleep " + m + "3")
	alive := func(s string) bool { return len(testplugins.Matching("sleep "+m+s)) > 0 }
	// The sleep itself, not bash (whose command line carries the marker
	// before it has set its trap).
	sleeping := func(s string) bool {
		for _, p := range testplugins.Matching("sleep " + m + s) {
			if strings.HasSuffix(p, ": sleep "+m+s+" ") {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !(alive("1") && sleeping("2") && sleeping("3")); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the commands never ran")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.ShutdownBound())
	defer cancel()
	h.StopCalls(ctx)
	for name, ch := range map[string]<-chan answer{"SIGTERM": plain, "SIGKILL": stubborn} {
		var a answer
		select {
		case a = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("StopCalls returned with the call ending on %s unanswered", name)
		}
		if a.err != nil {
			t.Fatalf("the call ending on %s: %v", name, a.err)
		}
		want := StoppedText + "\n\nstarted\n[killed by signal: " + name + "]"
		if a.res.Text != want || !a.res.IsError {
			t.Fatalf("the call ending on %s answered %q (isError %v), want %q", name, a.res.Text, a.res.IsError, want)
		}
	}
	if !alive("1") {
		t.Fatal("StopCalls killed the job: only the calls in flight are its to stop")
	}
	late := callTool(t, h, "agent", "bash", bashCall("echo late"))
	if late.Text != RefusedText || !late.IsError {
		t.Fatalf("a call after StopCalls answered %q (isError %v), want %q", late.Text, late.IsError, RefusedText)
	}
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if alive("1") || alive("2") || alive("3") {
		t.Fatalf("alive after Shutdown: %v", testplugins.Matching("sleep "+m))
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("plugins alive after Shutdown: %v", left)
	}
	if _, err := os.Stat(h.RuntimeDir()); !os.IsNotExist(err) {
		t.Fatalf("runtime directory %s still there (%v)", h.RuntimeDir(), err)
	}
}
