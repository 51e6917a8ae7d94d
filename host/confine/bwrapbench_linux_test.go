package confine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/bounded"
)

// BenchmarkBubblewrap is `true` through ctx.subprocess, plain and wrapped
// (Wrap included: it reads /proc/net/unix each time), one after the other
// in each round: the bubblewrap runner's cost per command.
func BenchmarkBubblewrap(b *testing.B) {
	bw := findBwrap(b)
	m := newManager(b)
	ws, rt := b.TempDir(), b.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git/config"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	p := &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: ws,
		ProtectedPaths: []string{ws + "/.git/config", ws + "/.git/hooks", ws + "/.claude", ws + "/.codex"}}
	opt := Options{Hide: []string{rt}}
	rule, err := newSocketRule()
	if err != nil {
		b.Fatal(err)
	}
	spawn := func(wrap bool, confine ...func() error) time.Duration {
		start := time.Now()
		argv := []string{"true"}
		if wrap {
			var err error
			if argv, err = bw.Wrap(p, sandbox.WorkspaceWrite, opt, argv); err != nil {
				b.Fatal(err)
			}
		}
		spec := procs.Spec{Argv: argv, Dir: ws, Owner: "bench"}
		if len(confine) > 0 {
			spec.Confine = confine[0]
		}
		pr, err := m.Spawn(spec)
		if err != nil {
			b.Fatal(err)
		}
		bounded.Receive(b, pr.Done(), "the process's end")
		if r := pr.Result(); r.ExitCode != 0 {
			b.Fatalf("exit %d: %s", r.ExitCode, r.Stderr.Data)
		}
		m.Forget(pr.ID)
		return time.Since(start)
	}
	var plain, wrapped, filtered, wraps []time.Duration
	for b.Loop() {
		plain = append(plain, spawn(false))
		wrapped = append(wrapped, spawn(true))
		filtered = append(filtered, spawn(true, rule.Confine))
		start := time.Now()
		if _, err := bw.Wrap(p, sandbox.WorkspaceWrite, opt, []string{"true"}); err != nil {
			b.Fatal(err)
		}
		wraps = append(wraps, time.Since(start))
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(plain).Microseconds()), "plain-µs/median")
	b.ReportMetric(float64(med(wrapped).Microseconds()), "bwrap-µs/median")
	b.ReportMetric(float64((med(wrapped) - med(plain)).Microseconds()), "overhead-µs/median")
	// What the Runner adds: the unix socket filter, from a thread of its own.
	b.ReportMetric(float64((med(filtered) - med(wrapped)).Microseconds()), "socket-filter-µs/median")
	b.ReportMetric(float64(med(wraps).Microseconds()), "wrap-µs/median")
}
