package subprocess

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/sdk"
)

// fakeTerminals is a Processes with terminals, made of functions.
type fakeTerminals struct {
	fakeProcesses
	spawn  func(context.Context, *TerminalRequest) (*Started, error)
	write  func(context.Context, string, []byte) (bool, error)
	read   func(context.Context, string, time.Duration) (*TerminalOutput, error)
	resize func(context.Context, string, int, int) error
	signal func(context.Context, string, string, TerminalTarget) (*TerminalSignalled, error)
}

func (f *fakeTerminals) SpawnTerminal(ctx context.Context, r *TerminalRequest) (*Started, error) {
	return f.spawn(ctx, r)
}
func (f *fakeTerminals) WriteTerminal(ctx context.Context, id string, b []byte) (bool, error) {
	return f.write(ctx, id, b)
}
func (f *fakeTerminals) ReadTerminal(ctx context.Context, id string, w time.Duration) (*TerminalOutput, error) {
	return f.read(ctx, id, w)
}
func (f *fakeTerminals) ResizeTerminal(ctx context.Context, id string, c, r int) error {
	return f.resize(ctx, id, c, r)
}
func (f *fakeTerminals) SignalTerminal(ctx context.Context, id, s string, tg TerminalTarget) (*TerminalSignalled, error) {
	return f.signal(ctx, id, s, tg)
}

// The terminal half crosses the wire whole: requests and results field
// for field, each kind of error as itself, and an implementation without
// terminals says so.
func TestTerminalAdaptersRoundTrip(t *testing.T) {
	ctx := context.Background()
	code := int32(0)
	var got struct {
		req    *TerminalRequest
		data   string
		wait   time.Duration
		size   [2]int
		target TerminalTarget
	}
	fake := &fakeTerminals{
		spawn: func(_ context.Context, r *TerminalRequest) (*Started, error) {
			if r.Cols > 1000 {
				return nil, Invalid("a terminal of 5000 columns by 24 rows: each must be 1 to 1000")
			}
			got.req = r
			return &Started{Id: "p1", Pid: 42}, nil
		},
		write: func(_ context.Context, id string, b []byte) (bool, error) {
			if id != "p1" {
				return false, NotFound(errors.New(`no process "` + id + `"`))
			}
			got.data = string(b)
			return true, nil
		},
		read: func(_ context.Context, _ string, w time.Duration) (*TerminalOutput, error) {
			got.wait = w
			return &TerminalOutput{Data: []byte("hi\r\n"), Dropped: 7, Total: 11, Status: subprocessv1.Status_STATUS_COMPLETED, ExitCode: &code}, nil
		},
		resize: func(_ context.Context, _ string, c, r int) error {
			got.size = [2]int{c, r}
			return nil
		},
		signal: func(_ context.Context, _, s string, tg TerminalTarget) (*TerminalSignalled, error) {
			if s == "SIGBOGUS" {
				return nil, Invalid(`unknown signal "SIGBOGUS"`)
			}
			got.target = tg
			return &TerminalSignalled{Signalled: true, Pid: 43}, nil
		},
	}
	c := serveFake(t, fake)
	st, err := c.SpawnTerminal(ctx, &TerminalRequest{Argv: []string{"bash", "-i"}, Dir: "/w", Env: map[string]string{"TERM": "xterm"}, Cols: 90, Rows: 20, Confinement: "c1", MaxBufferBytes: 9})
	if err != nil || st.Id != "p1" || st.Pid != 42 {
		t.Fatalf("spawn: %v %v", st, err)
	}
	if r := got.req; r.Dir != "/w" || r.Env["TERM"] != "xterm" || r.Cols != 90 || r.Rows != 20 || r.Confinement != "c1" || r.MaxBufferBytes != 9 {
		t.Errorf("spawn request: %v", r)
	}
	if _, err := c.SpawnTerminal(ctx, &TerminalRequest{Cols: 5000}); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "rpc error") {
		t.Errorf("invalid: %v", err)
	}
	if ok, err := c.WriteTerminal(ctx, "p1", []byte("ls\r")); !ok || err != nil || got.data != "ls\r" {
		t.Errorf("write: %v %v %q", ok, err, got.data)
	}
	if _, err := c.WriteTerminal(ctx, "p2", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("write elsewhere: %v", err)
	}
	if r, err := c.ReadTerminal(ctx, "p1", 1500*time.Millisecond); err != nil || string(r.Data) != "hi\r\n" || r.Dropped != 7 || r.Total != 11 || r.GetExitCode() != 0 || r.ExitCode == nil || got.wait != 1500*time.Millisecond {
		t.Errorf("read: %v %v (wait %v)", r, err, got.wait)
	}
	if err := c.ResizeTerminal(ctx, "p1", 120, 40); err != nil || got.size != [2]int{120, 40} {
		t.Errorf("resize: %v %v", err, got.size)
	}
	if r, err := c.SignalTerminal(ctx, "p1", "SIGINT", TargetMain); err != nil || !r.Signalled || r.Pid != 43 || got.target != TargetMain {
		t.Errorf("signal: %v %v", r, err)
	}
	if _, err := c.SignalTerminal(ctx, "p1", "SIGBOGUS", TargetForeground); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad signal: %v", err)
	}

	// Without terminals.
	plain := serveFake(t, &fakeProcesses{})
	if _, err := plain.SpawnTerminal(ctx, &TerminalRequest{}); !errors.Is(err, sdk.ErrUnimplemented) || !strings.Contains(err.Error(), "holds no terminals") {
		t.Errorf("no terminals: %v", err)
	}
}
