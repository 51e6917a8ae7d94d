//go:build linux

package procs

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/testplugins"
)

// digits is the stream `yes 0123456789 | head -c n` prints: the tests know
// every byte and every newline of it without asking the code under test.
func digits(n int) []byte {
	return bytes.Repeat([]byte("0123456789\n"), n/11+1)[:n]
}

const digitsCmd = "yes 0123456789 | head -c %d"

// wantCut checks a collected stream against the stream it came from: the
// tail kept, the bytes and newlines dropped before it, and, when the spill
// file exists, that it holds exactly the stream's first SpillBytes bytes.
func wantCut(t *testing.T, what string, c Collected, stream []byte) {
	t.Helper()
	keep := len(c.Data)
	if c.Total != int64(len(stream)) || !bytes.Equal(c.Data, stream[len(stream)-keep:]) {
		t.Fatalf("%s: total %d (want %d), tail of %d bytes is not the stream's", what, c.Total, len(stream), keep)
	}
	omitted := stream[:len(stream)-keep]
	if !c.Truncated || c.Dropped != int64(len(omitted)) || c.DroppedLines != int64(bytes.Count(omitted, newline)) {
		t.Fatalf("%s: dropped %d bytes %d lines, want %d and %d", what, c.Dropped, c.DroppedLines, len(omitted), bytes.Count(omitted, newline))
	}
	if c.SpillPath == "" {
		return
	}
	b, err := os.ReadFile(c.SpillPath)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if int64(len(b)) < c.SpillBytes || !bytes.Equal(b[:c.SpillBytes], stream[:c.SpillBytes]) {
		t.Fatalf("%s: spill file of %d bytes does not start with the stream's first %d", what, len(b), c.SpillBytes)
	}
}

// Every byte spilled: complete, and the counts are exact.
func TestSpillCompleteCounts(t *testing.T) {
	m := newManager(t)
	const n = 3_000_000
	r := bash(t, m, fmt.Sprintf(digitsCmd, n), nil)
	wantCut(t, "stdout", r.Stdout, digits(n))
	if !r.Stdout.SpillComplete || r.Stdout.SpillBytes != n || r.Stdout.SpillReason != "" {
		t.Fatalf("a spill file holding every byte: %+v", facts(r.Stdout))
	}
	if fi, err := os.Stat(r.Stdout.SpillPath); err != nil || fi.Size() != n {
		t.Fatalf("spill file: %v %v", fi, err)
	}
}

// The per-stream cap: partial, the reason is the cap, the file is the
// stream's first MaxSpillBytes bytes and then says what it lacks.
func TestSpillCapReason(t *testing.T) {
	m := newManager(t)
	const n, cap = 1_000_000, 100_000
	r := bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.MaxSpillBytes = cap })
	wantCut(t, "stdout", r.Stdout, digits(n))
	if r.Stdout.SpillComplete || r.Stdout.SpillBytes != cap || r.Stdout.SpillReason != SpillCap || r.Stdout.SpillPath == "" {
		t.Fatalf("capped: %+v", facts(r.Stdout))
	}
	b, _ := os.ReadFile(r.Stdout.SpillPath)
	if want := fmt.Sprintf("\n[dsh: %d more bytes were dropped (cap): this file holds the first %d of %d]\n", n-cap, cap, n); string(b[cap:]) != want {
		t.Fatalf("spill file ends %q, want %q", b[cap:], want)
	}
}

// One owner's budget: an owner that used it up gets partial files, then
// none, each saying the owner's budget ran out; another owner's output
// still spills whole, and a file of the first owner's never grows past
// the budget. Without MaxSpillPerOwner an owner gets a quarter of the
// total.
func TestSpillOwnerBudget(t *testing.T) {
	m, err := New(Config{
		SpillDir:         filepath.Join(t.TempDir(), "spill"),
		MaxSpillTotal:    1_000_000,
		MaxSpillPerOwner: 200_000,
		Environ:          func() []string { return []string{"PATH=" + os.Getenv("PATH")} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	const n, small = 500_000, 150_000
	r := bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.Owner = "a" })
	wantCut(t, "a's first", r.Stdout, digits(n))
	if r.Stdout.SpillComplete || r.Stdout.SpillBytes != 200_000 || r.Stdout.SpillReason != SpillOwnerBudget {
		t.Fatalf("a's first: %+v", facts(r.Stdout))
	}
	b, _ := os.ReadFile(r.Stdout.SpillPath)
	if want := fmt.Sprintf("\n[dsh: %d more bytes were dropped (owner_budget): this file holds the first %d of %d]\n", n-200_000, 200_000, n); string(b[200_000:]) != want {
		t.Fatalf("a's spill file ends %q, want %q", b[200_000:], want)
	}
	r = bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.Owner = "a" })
	if r.Stdout.SpillPath != "" || r.Stdout.SpillBytes != 0 || r.Stdout.SpillReason != SpillOwnerBudget {
		t.Fatalf("a's second, its budget used up: %+v", facts(r.Stdout))
	}
	for _, owner := range []string{"b", "c"} {
		r = bash(t, m, fmt.Sprintf(digitsCmd, small), func(s *Spec) { s.Owner = owner })
		wantCut(t, owner, r.Stdout, digits(small))
		if !r.Stdout.SpillComplete || r.Stdout.SpillBytes != small || r.Stdout.SpillReason != "" {
			t.Fatalf("%s, after a used its budget: %+v", owner, facts(r.Stdout))
		}
		if b, err := os.ReadFile(r.Stdout.SpillPath); err != nil || !bytes.Equal(b, digits(small)) {
			t.Fatalf("%s's spill file is not its whole output (%d bytes, %v)", owner, len(b), err)
		}
	}
	// The host-wide budget still binds when it is the tighter one: d has
	// 200,000 of its own but 1,000,000 - 200,000 - 2×150,000 = 500,000 are
	// left; e's 200,000 find 300,000; f's find 100,000.
	for _, c := range []struct {
		owner string
		want  int64
		why   SpillReason
	}{{"d", 200_000, SpillOwnerBudget}, {"e", 200_000, SpillOwnerBudget}, {"f", 100_000, SpillBudget}} {
		r = bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.Owner = c.owner })
		if r.Stdout.SpillBytes != c.want || r.Stdout.SpillReason != c.why {
			t.Fatalf("%s: %+v, want %d bytes and %s", c.owner, facts(r.Stdout), c.want, c.why)
		}
	}

	d, err := New(Config{SpillDir: filepath.Join(t.TempDir(), "spill"), MaxSpillTotal: 400_000,
		Environ: func() []string { return []string{"PATH=" + os.Getenv("PATH")} }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if r := bash(t, d, fmt.Sprintf(digitsCmd, n), nil); r.Stdout.SpillBytes != 100_000 || r.Stdout.SpillReason != SpillOwnerBudget {
		t.Fatalf("the default share: %+v", facts(r.Stdout))
	}
}

// The total budget, shared by every spill file: the one that meets it is
// partial with that reason, the next has nothing and says so, and a file
// never gains bytes after a gap when the budget frees up.
func TestSpillBudgetReason(t *testing.T) {
	m, err := New(Config{
		SpillDir:         filepath.Join(t.TempDir(), "spill"),
		MaxSpillTotal:    200_000,
		MaxSpillPerOwner: 200_000,
		Environ:          func() []string { return []string{"PATH=" + os.Getenv("PATH")} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	const n = 500_000
	r := bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.Owner = "a" })
	wantCut(t, "first", r.Stdout, digits(n))
	if r.Stdout.SpillComplete || r.Stdout.SpillBytes != 200_000 || r.Stdout.SpillReason != SpillBudget {
		t.Fatalf("first: %+v", facts(r.Stdout))
	}
	r = bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.Owner = "b" })
	wantCut(t, "second", r.Stdout, digits(n))
	if r.Stdout.SpillPath != "" || r.Stdout.SpillBytes != 0 || r.Stdout.SpillReason != SpillBudget || r.Stdout.SpillComplete {
		t.Fatalf("second, with the budget used up: %+v", facts(r.Stdout))
	}
	if ents, _ := os.ReadDir(m.OwnerDir("b")); len(ents) != 0 {
		t.Fatalf("an empty spill file was left: %v", ents)
	}

	// A stream that met the budget while running stays a prefix when the
	// budget frees up: nothing is written after the gap.
	gate := filepath.Join(t.TempDir(), "go")
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", fmt.Sprintf(digitsCmd+"; until [ -e %s ]; do sleep 0.01; done; "+digitsCmd, n, gate, n)}, Dir: t.TempDir(), Owner: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for total := int64(0); total < n; time.Sleep(10 * time.Millisecond) {
		total = p.Read().Stdout.Total
	}
	if err := m.ReleaseOwner(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	if c := p.Result().Stdout; c.Total != 2*n || c.SpillBytes != 0 || c.SpillPath != "" || c.SpillReason != SpillBudget {
		t.Fatalf("after the budget freed up: %+v", facts(c))
	}
}

// A full disk: a real tmpfs of 4 MiB under the spill directory. The first
// stream fills it and says so with the exact numbers; the next ones, on the
// still full disk, say their output is lost and why; nothing claims a file
// holds what it does not.
func TestSpillDiskFull(t *testing.T) {
	dir := tmpfs(t, "4m")
	m, err := New(Config{SpillDir: filepath.Join(dir, "spill"), Environ: func() []string { return []string{"PATH=" + os.Getenv("PATH")} }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeManager(t, m)
	const n = 22_000_000
	r := bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.Dir = t.TempDir() })
	wantCut(t, "first", r.Stdout, digits(n))
	c := r.Stdout
	fi, err := os.Stat(c.SpillPath)
	if err != nil || c.SpillComplete || c.SpillReason != SpillDiskFull || c.SpillBytes == 0 || c.SpillBytes > 4<<20 || fi.Size() != c.SpillBytes {
		t.Fatalf("first: %+v, file %v %v", facts(c), fi, err)
	}
	for i := 0; i < 2; i++ {
		r = bash(t, m, fmt.Sprintf(digitsCmd, 1_000_000), nil)
		wantCut(t, "next", r.Stdout, digits(1_000_000))
		if c := r.Stdout; c.SpillPath != "" || c.SpillBytes != 0 || c.SpillComplete || c.SpillReason != SpillDiskFull || c.SpillError == "" {
			t.Fatalf("next on a full disk: %+v", facts(c))
		}
	}
	// Small output needs no disk.
	if r := bash(t, m, "echo ok", nil); string(r.Stdout.Data) != "ok\n" || r.Stdout.Truncated {
		t.Fatalf("echo: %+v", r.Stdout)
	}
}

// A disk that is full and a quota that is used up are told apart by their
// reason (the system's word stays beside it), whether the file could not
// be made or a write failed; any other failure is the reason it came with.
func TestSpillReasonOfDiskErrors(t *testing.T) {
	m := newManager(t)
	defer closeManager(t, m)
	for _, c := range []struct {
		given SpillReason
		err   syscall.Errno
		want  SpillReason
	}{
		{SpillWriteError, syscall.ENOSPC, SpillDiskFull},
		{SpillCreateError, syscall.ENOSPC, SpillDiskFull},
		{SpillWriteError, syscall.EDQUOT, SpillDiskQuota},
		{SpillCreateError, syscall.EDQUOT, SpillDiskQuota},
		{SpillWriteError, syscall.EFBIG, SpillWriteError},
		{SpillCreateError, syscall.EACCES, SpillCreateError},
	} {
		s := &stream{m: m, path: "/s/p1.stdout"}
		s.stop(c.given, &fs.PathError{Op: "write", Path: s.path, Err: c.err})
		if s.reason != c.want || s.errText != c.err.Error() {
			t.Errorf("%v on %s: %s (%q), want %s", c.err, c.given, s.reason, s.errText, c.want)
		}
	}
}

// A failed write that is not a full disk: the file size limit of the host
// process (SIGXFSZ does nothing to a Go program; the write fails EFBIG).
func TestSpillWriteError(t *testing.T) {
	m := newManager(t)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: old.Max}); err != nil {
		t.Skipf("cannot lower the file size limit: %v", err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(restore) // whatever happens: the limit is the whole test binary's
	const n = 3_000_000
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", fmt.Sprintf(digitsCmd, n)}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	restore()
	r := p.Result()
	wantCut(t, "stdout", r.Stdout, digits(n))
	c := r.Stdout
	if c.SpillComplete || c.SpillReason != SpillWriteError || c.SpillBytes != limit || c.SpillError != syscall.EFBIG.Error() {
		t.Fatalf("write error: %+v", facts(c))
	}
}

// Consuming reads of a pouring job: each read's dropped bytes and lines
// are those of its own window (together with the data read, exactly the
// stream), and the spill file stays complete.
func TestSpillReadWindows(t *testing.T) {
	m := newManager(t)
	gate := filepath.Join(t.TempDir(), "go")
	const n1, n2 = 400_000, 300_000
	p, err := m.Spawn(Spec{Argv: []string{"bash", "-c", fmt.Sprintf(digitsCmd+"; until [ -e %s ]; do sleep 0.01; done; "+digitsCmd, n1, gate, n2)}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stream := append(digits(n1), digits(n2)...)
	var bytesSeen, linesSeen int64
	read := func() Read {
		r := p.Read()
		bytesSeen += r.Stdout.Dropped + int64(len(r.Stdout.Data))
		linesSeen += r.Stdout.DroppedLines + int64(bytes.Count(r.Stdout.Data, newline))
		if r.Stdout.SpillPath != "" && (!r.Stdout.SpillComplete || r.Stdout.SpillBytes != r.Stdout.Total) {
			t.Fatalf("a spill file holding every byte so far: %+v", facts(r.Stdout))
		}
		return r
	}
	for read().Stdout.Total < n1 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bounded.Receive(t, p.Done(), "the process's end")
	read()
	if bytesSeen != int64(len(stream)) || linesSeen != int64(bytes.Count(stream, newline)) {
		t.Fatalf("reads account for %d bytes and %d lines, want %d and %d", bytesSeen, linesSeen, len(stream), bytes.Count(stream, newline))
	}
	if r := read(); r.Stdout.Truncated || r.Stdout.DroppedLines != 0 || len(r.Stdout.Data) != 0 {
		t.Fatalf("a read after the end: %+v", facts(r.Stdout))
	}
}

func closeManager(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.Close(context.Background()); err != nil {
		t.Errorf("close: %v", err)
	}
}

// facts is a Collected without its data, for messages.
func facts(c Collected) string {
	c.Data = nil
	return fmt.Sprintf("%+v", c)
}

// tmpfs mounts a tmpfs of size at a new folder for the test.
func tmpfs(t *testing.T, size string) string { return testplugins.Tmpfs(t, size) }

// A spill file that cannot be created: nothing claims a path, the reason
// says why (a full disk when no inode is left, the system's word
// otherwise), and later commands still run.
func TestSpillNotCreated(t *testing.T) {
	dir := tmpfs(t, "4m,nr_inodes=3") // the root, the spill folder, one owner folder
	m, err := New(Config{SpillDir: filepath.Join(dir, "spill"), Environ: func() []string { return []string{"PATH=" + os.Getenv("PATH")} }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeManager(t, m)
	const n = 200_000
	r := bash(t, m, fmt.Sprintf(digitsCmd, n), nil)
	wantCut(t, "no inode", r.Stdout, digits(n))
	if c := r.Stdout; c.SpillPath != "" || c.SpillBytes != 0 || c.SpillComplete || c.SpillReason != SpillDiskFull {
		t.Fatalf("no inode left: %+v", facts(c))
	}
	// The owner's folder is a file: not a full disk, the file cannot be made.
	m2 := newManager(t)
	if err := os.WriteFile(m2.OwnerDir("test"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r = bash(t, m2, fmt.Sprintf(digitsCmd, n), nil)
	wantCut(t, "not a folder", r.Stdout, digits(n))
	if c := r.Stdout; c.SpillPath != "" || c.SpillReason != SpillCreateError || c.SpillError != syscall.ENOTDIR.Error() {
		t.Fatalf("owner folder is a file: %+v", facts(c))
	}
	if r := bash(t, m2, "echo ok", nil); string(r.Stdout.Data) != "ok\n" {
		t.Fatalf("echo: %+v", r.Stdout)
	}
}

// SpillAfterBytes starts the spill file within the retention: the output
// is whole in memory (not cut) and whole in the file too.
func TestSpillAfterBytes(t *testing.T) {
	m := newManager(t)
	const n = 5_000
	r := bash(t, m, fmt.Sprintf(digitsCmd, n), func(s *Spec) { s.MaxOutputBytes, s.SpillAfterBytes = 64_000, 1_000 })
	if r.Stdout.Truncated || !bytes.Equal(r.Stdout.Data, digits(n)) {
		t.Fatalf("retained %d of %d bytes (truncated %v)", len(r.Stdout.Data), n, r.Stdout.Truncated)
	}
	b, err := os.ReadFile(r.Stdout.SpillPath)
	if err != nil || !bytes.Equal(b, digits(n)) || !r.Stdout.SpillComplete || r.Stdout.SpillBytes != n {
		t.Fatalf("spill file %q: %d bytes, complete %v, %v", r.Stdout.SpillPath, len(b), r.Stdout.SpillComplete, err)
	}
	// Below the threshold nothing spills.
	r = bash(t, m, fmt.Sprintf(digitsCmd, 900), func(s *Spec) { s.SpillAfterBytes = 1_000 })
	if r.Stdout.SpillPath != "" {
		t.Fatalf("a spill file for 900 bytes: %s", r.Stdout.SpillPath)
	}
}
