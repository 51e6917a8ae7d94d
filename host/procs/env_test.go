//go:build linux

package procs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The explicit layer wins over the ambient one key by key, wherever its
// keys fall among the ambient ones, and the result is sorted by key.
func TestEnvMergesLayers(t *testing.T) {
	m := newManager(t, "B=ambient-b", "D=ambient-d", "F=ambient-f")
	got := m.Env(map[string]string{"A": "x-a", "D": "x-d", "E": "x-e", "Z": "x-z"})
	want := []string{"A=x-a", "B=ambient-b", "D=x-d", "E=x-e", "F=ambient-f", "PATH=" + os.Getenv("PATH"), "Z=x-z"}
	if !slices.Equal(got, want) {
		t.Fatalf("Env:\n got %q\nwant %q", got, want)
	}
	if got := m.Env(nil); !slices.Equal(got, []string{"B=ambient-b", "D=ambient-d", "F=ambient-f", "PATH=" + os.Getenv("PATH")}) {
		t.Fatalf("Env(nil): %q", got)
	}
}

// A program found once is taken again from where it was; once it is gone
// from there, the PATH is searched again, and a program gone everywhere is
// not found.
func TestProgramCacheFollowsThePath(t *testing.T) {
	m := newManager(t)
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, out string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "dsh-test-prog"), []byte("#!/bin/sh\necho "+out+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func() (string, error) {
		p, err := m.Spawn(Spec{Argv: []string{"dsh-test-prog"}, Dir: t.TempDir(), Env: map[string]string{"PATH": a + ":" + b + ":/usr/bin:/bin"}})
		if err != nil {
			return "", err
		}
		select {
		case <-p.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the program did not finish")
		}
		return string(p.Result().Stdout.Data), nil
	}
	write(a, "from-a")
	for i := 0; i < 2; i++ {
		if out, err := run(); err != nil || out != "from-a\n" {
			t.Fatalf("run %d: %q, %v", i, out, err)
		}
	}
	if err := os.Remove(filepath.Join(a, "dsh-test-prog")); err != nil {
		t.Fatal(err)
	}
	write(b, "from-b")
	if out, err := run(); err != nil || out != "from-b\n" {
		t.Fatalf("after the cached program was removed: %q, %v", out, err)
	}
	if err := os.Remove(filepath.Join(b, "dsh-test-prog")); err != nil {
		t.Fatal(err)
	}
	if _, err := run(); !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("a program gone from the PATH: %v", err)
	}
}

// Run waits on the caller's goroutine: it returns with the process done,
// its output collected and its cgroup given back soon after; a timeout
// still ends it, and the next Run starts clean.
func TestRunWaitsOnTheCaller(t *testing.T) {
	m := newManager(t)
	p, err := m.Run(Spec{Argv: []string{"bash", "-c", "echo hi; exit 3"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Run returned before the process was done")
	}
	if r := p.Result(); r.ExitCode != 3 || string(r.Stdout.Data) != "hi\n" {
		t.Fatalf("result: %+v", r)
	}
	p, err = m.Run(Spec{Argv: []string{"bash", "-c", "sleep 30"}, Dir: t.TempDir(), Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Result(); !r.TimedOut || r.Status != Killed {
		t.Fatalf("timed out run: %+v", r)
	}
	p, err = m.Run(Spec{Argv: []string{"bash", "-c", "echo after"}, Dir: t.TempDir()})
	if err != nil || string(p.Result().Stdout.Data) != "after\n" {
		t.Fatalf("the run after a timeout: %v", err)
	}
}
