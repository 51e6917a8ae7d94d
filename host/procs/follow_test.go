//go:build linux

package procs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// follower collects what Follow hands out.
type follower struct {
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
}

func (f *follower) out(stream string, b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if stream == "stderr" {
		f.stderr.Write(b)
	} else {
		f.stdout.Write(b)
	}
}

func (f *follower) text() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stdout.String(), f.stderr.String()
}

// Follow shows a process's output from its first byte, live and through
// its spill file, while consuming reads still get every byte; past the
// spill file's cap it says what it skipped and shows the tail.
func TestFollowDoesNotConsume(t *testing.T) {
	m := newManager(t)
	// Small memory, a spill file of 3000 bytes: the first lines are in
	// memory, then in the file, the end past the cap.
	dir := t.TempDir()
	p, err := m.Spawn(Spec{
		Argv: []string{"bash", "-c", `for i in $(seq 1 300); do printf 'line %04d\n' $i; if [ $i = 20 ]; then while [ ! -e go ]; do sleep 0.01; done; fi; done; echo oops >&2`},
		Dir:  dir, Owner: "test", MaxOutputBytes: 400, SpillAfterBytes: 100, MaxSpillBytes: 3000,
	})
	if err != nil {
		t.Fatal(err)
	}
	// A consuming read takes the first lines before anyone follows.
	var read bytes.Buffer
	deadline := time.Now().Add(20 * time.Second)
	for !strings.HasSuffix(read.String(), "line 0020\n") && time.Now().Before(deadline) {
		read.Write(p.Read().Stdout.Data)
		time.Sleep(10 * time.Millisecond)
	}
	f := &follower{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	followed := make(chan error, 1)
	go func() { followed <- p.Follow(ctx, f.out) }()
	for out, _ := f.text(); !strings.HasSuffix(out, "line 0020\n"); out, _ = f.text() {
		if time.Now().After(deadline) {
			t.Fatalf("followed %q", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-followed; err != nil {
		t.Fatalf("follow: %v", err)
	}
	var want strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&want, "line %04d\n", i)
	}
	stdout, stderr := f.text()
	// 3000 bytes are in the file (lines 1-300 are 3000 bytes): all of it.
	if stdout != want.String() || stderr != "oops\n" {
		t.Fatalf("followed stdout %q\nstderr %q", stdout, stderr)
	}
	// What the first read did not take is still there for the next one:
	// the tail of lines 21-300 (400 bytes, the memory bound).
	r := p.Read()
	if read.String() != want.String()[:200] || string(r.Stdout.Data) != want.String()[2600:] || !r.Stdout.Truncated || r.Status != Completed {
		t.Fatalf("reads %q, then %q (status %s)", read.String(), r.Stdout.Data, r.Status)
	}
}

// Past the spill file's cap only the tail is there: Follow says how many
// bytes it skipped.
func TestFollowPastTheSpillCap(t *testing.T) {
	m := newManager(t)
	p, err := m.Spawn(Spec{
		Argv: []string{"bash", "-c", `for i in $(seq 1 300); do printf 'line %04d\n' $i; done`},
		Dir:  t.TempDir(), Owner: "test", MaxOutputBytes: 200, MaxSpillBytes: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	f := &follower{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Follow(ctx, f.out); err != nil {
		t.Fatal(err)
	}
	stdout, _ := f.text()
	var head, tail strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&head, "line %04d\n", i)
	}
	for i := 281; i <= 300; i++ {
		fmt.Fprintf(&tail, "line %04d\n", i)
	}
	want := head.String() + "\n[dsh: 1800 bytes of stdout are not kept, so they are not shown]\n" + tail.String()
	if stdout != want {
		t.Fatalf("followed %q\nwant %q", stdout, want)
	}
	if r := p.Read(); string(r.Stdout.Data) != tail.String() {
		t.Fatalf("read after following: %q", r.Stdout.Data)
	}
}

// Follow ends with its context while the process runs.
func TestFollowEndsWithContext(t *testing.T) {
	m := newManager(t)
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", "echo hi; sleep 30"}, Dir: t.TempDir(), Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- p.Follow(ctx, f.out) }()
	deadline := time.Now().Add(20 * time.Second)
	for out, _ := f.text(); out != "hi\n"; out, _ = f.text() {
		if time.Now().After(deadline) {
			t.Fatalf("followed %q", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-ended:
		if err != context.Canceled {
			t.Fatalf("follow ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow went on after its context ended")
	}
	p.Kill()
}
