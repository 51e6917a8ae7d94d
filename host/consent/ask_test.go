package consent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/seam"
)

type askerFunc func(ctx context.Context, owner string, req *approval.Request) (*approval.Decision, error)

func (f askerFunc) Ask(ctx context.Context, owner string, req *approval.Request) (*approval.Decision, error) {
	return f(ctx, owner, req)
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// "ask" goes to the call's Asker with the owner the host stamped, within
// askTimeout; every way of not getting the user's answer is a denial that
// says which, and every decision is logged with the rule that asked.
func TestServiceAsks(t *testing.T) {
	section := &composition.Approval{Otherwise: "deny", AskTimeout: 100 * time.Millisecond, Rules: []composition.ApprovalRule{
		{Match: "git push*", Decision: "ask", Pos: composition.Pos{File: "c.yaml", Line: 4}},
		{Match: "make", Decision: "allow", Pos: composition.Pos{File: "c.yaml", Line: 5}},
	}}
	logs := &logBuf{}
	p := NewPolicy(section, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}))
	var got struct {
		owner string
		req   *approval.Request
		calls int
	}
	record := func(owner string, req *approval.Request) {
		got.owner, got.req = owner, req
		got.calls++
	}
	approve := askerFunc(func(_ context.Context, owner string, req *approval.Request) (*approval.Decision, error) {
		record(owner, req)
		return &approval.Decision{Approved: true, Reason: "approved by the user", DecidedBy: approval.ByUser}, nil
	})
	failing := askerFunc(func(_ context.Context, owner string, req *approval.Request) (*approval.Decision, error) {
		record(owner, req)
		return nil, errors.New("the MCP client does not support elicitation")
	})
	silent := askerFunc(func(ctx context.Context, owner string, req *approval.Request) (*approval.Decision, error) {
		record(owner, req)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	late := askerFunc(func(_ context.Context, owner string, req *approval.Request) (*approval.Decision, error) {
		record(owner, req)
		return nil, fmt.Errorf("the answer came too late: %w", context.DeadlineExceeded)
	})
	later := askerFunc(func(_ context.Context, owner string, req *approval.Request) (*approval.Decision, error) {
		record(owner, req)
		return nil, ErrAskedLater
	})
	svc := func(a Asker, served bool) *Service {
		return &Service{Policy: p, Caller: "tools",
			Serving: func(context.Context) (Call, bool) {
				if !served {
					return Call{}, false
				}
				return Call{Served: seam.Served{Owner: "mcp-0123"}, Asker: a}, true
			},
		}
	}
	push := &approval.Request{Kind: approval.KindSandboxEscalation, Owner: "someone-else", Tool: "bash", Command: "git push origin main", TargetMode: "danger-full-access", Reason: "publish"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name     string
		ctx      context.Context
		s        *Service
		req      *approval.Request
		approved bool
		by, why  string
		asked    bool
	}{
		{"approved", context.Background(), svc(approve, true), push, true, approval.ByUser, "approved by the user", true},
		{"not asked: allowed by a rule", context.Background(), svc(approve, true), &approval.Request{Command: "make"}, true, approval.ByPolicy, "allowed by approval rule 2", false},
		{"not asked: otherwise deny", context.Background(), svc(approve, true), &approval.Request{Command: "ls"}, false, approval.ByPolicy, "otherwise is deny", false},
		{"no call", context.Background(), svc(approve, false), push, false, approval.ByNone, "denied: this needs the user's approval (asked by approval rule 1 (c.yaml:4)), and the request serves no tool call", false},
		{"no asker (dsh call)", context.Background(), svc(nil, true), push, false, approval.ByNone, "and the call comes from no MCP session whose user could be asked (a dsh call", false},
		{"an error", context.Background(), svc(failing, true), push, false, approval.ByNone, "and the user could not be asked: the MCP client does not support elicitation", true},
		{"no answer in time", context.Background(), svc(silent, true), push, false, approval.ByNone, "and the user did not answer within 100ms (approval.askTimeout)", true},
		{"an answer after the wait", context.Background(), svc(late, true), push, false, approval.ByNone, "and the user did not answer within 100ms (approval.askTimeout)", true},
		{"the call ended", cancelled, svc(silent, true), push, false, approval.ByNone, "and the call ended before the user answered", true},
		{"asked in a new round", context.Background(), svc(later, true), push, false, approval.ByNone, "denied for now: the user is being asked", true},
	} {
		got.calls, got.owner, got.req = 0, "", nil
		d, err := c.s.Approve(c.ctx, c.req)
		if err != nil || d.Approved != c.approved || d.DecidedBy != c.by || !strings.Contains(d.Reason, c.why) {
			t.Errorf("%s: %+v %v, want approved %v by %s saying %q", c.name, d, err, c.approved, c.by, c.why)
		}
		if !d.Approved && !strings.HasPrefix(d.Reason, "denied") {
			t.Errorf("%s: a denial that does not say so: %q", c.name, d.Reason)
		}
		if (got.calls == 1) != c.asked || got.calls > 1 {
			t.Errorf("%s: asked %d times, want asked %v", c.name, got.calls, c.asked)
		}
		if c.asked && (got.owner != "mcp-0123" || got.req != c.req) {
			t.Errorf("%s: asked for %q, want the stamped owner mcp-0123", c.name, got.owner)
		}
	}
	log := logs.String()
	for _, want := range []string{
		`approved=true decided_by=user reason="approved by the user" asked_because="asked by approval rule 1 (c.yaml:4)" kind=sandbox_escalation owner=mcp-0123 plugin=tools tool=bash command="git push origin main" target_mode=danger-full-access`,
		`approved=true decided_by=policy reason="allowed by approval rule 2 (c.yaml:5)" asked_because="" kind="" owner=mcp-0123 plugin=tools`,
		`decided_by=none reason="denied: this needs the user's approval (asked by approval rule 1 (c.yaml:4)), and the user did not answer within 100ms (approval.askTimeout)"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	// The default wait.
	if d := NewPolicy(&composition.Approval{}, hclog.NewNullLogger()).AskTimeout(); d != 2*time.Minute {
		t.Errorf("default askTimeout %v", d)
	}
}
