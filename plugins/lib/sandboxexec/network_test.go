package sandboxexec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs/procstest"
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/shell"
)

// A request's network_allow is kept on the per-call policy when every
// entry is a host (or *.domain), each optionally with a port; any other
// is refused in a sentence that names it. Under a composition that gives
// the whole network it is moot.
func TestResolveNetworkAllow(t *testing.T) {
	ctx := context.Background()
	e := New(&localexec.Executor{Cfg: localexec.Config{Cwd: "/w"}}, &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: "/w"}, nil)
	spec, err := e.Resolve(ctx, &shell.ExecRequest{Command: "x", SandboxPolicy: &shell.SandboxPolicy{NetworkAllow: []string{"registry.npmjs.org", "*.pypi.org:443", "10.1.2.3:8080"}}})
	if err != nil || spec.SandboxPolicy.GetMode() != sandbox.WorkspaceWrite || !slices.Equal(spec.SandboxPolicy.GetNetworkAllow(), []string{"registry.npmjs.org", "*.pypi.org:443", "10.1.2.3:8080"}) {
		t.Fatalf("allowed hosts: %+v %v", spec.GetSandboxPolicy(), err)
	}
	_, err = e.Resolve(ctx, &shell.ExecRequest{Command: "x", SandboxPolicy: &shell.SandboxPolicy{NetworkAllow: []string{"example.com", "https://evil.test/x"}}})
	want := `network_allow: "https://evil.test/x" is not a host: write a host name (example.com), *.example.com or an IP address, each optionally with :port.`
	if !errors.Is(err, shell.ErrInvalid) || err.Error() != want {
		t.Fatalf("a URL: %v, want %q", err, want)
	}
	open := New(&localexec.Executor{Cfg: localexec.Config{Cwd: "/w"}}, &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: "/w", Network: true}, nil)
	spec, err = open.Resolve(ctx, &shell.ExecRequest{Command: "x", SandboxPolicy: &shell.SandboxPolicy{NetworkAllow: []string{"example.com"}}})
	if err != nil || !spec.SandboxPolicy.GetNetwork() || len(spec.SandboxPolicy.GetNetworkAllow()) != 0 {
		t.Fatalf("the whole network: %+v %v", spec.GetSandboxPolicy(), err)
	}
}

// What ctx.sandbox is asked to apply: the composition's rules with the
// approved hosts allowed besides; without a network, a proxied one that
// reaches the approved hosts alone; without either, no network.
func TestWrapPolicyNetwork(t *testing.T) {
	rules := &sandbox.NetworkRules{Allow: []string{"github.com"}, Deny: []string{"*.evil.test"}, Mode: "limited", Hosts: map[string]string{"git.local": "10.0.0.2"}}
	sp := &shell.SandboxPolicy{Mode: sandbox.WorkspaceWrite, WritableRoots: []string{"/w"}, NetworkAllow: []string{"registry.npmjs.org"}}
	p := wrapPolicy(sp, rules)
	want := &sandbox.NetworkRules{Allow: []string{"github.com", "registry.npmjs.org"}, Deny: []string{"*.evil.test"}, Mode: "limited", Hosts: map[string]string{"git.local": "10.0.0.2"}}
	if p.Network || !proto.Equal(p.NetworkRules, want) || p.WorkspaceRoot != "/w" {
		t.Fatalf("rules and an approved host: %v", p)
	}
	if !slices.Equal(rules.Allow, []string{"github.com"}) {
		t.Fatalf("the composition's rules changed: %v", rules)
	}
	if p := wrapPolicy(&shell.SandboxPolicy{Mode: sandbox.ReadOnly}, rules); !proto.Equal(p.NetworkRules, rules) {
		t.Fatalf("rules alone: %v", p)
	}
	if p := wrapPolicy(sp, nil); !proto.Equal(p.NetworkRules, &sandbox.NetworkRules{Allow: []string{"registry.npmjs.org"}}) || p.Network {
		t.Fatalf("no network and an approved host: %v", p)
	}
	if p := wrapPolicy(&shell.SandboxPolicy{Mode: sandbox.ReadOnly}, nil); p.NetworkRules != nil || p.Network {
		t.Fatalf("no network: %v", p)
	}
	if p := wrapPolicy(&shell.SandboxPolicy{Mode: sandbox.ReadOnly, Network: true, NetworkAllow: []string{"x.test"}}, rules); p.NetworkRules != nil || !p.Network {
		t.Fatalf("the whole network: %v", p)
	}
}

// proxySandbox is ctx.sandbox as the executor meets it: each command runs
// as it is, and each settle says what the proxy reached and refused.
type proxySandbox struct {
	mu       sync.Mutex
	wrapped  []*sandbox.WrapRequest
	settled  []string
	reached  []string
	denied   []*sandbox.NetworkDenial
	undone   []*sandbox.Undone
	tokenSeq int
}

func (s *proxySandbox) Wrap(_ context.Context, req *sandbox.WrapRequest) (*sandbox.Wrapped, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrapped = append(s.wrapped, req)
	s.tokenSeq++
	return &sandbox.Wrapped{Argv: req.Argv, Runner: "test", Enforcement: "network", Settle: fmt.Sprint("w", s.tokenSeq)}, nil
}

func (s *proxySandbox) Settle(_ context.Context, req *sandbox.SettleRequest) (*sandbox.Settled, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled = append(s.settled, req.Settle)
	return &sandbox.Settled{Undone: s.undone, NetworkReached: s.reached, NetworkDenied: s.denied}, nil
}

// A run's result carries the hosts the proxy reached and refused; a
// refusal is a denial of the run ("proxy" when nothing else was denied,
// else the other's source stays). A background job's final read says
// the same. The approved hosts reach ctx.sandbox in the rules.
func TestRunReportsNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := t.TempDir()
	sb := &proxySandbox{
		reached: []string{"github.com:443"},
		denied:  []*sandbox.NetworkDenial{{Host: "evil.test:443", Why: "not in allow"}, {Host: "evil.test:443", Why: "not in allow"}, {Host: "x.test:80", Why: `denied by deny "x.test"`}},
	}
	l := &localexec.Executor{Cfg: localexec.Config{Cwd: w, TimeoutMs: 20000, MaxTimeoutMs: 20000, MaxOutputBytes: 1 << 16}, Sub: procstest.Serve(t, "bash-sandbox"),
		Argv: func(s *shell.ExecSpec) []string { return []string{"bash", "-c", s.Command} }}
	e := New(l, &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: w, NetworkRules: &sandbox.NetworkRules{Allow: []string{"github.com"}}}, sb)

	res, err := e.Exec(ctx, &shell.ExecRequest{Command: "echo ran", SandboxPolicy: &shell.SandboxPolicy{NetworkAllow: []string{"registry.npmjs.org"}}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout.GetData()) != "ran\n" || res.Sandbox == nil {
		t.Fatalf("run: %+v", res)
	}
	s := res.Sandbox
	if !s.Denied || s.DenialSource != "proxy" || !slices.Equal(s.NetworkDenied, []string{"evil.test:443", "x.test:80"}) || !slices.Equal(s.NetworkReached, []string{"github.com:443"}) || len(s.DeniedPaths) != 0 {
		t.Fatalf("sandbox facts: %+v", s)
	}
	if got := sb.wrapped[0].Policy.GetNetworkRules().GetAllow(); !slices.Equal(got, []string{"github.com", "registry.npmjs.org"}) {
		t.Fatalf("the rules ctx.sandbox was asked for: %v", sb.wrapped[0].Policy)
	}

	// Undone paths and refused hosts together: the paths' source stays.
	sb.mu.Lock()
	sb.undone = []*sandbox.Undone{{Path: filepath.Join(w, "sub/.git"), Why: "a new git directory"}}
	sb.mu.Unlock()
	res, err = e.Exec(ctx, &shell.ExecRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Sandbox; !s.Denied || s.DenialSource != "undone" || len(s.DeniedPaths) != 1 || !slices.Equal(s.NetworkDenied, []string{"evil.test:443", "x.test:80"}) {
		t.Fatalf("undone and refused: %+v", s)
	}
	if got := sb.wrapped[1].Policy.GetNetworkRules().GetAllow(); !slices.Equal(got, []string{"github.com"}) {
		t.Fatalf("the approval of one run went on to the next: %v", got)
	}

	// A background job: its final read carries what its settle said.
	sb.mu.Lock()
	sb.undone = nil
	sb.mu.Unlock()
	spec, err := e.Resolve(ctx, &shell.ExecRequest{Command: "echo bg", SandboxPolicy: &shell.SandboxPolicy{NetworkAllow: []string{"pkg.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.wrapped[2].Policy.GetNetworkRules().GetAllow(); !slices.Equal(got, []string{"github.com", "pkg.test"}) {
		t.Fatalf("the background run's rules: %v", got)
	}
	if _, err := e.Wait(ctx, st.Id); err != nil {
		t.Fatal(err)
	}
	r, err := e.ReadOutput(ctx, st.Id)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Sandbox; s == nil || !s.Denied || s.DenialSource != "proxy" || !slices.Equal(s.NetworkDenied, []string{"evil.test:443", "x.test:80"}) || !slices.Equal(s.NetworkReached, []string{"github.com:443"}) {
		t.Fatalf("the job's read: %+v", r.Sandbox)
	}
	if len(sb.settled) != 3 {
		t.Fatalf("settles: %v", sb.settled)
	}
}
