package consent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/seam"
)

// deskPolicy asks every command, on channels.
func deskPolicy(wait time.Duration, channels ...string) *Policy {
	return NewPolicy(&composition.Approval{Otherwise: "ask", AskTimeout: wait, Channels: channels}, hclog.NewNullLogger())
}

func served(p *Policy, a Asker) *Service {
	return &Service{Policy: p, Caller: "tools", Serving: func(context.Context) (Call, bool) {
		return Call{Served: seam.Served{Owner: "mcp-0123"}, Asker: a}, true
	}}
}

// waitQuestion waits (bounded) for one question on the desk.
func waitQuestion(t *testing.T, d *Desk) Question {
	t.Helper()
	changes, stop := d.Changes()
	defer stop()
	deadline := time.After(10 * time.Second)
	for {
		if qs := d.Questions(); len(qs) == 1 {
			return qs[0]
		} else if len(qs) > 1 {
			t.Fatalf("questions %+v", qs)
		}
		select {
		case <-changes:
		case <-deadline:
			t.Fatal("no question on the desk")
		}
	}
}

type decided struct {
	d   *approval.Decision
	err error
}

func approveAsync(s *Service, ctx context.Context, req *approval.Request) chan decided {
	out := make(chan decided, 1)
	go func() {
		d, err := s.Approve(ctx, req)
		out <- decided{d, err}
	}()
	return out
}

func result(t *testing.T, ch chan decided) *approval.Decision {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.d
	case <-time.After(20 * time.Second):
		t.Fatal("no decision")
	}
	return nil
}

var escalate = &approval.Request{Kind: approval.KindNetworkEscalation, Tool: "bash", Command: "curl https://example.org", Hosts: []string{"example.org"}, Reason: "fetch the page"}

// With the console listed, a question waits at the console with what it
// asks, and the console's answer decides, as the user's; the question
// then leaves the desk and cannot be answered twice.
func TestConsoleAnswers(t *testing.T) {
	p := deskPolicy(time.Minute, "console")
	ch := approveAsync(served(p, nil), context.Background(), escalate)
	q := waitQuestion(t, p.Desk())
	if q.Owner != "mcp-0123" || q.Kind != approval.KindNetworkEscalation || q.Command != escalate.Command || q.Justification != "fetch the page" ||
		len(q.Hosts) != 1 || q.Hosts[0] != "example.org" || q.ID == "" {
		t.Fatalf("question %+v", q)
	}
	b, err := json.Marshal(q)
	if err != nil || !strings.Contains(string(b), `"hosts":["example.org"],"justification":"fetch the page","askedAt":"`) || !strings.Contains(string(b), `"kind":"network_escalation"`) {
		t.Fatalf("JSON %s %v", b, err)
	}
	if left := q.ExpiresAt.Sub(q.AskedAt); left < 59*time.Second || left > time.Minute {
		t.Fatalf("expires %v after it was asked, want the askTimeout", left)
	}
	if err := p.Desk().Answer(q.ID, true); err != nil {
		t.Fatal(err)
	}
	d := result(t, ch)
	if !d.Approved || d.DecidedBy != approval.ByUser || !strings.Contains(d.Reason, "console") {
		t.Fatalf("decision %+v", d)
	}
	if qs := p.Desk().Questions(); len(qs) != 0 {
		t.Fatalf("answered question still waiting: %+v", qs)
	}
	if err := p.Desk().Answer(q.ID, false); !errors.Is(err, ErrNoQuestion) {
		t.Fatalf("second answer: %v", err)
	}
}

// A client that cannot ask its user (no elicitation) leaves the question
// to the console; the console's denial is the user's.
func TestConsoleAnswersWhenClientCannot(t *testing.T) {
	p := deskPolicy(time.Minute, "client", "console")
	asked := make(chan struct{}, 1)
	cannot := askerFunc(func(context.Context, string, *approval.Request) (*approval.Decision, error) {
		asked <- struct{}{}
		return nil, errors.New("the MCP client does not support elicitation")
	})
	ch := approveAsync(served(p, cannot), context.Background(), escalate)
	q := waitQuestion(t, p.Desk())
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not asked")
	}
	select {
	case r := <-ch:
		t.Fatalf("decided without the console: %+v", r.d)
	case <-time.After(100 * time.Millisecond):
	}
	if err := p.Desk().Answer(q.ID, false); err != nil {
		t.Fatal(err)
	}
	if d := result(t, ch); d.Approved || d.DecidedBy != approval.ByUser || d.Reason != "denied by the user at the console" {
		t.Fatalf("decision %+v", d)
	}
}

// The first answer wins: the client's user first takes the question off
// the desk; the console first withdraws the client's question.
func TestFirstAnswerWins(t *testing.T) {
	p := deskPolicy(time.Minute, "client", "console")
	release := make(chan struct{})
	client := askerFunc(func(ctx context.Context, _ string, _ *approval.Request) (*approval.Decision, error) {
		select {
		case <-release:
			return &approval.Decision{Approved: true, Reason: "approved by the user", DecidedBy: approval.ByUser}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ch := approveAsync(served(p, client), context.Background(), escalate)
	q := waitQuestion(t, p.Desk())
	close(release)
	if d := result(t, ch); !d.Approved || d.Reason != "approved by the user" {
		t.Fatalf("client's answer: %+v", d)
	}
	if err := p.Desk().Answer(q.ID, false); !errors.Is(err, ErrNoQuestion) {
		t.Fatalf("console after the client: %v", err)
	}
	if qs := p.Desk().Questions(); len(qs) != 0 {
		t.Fatalf("still waiting: %+v", qs)
	}

	withdrawn := make(chan struct{})
	silent := askerFunc(func(ctx context.Context, _ string, _ *approval.Request) (*approval.Decision, error) {
		<-ctx.Done()
		close(withdrawn)
		return nil, ctx.Err()
	})
	ch = approveAsync(served(p, silent), context.Background(), escalate)
	q = waitQuestion(t, p.Desk())
	if err := p.Desk().Answer(q.ID, true); err != nil {
		t.Fatal(err)
	}
	if d := result(t, ch); !d.Approved || d.Reason != "approved by the user at the console" {
		t.Fatalf("console's answer: %+v", d)
	}
	select {
	case <-withdrawn:
	case <-time.After(10 * time.Second):
		t.Fatal("the client's question was not withdrawn")
	}
}

// askTimeout bounds both; a question whose call ends leaves the desk; with
// the default channels nothing goes to the console.
func TestDeskBounds(t *testing.T) {
	p := deskPolicy(150*time.Millisecond, "client", "console")
	silent := askerFunc(func(ctx context.Context, _ string, _ *approval.Request) (*approval.Decision, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	d := result(t, approveAsync(served(p, silent), context.Background(), escalate))
	if d.Approved || d.DecidedBy != approval.ByNone || !strings.Contains(d.Reason, "did not answer within 150ms (approval.askTimeout), on the client or at the console") {
		t.Fatalf("timed out: %+v", d)
	}
	if qs := p.Desk().Questions(); len(qs) != 0 {
		t.Fatalf("timed-out question still waiting: %+v", qs)
	}

	p = deskPolicy(time.Minute, "console")
	ctx, end := context.WithCancel(context.Background())
	ch := approveAsync(served(p, nil), ctx, escalate)
	q := waitQuestion(t, p.Desk())
	end()
	if d := result(t, ch); d.Approved || !strings.Contains(d.Reason, "the call ended before the user answered") {
		t.Fatalf("call ended: %+v", d)
	}
	if err := p.Desk().Answer(q.ID, true); !errors.Is(err, ErrNoQuestion) || len(p.Desk().Questions()) != 0 {
		t.Fatalf("question of an ended call: %v %+v", err, p.Desk().Questions())
	}

	p = deskPolicy(100 * time.Millisecond)
	changes, stop := p.Desk().Changes()
	defer stop()
	<-changes // a new subscription's first signal
	d = result(t, approveAsync(served(p, silent), context.Background(), escalate))
	if d.Approved || !strings.Contains(d.Reason, "the user did not answer within 100ms (approval.askTimeout)") {
		t.Fatalf("client alone: %+v", d)
	}
	select {
	case <-changes:
		t.Fatal("a question went to the console without console among the channels")
	default:
	}
}
