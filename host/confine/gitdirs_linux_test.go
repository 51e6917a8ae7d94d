package confine

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/internal/testneeds"
)

// runnerFor is ctx.sandbox with choice, or a skip when that runner cannot
// confine here.
func runnerFor(t *testing.T, choice string) *Runner {
	t.Helper()
	switch choice {
	case sandbox.RunnerBubblewrap:
		findBwrap(t)
	case sandbox.RunnerLandlock:
		if _, err := prepareLandlock(&sandbox.Policy{}, sandbox.ReadOnly, Options{}); err != nil {
			t.Skipf("no landlock runner here: %v", err)
		}
	}
	r := NewRunner(choice, Options{})
	t.Cleanup(func() { r.Close() })
	return r
}

// wrappedRun runs script under bash in dir as the sandboxing executor
// does: wrapped, spawned under its confinement, settled once it ended.
func wrappedRun(t *testing.T, r *Runner, m *procs.Manager, p *sandbox.Policy, dir, script string) (procs.Result, []*sandbox.Undone) {
	t.Helper()
	ctx := t.Context()
	w, err := r.Wrap(ctx, &sandbox.WrapRequest{Argv: []string{"bash", "-c", script}, Mode: sandbox.WorkspaceWrite, Policy: p})
	if err != nil {
		t.Fatalf("wrap: %v", err)
	}
	if w.Settle == "" {
		t.Fatalf("workspace-write without a watch to settle: %+v", w)
	}
	spec := procs.Spec{Argv: w.Argv, Dir: dir, Owner: "test", Timeout: 30 * time.Second,
		Env: map[string]string{"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "HOME": dir}}
	if w.Confinement != "" {
		if spec.Confine, err = r.Confinement(w.Confinement); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := m.Spawn(spec)
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	select {
	case <-pr.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("%q did not end", script)
	}
	st, err := r.Settle(ctx, &sandbox.SettleRequest{Settle: w.Settle})
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	return pr.Result(), st.Undone
}

// gitWorld is a workspace holding a repository with a submodule, a
// linked worktree and a nested repository, and a bare repository outside
// to fetch from.
type gitWorld struct {
	ws, bare string
	policy   *sandbox.Policy
}

func newGitWorld(t *testing.T) *gitWorld {
	t.Helper()
	testneeds.Command(t, "git")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	base := t.TempDir()
	ws, lib, bare := filepath.Join(base, "ws"), filepath.Join(base, "lib"), filepath.Join(base, "bare.git")
	for _, d := range []string{ws, lib} {
		must(t, os.Mkdir(d, 0o755))
	}
	gitIn(t, lib, "init", "-q")
	must(t, os.WriteFile(filepath.Join(lib, "l.txt"), []byte("lib\n"), 0o644))
	gitIn(t, lib, "add", ".")
	gitIn(t, lib, "commit", "-qm", "lib")
	gitIn(t, ws, "init", "-q")
	must(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644))
	gitIn(t, ws, "add", ".")
	gitIn(t, ws, "commit", "-qm", "one")
	gitIn(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "sub")
	gitIn(t, ws, "commit", "-qm", "sub")
	gitIn(t, ws, "worktree", "add", "-q", "wt")
	gitIn(t, ws, "clone", "-q", "--bare", ws, bare)
	gitIn(t, ws, "init", "-q", "--bare", "vendor.git")
	nested := filepath.Join(ws, "nested")
	must(t, os.Mkdir(nested, 0o755))
	gitIn(t, nested, "init", "-q")
	for _, hooks := range []string{ws + "/.git/hooks", ws + "/.git/modules/sub/hooks", nested + "/.git/hooks"} {
		must(t, os.MkdirAll(hooks, 0o755))
	}
	var protected []string
	for _, rel := range []string{".git/config", ".git/hooks", ".claude", ".codex", ".envrc", ".vscode", ".idea"} {
		protected = append(protected, filepath.Join(ws, rel))
	}
	return &gitWorld{ws: ws, bare: bare, policy: &sandbox.Policy{WorkspaceRoot: ws, ProtectedPaths: protected}}
}

// plantings are what a confined command must not leave for git to run
// later outside the sandbox: refused (a read-only file) or undone once it
// ended (a file that is new; of a new git directory, what git would run).
var plantings = []struct {
	name, script string
	undone       string // the path Settle must name; "" when refused
	check        string // a path that must be as it was, or absent
}{
	{"submodule config", `printf '[core]\n\tfsmonitor = touch /tmp/x\n' >> .git/modules/sub/config`, "", ".git/modules/sub/config"},
	{"submodule hook", `printf '#!/bin/sh\n' > .git/modules/sub/hooks/pre-commit`, "", ".git/modules/sub/hooks/pre-commit"},
	{"nested config", `printf '[core]\n\tfsmonitor = touch /tmp/x\n' >> nested/.git/config`, "", "nested/.git/config"},
	{"nested hook", `printf '#!/bin/sh\n' > nested/.git/hooks/post-checkout`, "", "nested/.git/hooks/post-checkout"},
	{"nested repo moved away", `mv nested nested.old && mkdir -p nested/.git/hooks && printf x > nested/.git/hooks/pre-commit`, "", "nested/.git/hooks/pre-commit"},
	{"bare repository config", `printf '[core]\n\tsshCommand = touch /tmp/x\n' >> vendor.git/config`, "", "vendor.git/config"},
	{"bare repository hook", `printf '#!/bin/sh\n' > vendor.git/hooks/post-update`, "", "vendor.git/hooks/post-update"},
	{"top-level hook", `printf '#!/bin/sh\n' > .git/hooks/pre-commit`, "", ".git/hooks/pre-commit"},
	{"info attributes", `mkdir -p .git/info && printf '* filter=x\n' >> .git/info/attributes`, "", ".git/info/attributes"},
	{"submodule gitlink", `printf 'gitdir: ../evil\n' > sub/.git`, "", "sub/.git"},
	{"worktree commondir", `printf '../../../evil\n' > .git/worktrees/wt/commondir`, "", ".git/worktrees/wt/commondir"},
	{"worktree gitdir", `printf '/tmp/elsewhere/.git\n' > .git/worktrees/wt/gitdir`, "", ".git/worktrees/wt/gitdir"},
	{"new commondir", `mkdir -p evil/hooks && printf '../evil\n' > .git/commondir`, ".git/commondir", ".git/commondir"},
	{"new config.worktree", `printf '[core]\n\tfsmonitor = touch /tmp/x\n' > .git/config.worktree`, ".git/config.worktree", ".git/config.worktree"},
	{"new nested repository", `git init -q fresh && printf '#!/bin/sh\n' > fresh/.git/hooks/pre-commit`, "fresh/.git/hooks", "fresh/.git/hooks"},
	{"new .git file", `mkdir -p other evil2 && printf 'gitdir: ../evil2\n' > other/.git`, "other/.git", "other/.git"},
	{"new .git deep in a new folder", `mkdir -p d1/d2/d3 && git init -q d1/d2/d3`, "d1/d2/d3/.git/config", "d1/d2/d3/.git/config"},
	{"new .git moved in", `mkdir -p /tmp/x$$/r && git init -q /tmp/x$$/r 2>/dev/null; mkdir -p m && git init -q m/r && mv m moved`, "moved/r/.git/config", "moved/r/.git/config"},
	{"new submodule git directory", `mkdir -p .git/modules/evil/hooks && printf x > .git/modules/evil/config`, ".git/modules/evil", ".git/modules/evil"},
	{"new worktree git directory", `mkdir -p .git/worktrees/evil && printf '../..\n' > .git/worktrees/evil/commondir`, ".git/worktrees/evil/commondir", ".git/worktrees/evil/commondir"},
	{"new bare repository", `git init -q --bare cache/b.git`, "cache/b.git/config", "cache/b.git/config"},
	{"envrc", `printf 'echo pwned\n' > .envrc`, ".envrc", ".envrc"},
	{"vscode", `mkdir .vscode && printf '{}' > .vscode/settings.json`, ".vscode", ".vscode"},
	{"idea", `mkdir -p .idea`, ".idea", ".idea"},
}

// Under both runners, each planting is refused or undone and said, and
// the file git would read is as it was.
func TestGitPlantings(t *testing.T) {
	for _, choice := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(choice, func(t *testing.T) {
			r := runnerFor(t, choice)
			m := newManager(t)
			for _, pl := range plantings {
				t.Run(pl.name, func(t *testing.T) {
					g := newGitWorld(t)
					check := filepath.Join(g.ws, pl.check)
					before := snapshot(t, check)
					res, undone := wrappedRun(t, r, m, g.policy, g.ws, pl.script)
					var paths []string
					for _, u := range undone {
						paths = append(paths, u.Path)
					}
					if pl.undone == "" {
						if res.ExitCode == 0 {
							t.Errorf("the planting got through: %s", output(res))
						}
					} else if want := filepath.Join(g.ws, pl.undone); !slices.Contains(paths, want) {
						t.Errorf("undone %v, want %s among them (%s)", paths, want, output(res))
					}
					if after := snapshot(t, check); after != before {
						t.Errorf("%s changed:\n%s\nnow:\n%s", pl.check, before, after)
					}
				})
			}
		})
	}
}

// What a command does with git in the workspace keeps working, and
// nothing of it is undone.
func TestGitWorkflows(t *testing.T) {
	for _, choice := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(choice, func(t *testing.T) {
			r := runnerFor(t, choice)
			m := newManager(t)
			g := newGitWorld(t)
			script := `set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
echo two >> a.txt && git commit -qam two
git branch feature && git checkout -q feature
echo three >> a.txt && git commit -qam three
git checkout -q main
echo wip >> a.txt && git stash -q && git stash pop -q && git checkout -q -- a.txt
echo four > b.txt && git add b.txt && git commit -qm four
git rebase -q main feature
git fetch -q ` + g.bare + ` main
git log --oneline | wc -l
(cd nested && echo n > n.txt && git add n.txt && git commit -qm n)
(cd wt && echo w > w.txt && git add w.txt && git commit -qm w)
(cd sub && git status --short)
git status --short
echo done`
			res, undone := wrappedRun(t, r, m, g.policy, g.ws, script)
			if res.ExitCode != 0 || !strings.HasSuffix(string(res.Stdout.Data), "done\n") {
				t.Fatalf("git in the workspace failed:\n%s", output(res))
			}
			if len(undone) != 0 {
				t.Errorf("undid %v after ordinary git work", undone)
			}
		})
	}
}

// A unix socket bound just before the command (none of the host's
// services' settled age) cannot be reached under either runner, while
// what ordinary programs do keeps working (pipes, socketpair, git,
// python).
func TestFreshUnixSocketRefused(t *testing.T) {
	py := testneeds.Command(t, "python3")
	for _, choice := range []string{sandbox.RunnerLandlock, sandbox.RunnerBubblewrap} {
		t.Run(choice, func(t *testing.T) {
			r := runnerFor(t, choice)
			m := newManager(t)
			g := newGitWorld(t)
			sock := filepath.Join(t.TempDir(), "fresh.sock")
			lis, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan struct{}, 8)
			go func() {
				for {
					c, err := lis.Accept()
					if err != nil {
						return
					}
					got <- struct{}{}
					c.Close()
				}
			}()
			t.Cleanup(func() { lis.Close() })
			connect := py + ` -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("CONNECTED")' ` + sock
			res, _ := wrappedRun(t, r, m, g.policy, g.ws, connect)
			if res.ExitCode == 0 || strings.Contains(string(res.Stdout.Data), "CONNECTED") {
				t.Errorf("a fresh unix socket was reached:\n%s", output(res))
			}
			select {
			case <-got:
				t.Error("the listener got a connection")
			case <-time.After(100 * time.Millisecond):
			}
			ordinary := `set -e
seq 1 1000 | sort -rn | head -1
` + py + ` -c 'import socket,subprocess; a,b=socket.socketpair(); a.send(b"p"); print(b.recv(1).decode()); print(subprocess.run(["echo","sub"],capture_output=True,text=True).stdout.strip())'
git status --short >/dev/null && echo git`
			res, _ = wrappedRun(t, r, m, g.policy, g.ws, ordinary)
			if res.ExitCode != 0 || string(res.Stdout.Data) != "1000\np\nsub\ngit\n" {
				t.Errorf("ordinary programs broke:\n%s", output(res))
			}
			// Unconfined, the same connect gets through: the probe works.
			out, err := exec.CommandContext(context.Background(), "bash", "-c", connect).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "CONNECTED") {
				t.Fatalf("unconfined the connect fails too, so this proves nothing: %v %s", err, out)
			}
		})
	}
}

// A walk over the roots (after lost events, or with no watch left) takes
// only what is new for a command's: the repositories and protected paths
// that were there stay whole.
func TestGuardWalkKeepsWhatWasThere(t *testing.T) {
	gw := newGitWorld(t)
	must(t, os.WriteFile(filepath.Join(gw.ws, ".envrc"), []byte("x"), 0o644))
	for _, noWatch := range []bool{false, true} {
		g := newGuard([]string{gw.ws}, gw.policy.ProtectedPaths)
		before := snapshot(t, filepath.Join(gw.ws, ".git", "config"), filepath.Join(gw.ws, "nested", ".git", "config"), filepath.Join(gw.ws, ".envrc"))
		mark := g.mark()
		if noWatch {
			g.mu.Lock()
			unix.Close(g.fd)
			g.fd = -1
			g.mu.Unlock()
			// Made "by the command".
			gitIn(t, gw.ws, "init", "-q", "late")
			must(t, os.WriteFile(filepath.Join(gw.ws, ".git", "config.worktree"), []byte("[core]\n"), 0o644))
			must(t, os.MkdirAll(filepath.Join(gw.ws, ".git", "modules", "evil", "hooks"), 0o755))
		} else {
			g.mu.Lock()
			for _, r := range g.roots {
				g.walk(r, true) // as after IN_Q_OVERFLOW
			}
			g.mu.Unlock()
		}
		undone, _ := g.settle(mark, false)
		g.close()
		var paths []string
		for _, u := range undone {
			paths = append(paths, u.path)
		}
		if noWatch {
			for _, want := range []string{"late/.git/config", ".git/config.worktree", ".git/modules/evil"} {
				if !slices.Contains(paths, filepath.Join(gw.ws, want)) {
					t.Errorf("without a watch, %s was not found: %v", want, paths)
				}
			}
			paths = slices.DeleteFunc(paths, func(p string) bool {
				return within(filepath.Join(gw.ws, "late"), p) || p == filepath.Join(gw.ws, ".git", "config.worktree") || p == filepath.Join(gw.ws, ".git", "modules", "evil")
			})
		}
		if len(paths) != 0 {
			t.Errorf("noWatch %v: undid what was there: %v", noWatch, paths)
		}
		if after := snapshot(t, filepath.Join(gw.ws, ".git", "config"), filepath.Join(gw.ws, "nested", ".git", "config"), filepath.Join(gw.ws, ".envrc")); after != before {
			t.Errorf("noWatch %v: changed:\n%s\nnow:\n%s", noWatch, before, after)
		}
	}
}

// What a command pays for the watch: the protected set, a mark and a
// settle, on a tree of some thousand folders.
func BenchmarkGuard(b *testing.B) {
	ws := b.TempDir()
	for i := range 40 {
		for j := range 100 {
			if err := os.MkdirAll(filepath.Join(ws, "d"+strconv.Itoa(i), "e"+strconv.Itoa(j)), 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	start := time.Now()
	g := newGuard([]string{ws}, []string{ws + "/.envrc"})
	defer g.close()
	walk := time.Since(start)
	for b.Loop() {
		g.paths()
		g.settle(g.mark(), false)
	}
	b.ReportMetric(float64(walk.Microseconds()), "first-walk-µs")
}

// A watch kept across settles (a terminal's shell between its commands)
// still owns what appears after each: another command's settle meanwhile
// forgets nothing of it.
func TestGuardKeepWatchesOn(t *testing.T) {
	ws := t.TempDir()
	envrc := filepath.Join(ws, ".envrc")
	g := newGuard([]string{ws}, []string{envrc})
	defer g.close()
	shell := g.mark()
	must(t, os.WriteFile(envrc, []byte("x"), 0o644))
	undone, next := g.settle(shell, true)
	if len(undone) != 1 || undone[0].path != envrc {
		t.Fatalf("the first settle undid %v, want %s", undone, envrc)
	}
	must(t, os.WriteFile(envrc, []byte("again"), 0o644))
	// Another command starts and ends after the shell's planting.
	other, _ := g.settle(g.mark(), false)
	if len(other) != 0 {
		t.Fatalf("another command's settle undid %v, which appeared before it started", other)
	}
	undone, _ = g.settle(next, false)
	if len(undone) != 1 || undone[0].path != envrc {
		t.Fatalf("the kept watch undid %v, want %s", undone, envrc)
	}
	if _, err := os.Lstat(envrc); !os.IsNotExist(err) {
		t.Fatalf(".envrc is still there: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.marks) != 0 || len(g.seen) != 0 {
		t.Fatalf("settled watches left marks %v and events %v", g.marks, g.seen)
	}
}
