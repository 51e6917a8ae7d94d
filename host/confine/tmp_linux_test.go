package confine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
)

// owners runs commands of named owners through a Runner as the host
// does: each owner's temporary folder from one Temps.
type owners struct {
	t     *testing.T
	r     *Runner
	temps *Temps
	m     *procs.Manager
	pol   *sandbox.Policy
	show  string // a folder every owner's commands may read inside a hidden one
}

func newOwners(t *testing.T, runner string, pol *sandbox.Policy) *owners {
	t.Helper()
	temps, err := OpenTemps(filepath.Join(t.TempDir(), "temps"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { temps.Close() })
	r := NewRunner(runner, Options{Hide: []string{temps.Base()}})
	t.Cleanup(func() { r.Close() })
	return &owners{t: t, r: r, temps: temps, m: newManager(t), pol: pol}
}

// run runs script under bash in dir for owner, confined in mode.
func (o *owners) run(owner, mode, dir, script string) procs.Result {
	o.t.Helper()
	w, err := o.wrap(owner, mode, script)
	if err != nil {
		o.t.Fatalf("wrap for %s: %v", owner, err)
	}
	spec := procs.Spec{Argv: w.Argv, Dir: dir, Owner: owner, Timeout: 60 * time.Second, Env: map[string]string{"TMPDIR": "/var/empty/host-tmp"}}
	if w.Confinement != "" {
		confine, err := o.r.Confinement(w.Confinement)
		if err != nil {
			o.t.Fatal(err)
		}
		spec.Confine = confine
		for k, v := range o.r.Env(w.Confinement) {
			spec.Env[k] = v
		}
	}
	p, err := o.m.Spawn(spec)
	if err != nil {
		o.t.Fatalf("spawn %q: %v", script, err)
	}
	select {
	case <-p.Done():
	case <-time.After(90 * time.Second):
		o.t.Fatalf("%q did not end", script)
	}
	return p.Result()
}

func (o *owners) wrap(owner, mode, script string) (*sandbox.Wrapped, error) {
	own := Owned{R: o.r, Add: func(context.Context) Options {
		tmp, err := o.temps.For(owner)
		if err != nil {
			o.t.Fatal(err)
		}
		opt := Options{Tmp: tmp}
		if o.show != "" {
			opt.Show = []string{o.show}
		}
		return opt
	}}
	return own.Wrap(context.Background(), &sandbox.WrapRequest{Argv: []string{"bash", "-c", script}, Mode: mode, Policy: sandbox.ForMode(o.pol, mode)})
}

// release ends owner as the host does.
func (o *owners) release(owner string) {
	o.t.Helper()
	if err := errors.Join(o.r.Release(owner, o.temps.Path(owner)), o.temps.Release(owner)); err != nil {
		o.t.Fatal(err)
	}
}

func ok(t *testing.T, what string, r procs.Result) string {
	t.Helper()
	if r.ExitCode != 0 {
		t.Fatalf("%s: exit %d\n%s\n%s", what, r.ExitCode, r.Stdout.Data, r.Stderr.Data)
	}
	return strings.TrimSpace(string(r.Stdout.Data))
}

// Ordinary work that needs a temporary folder runs under workspace-write
// with either runner: mktemp, Python's tempfile, POSIX shared memory, a
// Go build. Each owner has a folder of its own, as /tmp and TMPDIR: the
// same across its commands, out of sight of the others', gone when the
// owner is released; the workspace under the host's /tmp is still there.
// read-only stays read-only.
func TestPrivateTmp(t *testing.T) {
	for _, runner := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(runner, func(t *testing.T) {
			if runner == sandbox.RunnerBubblewrap {
				findBwrap(t)
			}
			ws := t.TempDir()
			pol := &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: ws}
			// Go's build cache, writable as a cache root is.
			gocache := ""
			if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
				if gocache = strings.TrimSpace(string(out)); os.MkdirAll(gocache, 0o755) == nil {
					pol.WritableRoots = []string{gocache}
				}
			}
			// A protected path in the workspace under /tmp, and a hidden
			// folder under /tmp with the owner's part of it shown.
			if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("kept\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			pol.ProtectedPaths = []string{filepath.Join(ws, ".git", "config")}
			hidden := t.TempDir()
			shown := filepath.Join(hidden, "spill", "a")
			for _, d := range []string{shown, filepath.Join(hidden, "spill", "b")} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, "out"), []byte(filepath.Base(d)+"-spill\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			o := newOwners(t, runner, pol)
			o.r.opt.Hide = append(o.r.opt.Hide, hidden)
			o.show = shown
			if _, err := o.wrap("probe", sandbox.WorkspaceWrite, "true"); err != nil && runner == sandbox.RunnerLandlock {
				t.Skipf("no landlock runner here: %v", err)
			}

			// Python's resource tracker unlinks the shared memory its
			// process made, some time after it exits: unregistered, the
			// segment stays for the checks below.
			out := ok(t, "temporary files", o.run("a", sandbox.WorkspaceWrite, ws, `set -e
echo "tmpdir=$TMPDIR"
f=$(mktemp); echo data > "$f"; echo "mktemp=$f"
python3 -c 'import tempfile; f = tempfile.NamedTemporaryFile(delete=False); f.write(b"x"); print("python=" + f.name)'
python3 -c 'from multiprocessing import shared_memory as s, resource_tracker as rt; m = s.SharedMemory(create=True, size=16, name="dshprobe"); m.buf[0] = 7; rt.unregister(m._name, "shared_memory"); print("shm=" + str(len(m.buf)))'
echo secret > /tmp/x
echo inside > `+ws+`/f
ls /dev/shm`))
			for _, want := range []string{"tmpdir=/tmp", "mktemp=/tmp/tmp.", "python=/tmp/", "shm=16", "dshprobe"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in %q", want, out)
				}
			}
			folder := o.temps.Path("a")
			if b, err := os.ReadFile(filepath.Join(folder, "tmp", "x")); err != nil || string(b) != "secret\n" {
				t.Fatalf("the owner's /tmp is not its folder: %q %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(folder, "shm", "dshprobe")); err != nil {
				t.Fatalf("the owner's /dev/shm is not its folder: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(b) != "inside\n" {
				t.Fatalf("the workspace under /tmp: %q %v", b, err)
			}
			if _, err := os.Stat("/tmp/x"); err == nil {
				t.Fatal("the command wrote the host's /tmp")
			}

			// What the namespace shows under the host's /tmp is as it was:
			// the protected path read-only, the shown folder readable, the
			// rest of the hidden one not.
			r := o.run("a", sandbox.WorkspaceWrite, ws, "cat "+filepath.Join(shown, "out")+"; echo x >> .git/config; cat "+filepath.Join(hidden, "spill", "b", "out"))
			if out := string(r.Stdout.Data); out != "a-spill\n" || !strings.Contains(string(r.Stderr.Data), ".git/config") {
				t.Fatalf("under the owner's /tmp: %q %q", out, r.Stderr.Data)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "kept\n" {
				t.Fatalf("the protected path changed: %q", b)
			}

			// The same owner's next command finds its files.
			if out := ok(t, "the next command", o.run("a", sandbox.WorkspaceWrite, ws, "cat /tmp/x")); out != "secret" {
				t.Fatalf("the owner's next command: %q", out)
			}
			// Another owner sees neither /tmp/x nor the folder at its
			// path on the host.
			r = o.run("b", sandbox.WorkspaceWrite, ws, "ls -A /tmp /dev/shm; cat /tmp/x; cat "+filepath.Join(folder, "tmp", "x")+"; ls -A "+o.temps.Base())
			if r.ExitCode == 0 || strings.Contains(string(r.Stdout.Data), "secret") || strings.Contains(string(r.Stdout.Data), "dshprobe") || strings.Contains(string(r.Stdout.Data), "host-") {
				t.Fatalf("another owner reached a's files: exit %d %q %q", r.ExitCode, r.Stdout.Data, r.Stderr.Data)
			}

			// A Go build: its work directory is in TMPDIR, its cache in
			// the writable root.
			if len(pol.WritableRoots) > 0 {
				if err := os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n\nfunc main() { println(\"built\") }\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				r := o.run("a", sandbox.WorkspaceWrite, ws, "export GOCACHE=`+gocache+` GO111MODULE=off; go build -o /tmp/hello main.go && /tmp/hello")
				if r.ExitCode != 0 || !strings.Contains(string(r.Stderr.Data), "built") {
					t.Fatalf("go build: exit %d %q %q", r.ExitCode, r.Stdout.Data, r.Stderr.Data)
				}
			}

			// read-only: no folder, nothing writable.
			r = o.run("a", sandbox.ReadOnly, ws, "echo $TMPDIR; mktemp")
			if r.ExitCode == 0 || strings.Contains(string(r.Stdout.Data), "/tmp/tmp.") {
				t.Fatalf("read-only made a temporary file: %q %q", r.Stdout.Data, r.Stderr.Data)
			}

			// Released: the folder is gone, and so are its confinements.
			w, err := o.wrap("a", sandbox.WorkspaceWrite, "true")
			if err != nil {
				t.Fatal(err)
			}
			o.release("a")
			if _, err := os.Stat(folder); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the released owner's folder: %v", err)
			}
			// Bubblewrap's confinement (its socket rule) is every owner's,
			// so it stays.
			if w.Confinement != "" && w.Confinement != socketRuleToken {
				if _, err := o.r.Confinement(w.Confinement); err == nil {
					t.Fatal("a released owner's confinement is still held")
				}
			}
			// A later command of the same owner starts afresh.
			if out := ok(t, "after the release", o.run("a", sandbox.WorkspaceWrite, ws, "ls -A /tmp | grep -vx "+strings.Split(strings.TrimPrefix(ws, "/tmp/"), "/")[0]+" | wc -l")); out != "0" {
				t.Fatalf("the folder after a release: %q", out)
			}
		})
	}
}

// Every folder of a host goes when it closes; a host that did not close
// (killed) leaves its folder to the next one, which removes it; a live
// host's folder stays.
func TestTempsSweep(t *testing.T) {
	base := filepath.Join(t.TempDir(), "temps")
	live, err := OpenTemps(base)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.For("a"); err != nil {
		t.Fatal(err)
	}
	// A host killed with SIGKILL: a process that held its lock is gone.
	cmd := exec.Command("bash", "-c", `d=$1/host-999999-dead; mkdir -p $d/o1/tmp; exec 9>$d/.lock; flock 9; echo locked; exec sleep 600`, "bash", base)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	done := make(chan error, 1)
	go func() { _, err := stdout.Read(buf); done <- err }()
	select {
	case err := <-done:
		if err != nil || string(buf[:6]) != "locked" {
			cmd.Process.Kill()
			t.Fatalf("the killed host's stand-in: %q %v", buf, err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the killed host's stand-in never locked")
	}
	dead := filepath.Join(base, "host-999999-dead")
	SweepTemps(base)
	if _, err := os.Stat(dead); err != nil {
		t.Fatalf("a live host's folder was swept: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	next, err := OpenTemps(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a killed host's folder was left: %v", err)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Fatalf("a live host's folder was swept: %v", err)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(base); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the base after the last host closed: %v", err)
	}
	if _, err := live.For("b"); err == nil {
		t.Fatal("a closed host made a folder")
	}
}

// BenchmarkTrueTmp is BenchmarkTrue with the owner's temporary folder:
// `true` spawned plain, confined, and confined with the folder on /tmp
// (its workspace under the host's /tmp, kept in sight), interleaved; the
// folder's cost is tmp minus confined.
func BenchmarkTrueTmp(b *testing.B) {
	ws := b.TempDir()
	m, err := procs.New(procs.Config{SpillDir: filepath.Join(b.TempDir(), "spill")})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(b.Context())
	temps, err := OpenTemps(filepath.Join(b.TempDir(), "temps"))
	if err != nil {
		b.Fatal(err)
	}
	defer temps.Close()
	folder, err := temps.For("bench")
	if err != nil {
		b.Fatal(err)
	}
	p := &sandbox.Policy{DefaultMode: sandbox.WorkspaceWrite, WorkspaceRoot: ws}
	opt := Options{Hide: []string{temps.Base()}}
	c, err := Prepare(p, sandbox.WorkspaceWrite, opt)
	if err != nil {
		b.Skipf("no runner here: %v", err)
	}
	defer c.Close()
	opt.Tmp = folder
	ct, err := Prepare(p, sandbox.WorkspaceWrite, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer ct.Close()
	env := tmpEnv(folder, sandbox.WorkspaceWrite)
	spawn := func(confine func() error, env map[string]string) time.Duration {
		start := time.Now()
		p, err := m.Spawn(procs.Spec{Argv: []string{"true"}, Dir: ws, Owner: "bench", Confine: confine, Env: env})
		if err != nil {
			b.Fatal(err)
		}
		<-p.Done()
		m.Forget(p.ID)
		if r := p.Result(); r.ExitCode != 0 {
			b.Fatalf("true: %+v", r)
		}
		return time.Since(start)
	}
	var plain, confined, tmp []time.Duration
	for b.Loop() {
		plain = append(plain, spawn(nil, nil))
		confined = append(confined, spawn(c.Confine, nil))
		tmp = append(tmp, spawn(ct.Confine, env))
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(plain).Microseconds()), "plain-µs")
	b.ReportMetric(float64(med(confined).Microseconds()), "confined-µs")
	b.ReportMetric(float64(med(tmp).Microseconds()), "confined-tmp-µs")
	b.ReportMetric(float64((med(tmp) - med(plain)).Microseconds()), "overhead-µs")
}
