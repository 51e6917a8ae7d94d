package confine

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

// run runs script under bash, confined by c when it is not nil.
func run(t *testing.T, m *procs.Manager, dir string, c *Confinement, script string) procs.Result {
	t.Helper()
	spec := procs.Spec{Argv: []string{"bash", "-c", script}, Dir: dir, Owner: "test", Timeout: 20 * time.Second}
	if c != nil {
		spec.Confine = c.Confine
	}
	p, err := m.Spawn(spec)
	if err != nil {
		t.Fatalf("spawn %q: %v", script, err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	return p.Result()
}

// The first runner layers, on commands started through ctx.subprocess:
// writes only in the writable roots, no network, no capabilities; and
// nothing of it leaks into the host or into commands started unconfined.
func TestConfinement(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	m, err := procs.New(procs.Config{SpillDir: filepath.Join(t.TempDir(), "spill")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(t.Context())
	c, err := Prepare(&sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: ws}, sandbox.WorkspaceWrite, Options{})
	if err != nil {
		t.Skipf("no Landlock ABI 5 here, so no runner: %v", err)
	}
	defer c.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	port := lis.Addr().(*net.TCPAddr).Port

	// Function that must keep working: files in the workspace, and a
	// server the command runs for itself on its own loopback.
	if r := run(t, m, ws, c, `python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); c=socket.create_connection(s.getsockname()); a, _ = s.accept(); c.send(b"ok"); print(a.recv(2).decode())'`); r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout.Data)) != "ok" {
		t.Fatalf("its own loopback: exit %d %q %q", r.ExitCode, r.Stdout.Data, r.Stderr.Data)
	}
	if r := run(t, m, ws, c, "echo inside > f && mkdir d && mv f d/g && cat d/g && echo x >/dev/null && ls | wc -l"); r.ExitCode != 0 || !strings.Contains(string(r.Stdout.Data), "inside") {
		t.Fatalf("inside the workspace: exit %d %q %q", r.ExitCode, r.Stdout.Data, r.Stderr.Data)
	}
	probes := []struct {
		name, script string
		outsideFile  string // must not exist afterwards
	}{
		{"write outside", "echo x > " + outside + "/escaped", outside + "/escaped"},
		{"write outside through a symlink", "ln -s " + outside + " link && echo x > link/via-link", outside + "/via-link"},
		{"write /tmp", "echo x > /tmp/dsh-confine-" + fmt.Sprint(os.Getpid()), "/tmp/dsh-confine-" + fmt.Sprint(os.Getpid())},
		{"touch outside", "touch " + outside + "/touched", outside + "/touched"},
		{"write through a hard link into the workspace", "ln " + outside + "/orig hl && echo x >> hl", ""},
		{"tcp to the host's loopback", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", port), ""},
		{"capabilities", "grep -q '^CapEff:\\s*0*$' /proc/self/status || { echo has capabilities; exit 0; }; exit 1", ""},
	}
	// Each probe escapes when nothing confines it: a probe that fails for
	// another reason would prove nothing.
	if err := os.WriteFile(filepath.Join(outside, "orig"), []byte("orig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, pr := range probes[:len(probes)-1] {
		if r := run(t, m, ws, nil, pr.script); r.ExitCode != 0 {
			t.Fatalf("%s does not escape unconfined either: exit %d %q", pr.name, r.ExitCode, r.Stderr.Data)
		}
		if pr.outsideFile != "" {
			_ = os.Remove(pr.outsideFile)
		}
		_ = os.Remove(filepath.Join(ws, "link"))
		_ = os.Remove(filepath.Join(ws, "hl"))
		_ = os.WriteFile(filepath.Join(outside, "orig"), []byte("orig\n"), 0o600)
	}
	if r := run(t, m, ws, nil, probes[len(probes)-1].script); r.ExitCode != 0 {
		t.Fatalf("the capability probe finds none unconfined (not root?): %q", r.Stdout.Data)
	}
	for _, pr := range probes {
		r := run(t, m, ws, c, pr.script)
		if r.ExitCode == 0 {
			t.Errorf("%s: exit 0, want a failure (%q %q)", pr.name, r.Stdout.Data, r.Stderr.Data)
		}
		if pr.outsideFile != "" {
			if _, err := os.Lstat(pr.outsideFile); err == nil {
				t.Errorf("%s: %s exists", pr.name, pr.outsideFile)
				_ = os.Remove(pr.outsideFile)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "orig")); string(b) != "orig\n" {
		t.Errorf("the outside file was changed: %q", b)
	}
	// A confined command that times out, and one that is killed, take
	// their trees with them; the next confined command runs as before.
	marker := fmt.Sprint(30000 + os.Getpid()%9999)
	spec := procs.Spec{Argv: []string{"bash", "-c", "sleep " + marker + " & sleep " + marker}, Dir: ws, Owner: "test", Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond, Confine: c.Confine}
	p, err := m.Spawn(spec)
	if err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	if r := p.Result(); !r.TimedOut {
		t.Fatalf("the confined timeout: %+v", r)
	}
	spec.Timeout = 0
	if p, err = m.Spawn(spec); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	p.Kill()
	bounded.Receive(t, p.Done(), "the process's end")
	for deadline := time.Now().Add(5 * time.Second); len(testplugins.Matching("sleep "+marker)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the confined trees outlived their timeout and kill: %v", testplugins.Matching("sleep "+marker))
		}
	}
	if r := run(t, m, ws, c, "echo again > again && cat again"); r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout.Data)) != "again" {
		t.Fatalf("a confined command after a timeout and a kill: exit %d %q", r.ExitCode, r.Stderr.Data)
	}
	// Nothing leaked: an unconfined command, and the host itself, still
	// write outside and connect.
	if r := run(t, m, ws, nil, "echo x > "+outside+"/free && "+fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)); r.ExitCode != 0 {
		t.Fatalf("an unconfined command after confined ones: exit %d %q", r.ExitCode, r.Stderr.Data)
	}
	if err := os.WriteFile(filepath.Join(outside, "host"), nil, 0o600); err != nil {
		t.Fatalf("the host after confined commands: %v", err)
	}
}

// BenchmarkTrue is `true` through ctx.subprocess, one after the other in
// each round: plain; confined by the full runner, entering the policy's
// prepared namespaces; and confined with namespaces made per command
// instead (what preparing them saves). The figures are medians in
// microseconds; overhead is confined minus plain.
func BenchmarkTrue(b *testing.B) {
	ws := b.TempDir()
	m, err := procs.New(procs.Config{SpillDir: filepath.Join(b.TempDir(), "spill")})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(b.Context())
	p := &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: ws, ProtectedPaths: []string{filepath.Join(ws, ".git", "config"), filepath.Join(ws, ".claude")}}
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	opt := Options{Hide: []string{b.TempDir()}}
	c, err := Prepare(p, sandbox.WorkspaceWrite, opt)
	if err != nil {
		b.Skipf("no runner here: %v", err)
	}
	defer c.Close()
	fresh, err := Prepare(p, sandbox.WorkspaceWrite, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer fresh.Close()
	fresh.fresh = true
	spawn := func(confine func() error) time.Duration {
		start := time.Now()
		p, err := m.Spawn(procs.Spec{Argv: []string{"true"}, Dir: ws, Owner: "bench", Confine: confine})
		if err != nil {
			b.Fatal(err)
		}
		bounded.Receive(b, p.Done(), "the process's end")
		m.Forget(p.ID)
		if r := p.Result(); r.ExitCode != 0 {
			b.Fatalf("true: %+v", r)
		}
		return time.Since(start)
	}
	var plain, confined, perCommand []time.Duration
	for b.Loop() {
		plain = append(plain, spawn(nil))
		confined = append(confined, spawn(c.Confine))
		perCommand = append(perCommand, spawn(fresh.Confine))
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(plain).Microseconds()), "plain-µs")
	b.ReportMetric(float64(med(confined).Microseconds()), "confined-µs")
	b.ReportMetric(float64(med(perCommand).Microseconds()), "confined-fresh-ns-µs")
	b.ReportMetric(float64((med(confined) - med(plain)).Microseconds()), "overhead-µs")
}
