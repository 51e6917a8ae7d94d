package termsessions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions/screen"
	"github.com/dshrun/dsh/internal/syncbuf"
)

// A program that sets margins for a larger screen than its terminal has
// since become (DECSLRM, DECSTBM), then scrolls and edits inside them:
// the emulator fed in the terminal's reader goroutine once indexed past
// the screen on that, taking the host down. The host stays up, the screen
// shows the output, and the next command in the same terminal works.
func TestMarginsPastTheScreenKeepTheHostUp(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "agent", OpenRequest{Cols: 120, Rows: 40})
	f.readToPrompt(t, "agent", in.ID, "")
	if _, err := f.m.Resize("agent", in.ID, 40, 10); err != nil {
		t.Fatal(err)
	}
	f.send(t, "agent", in.ID, `printf '\e[?69h\e[1;120s\e[1;40r\e[L\e[M\e[@\e[5S\e[5T'; seq 1 30; printf '\e[r\e[?69l\e[10;1H'; echo do''ne`)
	shown := f.readScreenToPrompt(t, "agent", in.ID, "done")
	f.send(t, "agent", in.ID, "echo af''ter")
	shown += f.readScreenToPrompt(t, "agent", in.ID, "after")
	if !strings.Contains(shown, "\n30\n") || !strings.Contains(shown, "\nafter\n") || strings.Contains(shown, "[terminal:") {
		t.Fatalf("the screen showed:\n%s", shown)
	}
}

// readScreenToPrompt reads session id until its output holds want and
// then ends at the prompt, and returns what the reads' looks at the
// screen showed: the unread lines, then the viewport, of each.
func (f *fixture) readScreenToPrompt(t *testing.T, owner, id, want string) string {
	t.Helper()
	var data, shown strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), receiveWithin)
	defer cancel()
	for ctx.Err() == nil {
		out, err := f.m.ReadScreen(ctx, owner, id, time.Second, 100000)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		data.Write(out.Data)
		shown.WriteString(out.Screen.Unread.Text + out.Screen.Viewport + "\n")
		if out.AtPrompt && strings.Contains(data.String(), want) {
			return shown.String()
		}
	}
	t.Fatalf("session %s: no %q then a prompt in %q", id, want, data.String())
	return ""
}

// A reset of a session's screen is logged at warn, naming the session.
func TestScreenResetIsLogged(t *testing.T) {
	var logs syncbuf.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	logReset(log, "t1-000000000001")(screen.Failure{Op: "write", Panic: "index out of range", Stack: []byte("goroutine 7 [running]:")})
	if l := logs.String(); !strings.Contains(l, "[WARN]") || !strings.Contains(l, "session=t1-000000000001") || !strings.Contains(l, "during=write") || !strings.Contains(l, `panic="index out of range"`) || !strings.Contains(l, "goroutine 7") {
		t.Fatalf("logged: %s", l)
	}
}

// The screen hook: attached as the session opens, before any read, with
// the terminal to observe; told of resizes; closed with the session.
func TestScreenHook(t *testing.T) {
	scr := &fakeScreen{}
	f := newFixture(t, func(c *Config) {
		c.Attach = func(id string, term *procs.Terminal) Screen {
			term.Observe(&scr.out)
			scr.id = id
			return scr
		}
	})
	in := f.open(t, "agent", OpenRequest{})
	if scr.id != in.ID {
		t.Fatalf("attached to %q", scr.id)
	}
	f.readToPrompt(t, "agent", in.ID, "")
	f.send(t, "agent", in.ID, "echo sc''reen")
	f.readToPrompt(t, "agent", in.ID, "screen")
	if _, err := f.m.Resize("agent", in.ID, 120, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Resize("agent", in.ID, 0, 40); !errors.Is(err, terminals.ErrInvalid) {
		t.Fatalf("a resize out of range: %v", err)
	}
	if _, err := f.m.CloseSession(context.Background(), "agent", in.ID); err != nil {
		t.Fatal(err)
	}
	scr.mu.Lock()
	defer scr.mu.Unlock()
	if !strings.Contains(scr.out.String(), prompt+"echo sc''reen") || !strings.Contains(scr.out.String(), "screen\r\n") || scr.size != [2]int{120, 40} || !scr.closed {
		t.Fatalf("the screen: %q %v %v", scr.out.String(), scr.size, scr.closed)
	}
}

type fakeScreen struct {
	out    syncbuf.Buffer
	id     string
	mu     sync.Mutex
	size   [2]int
	closed bool
}

func (s *fakeScreen) Resize(c, r int) { s.mu.Lock(); s.size = [2]int{c, r}; s.mu.Unlock() }
func (s *fakeScreen) Close() error    { s.mu.Lock(); s.closed = true; s.mu.Unlock(); return nil }
