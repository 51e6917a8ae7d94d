package confine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/internal/seam"
)

// confinement is a policy made ready for the landlock runner.
type confinement interface {
	// Confine restricts the calling OS thread.
	Confine() error
	// Stale reports that the policy's paths changed since it was made
	// ready (a protected path appeared or went): make it ready again.
	Stale() bool
	Close() error
}

// Runner is ctx.sandbox: it confines commands under per-call policies
// with the runner the composition chose, and holds the confinements it
// made ready (one per policy) for ctx.subprocess to apply.
type Runner struct {
	opt Options

	mu       sync.Mutex
	choice   string
	prepared map[string]confinement // by token
	retired  []confinement          // replaced while a spawn may still use them
	guards   map[string]*guard      // by guardKey: one per set of writable roots and protected paths
	closed   bool

	landlockOnce sync.Once
	landlockErr  error
	bwrapOnce    sync.Once
	bwrap        wrapper
	bwrapErr     error
}

// wrapper is a runner that confines by wrapping the command line.
type wrapper interface {
	Wrap(p *sandbox.Policy, mode string, opt Options, argv []string) ([]string, error)
}

var _ sandbox.Sandboxes = (*Runner)(nil)

// NewRunner confines with choice ("auto", "landlock" or "bubblewrap";
// "" is auto); opt is added to every policy.
func NewRunner(choice string, opt Options) *Runner {
	return &Runner{opt: opt, choice: choice, prepared: map[string]confinement{}, guards: map[string]*guard{}}
}

// SetChoice changes the runner for the commands wrapped from now on.
func (r *Runner) SetChoice(choice string) {
	r.mu.Lock()
	r.choice = choice
	r.mu.Unlock()
}

// Close releases every confinement made ready; later spawns under them
// are refused.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, c := range r.prepared {
		errs = append(errs, c.Close())
	}
	for _, c := range r.retired {
		errs = append(errs, c.Close())
	}
	for _, g := range r.guards {
		g.close()
	}
	r.prepared, r.retired, r.guards, r.closed = map[string]confinement{}, nil, map[string]*guard{}, true
	return errors.Join(errs...)
}

func unavailable(format string, args ...any) error {
	return seam.New(sandbox.ErrUnavailable, fmt.Sprintf(format, args...))
}

// Wrap confines under the host's options alone.
func (r *Runner) Wrap(_ context.Context, req *sandbox.WrapRequest) (*sandbox.Wrapped, error) {
	return r.wrap(req, Options{})
}

// Owned is ctx.sandbox for one plugin: Add gives, for a request, the
// options of the moment beside the host's (the directories of the owner's
// spill files its commands may read, the plugin binaries the host runs
// now).
type Owned struct {
	R   *Runner
	Add func(context.Context) Options
}

func (o Owned) Wrap(ctx context.Context, req *sandbox.WrapRequest) (*sandbox.Wrapped, error) {
	var add Options
	if o.Add != nil {
		add = o.Add(ctx)
	}
	return o.R.wrap(req, add)
}

func (o Owned) Settle(ctx context.Context, req *sandbox.SettleRequest) (*sandbox.Settled, error) {
	return o.R.Settle(ctx, req)
}

func (r *Runner) wrap(req *sandbox.WrapRequest, add Options) (*sandbox.Wrapped, error) {
	opt := Options{
		Hide:     append(slices.Clone(r.opt.Hide), add.Hide...),
		Show:     append(slices.Clone(r.opt.Show), add.Show...),
		ReadOnly: append(slices.Clone(r.opt.ReadOnly), add.ReadOnly...),
		Tmp:      add.Tmp,
	}
	if len(req.Argv) == 0 {
		return nil, unavailable("sandbox: nothing to confine (an empty command line)")
	}
	if err := check(req.Policy, req.Mode); err != nil {
		return nil, err
	}
	// Every git directory in the writable roots is kept like the
	// protected paths (gitdirs_linux.go); what no runner can stop being
	// created is undone at Settle.
	var g *guard
	var key string
	if req.Mode == sandbox.WorkspaceWrite {
		g, key = r.guardFor(req.Policy)
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return nil, unavailable("sandbox: the host is shutting down")
		}
		if g != nil {
			kept, _ := g.paths()
			opt.ReadOnly = append(opt.ReadOnly, kept...)
		}
	}
	w, err := r.wrapWith(req, opt)
	if err != nil || g == nil {
		return w, err
	}
	w.Settle = fmt.Sprintf("%s.%d", key, g.mark())
	return w, nil
}

// guardFor is the guard of p's writable roots and protected paths, made
// (the roots walked once) on first use. Cache roots are not among them:
// walking and watching a package manager's cache would cost seconds and
// the inotify watches, and the bare repositories a tool keeps there (the
// Go module cache's) must keep their config.
func (r *Runner) guardFor(p *sandbox.Policy) (*guard, string) {
	roots := slices.Compact(slices.Sorted(slices.Values(append([]string{p.WorkspaceRoot}, p.WritableRoots...))))
	h := sha256.New()
	for _, list := range [][]string{roots, p.ProtectedPaths} {
		fmt.Fprintf(h, "%d;", len(list))
		for _, s := range list {
			fmt.Fprintf(h, "%d:%s;", len(s), s)
		}
	}
	key := "g" + hex.EncodeToString(h.Sum(nil)[:12])
	r.mu.Lock()
	g, ok := r.guards[key]
	closed := r.closed
	r.mu.Unlock()
	if ok || closed {
		return g, key
	}
	// The walk may take a while on a big tree: other spawns go on.
	made := newGuard(roots, p.ProtectedPaths)
	if made == nil {
		return nil, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := r.guards[key]; ok || r.closed {
		made.close()
		return g, key
	}
	r.guards[key] = made
	return made, key
}

// Settle undoes what the command a Wrap confined created that it may not
// have: a new git directory or .git file, a git directory's control entry
// that did not exist, a protected path that did not exist. With keep the
// watch goes on under the token returned (each token is settled once:
// until then what may be the command's is kept).
func (r *Runner) Settle(_ context.Context, req *sandbox.SettleRequest) (*sandbox.Settled, error) {
	key, markText, ok := strings.Cut(req.GetSettle(), ".")
	mark, err := strconv.ParseUint(markText, 10, 64)
	r.mu.Lock()
	g := r.guards[key]
	r.mu.Unlock()
	if !ok || err != nil || g == nil {
		return nil, unavailable("sandbox: the host holds no watch %q to settle (wrap the command again)", req.GetSettle())
	}
	out := &sandbox.Settled{}
	undone, next := g.settle(mark, req.GetKeep())
	for _, u := range undone {
		out.Undone = append(out.Undone, &sandbox.Undone{Path: u.path, Why: u.why})
	}
	if req.GetKeep() {
		out.Settle = fmt.Sprintf("%s.%d", key, next)
	}
	return out, nil
}

func (r *Runner) wrapWith(req *sandbox.WrapRequest, opt Options) (*sandbox.Wrapped, error) {
	r.mu.Lock()
	choice := r.choice
	r.mu.Unlock()
	switch choice {
	case "", "auto":
		w, err := r.wrapLandlock(req, opt)
		if err == nil || !errors.Is(r.landlockAvailable(), errNoLandlock) {
			return w, err
		}
		if _, berr := r.bubblewrap(); berr != nil {
			return nil, unavailable("no sandbox runner works here: %v; and %v", r.landlockAvailable(), berr)
		}
		return r.wrapBubblewrap(req, opt)
	case sandbox.RunnerLandlock:
		return r.wrapLandlock(req, opt)
	case sandbox.RunnerBubblewrap:
		return r.wrapBubblewrap(req, opt)
	}
	return nil, unavailable("sandbox: unknown runner %q", choice)
}

// check refuses a policy the runners cannot apply as asked.
func check(p *sandbox.Policy, mode string) error {
	switch mode {
	case sandbox.ReadOnly, sandbox.WorkspaceWrite:
	case sandbox.DangerFullAccess:
		return unavailable("sandbox: %s confines nothing: run the command without the sandbox", mode)
	default:
		return unavailable("sandbox: unknown mode %q (want %s or %s)", mode, sandbox.ReadOnly, sandbox.WorkspaceWrite)
	}
	if p == nil {
		return unavailable("sandbox: no policy given")
	}
	if mode == sandbox.WorkspaceWrite && p.WorkspaceRoot == "" {
		return unavailable("sandbox: %s needs a workspace root", mode)
	}
	for _, list := range [][]string{{p.WorkspaceRoot}, p.WritableRoots, p.CacheRoots, p.ProtectedPaths, p.UnixSockets} {
		for _, path := range list {
			if path != "" && (!filepath.IsAbs(path) || filepath.Clean(path) != path) {
				return unavailable("sandbox: the policy's path %q is not absolute and clean", path)
			}
			if path == "/" {
				return unavailable("sandbox: / cannot be a root of the policy")
			}
		}
	}
	// The guard does not watch cache roots, so one that is, holds or is
	// inside a root it watches would leave part of that root unguarded
	// or guarded by chance.
	for _, c := range p.CacheRoots {
		for _, r := range append([]string{p.WorkspaceRoot}, p.WritableRoots...) {
			if r != "" && overlap(c, r) {
				return unavailable("sandbox: the cache root %s overlaps the writable root %s (a cache root is a folder outside every writable root)", c, r)
			}
		}
	}
	return nil
}

// overlap reports whether the clean paths a and b are one folder or one
// holds the other.
func overlap(a, b string) bool {
	in := func(path, dir string) bool {
		return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
	}
	return in(a, b) || in(b, a)
}

// errNoLandlock marks a kernel without the landlock runner's mechanisms
// (auto then tries bubblewrap); other failures are the policy's.
var errNoLandlock = errors.New("the landlock runner is not available here")

// landlockAvailable is nil once a trivial policy could be made ready.
func (r *Runner) landlockAvailable() error {
	r.landlockOnce.Do(func() {
		c, err := prepareLandlock(&sandbox.Policy{}, sandbox.ReadOnly, Options{})
		if err != nil {
			r.landlockErr = fmt.Errorf("%w: %v", errNoLandlock, err)
			return
		}
		_ = c.Close()
	})
	return r.landlockErr
}

// Token names the confinement of mode under p with opt: the same policy
// is the same token, made ready once.
func Token(p *sandbox.Policy, mode string, opt Options) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(mode)
	field(p.WorkspaceRoot)
	fmt.Fprintf(h, "%v;", p.Network)
	field(opt.Tmp)
	for _, list := range [][]string{p.WritableRoots, p.CacheRoots, p.ProtectedPaths, p.UnixSockets, opt.Hide, opt.Show, opt.ReadOnly} {
		fmt.Fprintf(h, "%d;", len(list))
		for _, s := range list {
			field(s)
		}
	}
	return "c" + hex.EncodeToString(h.Sum(nil)[:12])
}

func (r *Runner) wrapLandlock(req *sandbox.WrapRequest, opt Options) (*sandbox.Wrapped, error) {
	if err := r.landlockAvailable(); err != nil {
		return nil, seam.Wrap(sandbox.ErrUnavailable, err)
	}
	token := Token(req.Policy, req.Mode, opt)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, unavailable("sandbox: the host is shutting down")
	}
	if c, ok := r.prepared[token]; !ok || c.Stale() {
		next, err := prepareLandlock(req.Policy, req.Mode, opt)
		if err != nil {
			return nil, unavailable("sandbox: %v", err)
		}
		if ok {
			r.retired = append(r.retired, c)
		}
		r.prepared[token] = hold(next, opt.Tmp, req.Mode)
	}
	layers := []string{"landlock", "mount", "seccomp", "capabilities"}
	if !req.Policy.Network {
		layers = append(layers, "network")
	}
	if len(req.Policy.UnixSockets) > 0 {
		// socket(AF_UNIX) let through, the host's other sockets covered
		// in the mount namespace (socketsns_linux.go).
		layers = append(layers, "unix-socket-covers")
	}
	return &sandbox.Wrapped{Argv: req.Argv, Confinement: token, Runner: sandbox.RunnerLandlock, Enforcement: strings.Join(layers, ",")}, nil
}

func (r *Runner) bubblewrap() (wrapper, error) {
	r.bwrapOnce.Do(func() { r.bwrap, r.bwrapErr = findBubblewrap() })
	return r.bwrap, r.bwrapErr
}

func (r *Runner) wrapBubblewrap(req *sandbox.WrapRequest, opt Options) (*sandbox.Wrapped, error) {
	b, err := r.bubblewrap()
	if err != nil {
		return nil, unavailable("sandbox: %v", err)
	}
	argv, err := b.Wrap(req.Policy, req.Mode, opt, req.Argv)
	if err != nil {
		return nil, unavailable("sandbox: %v", err)
	}
	w := &sandbox.Wrapped{Argv: argv, Runner: sandbox.RunnerBubblewrap, Enforcement: "bubblewrap"}
	if len(req.Policy.UnixSockets) > 0 {
		// The policy names sockets: bubblewrap lets every unix socket
		// through but those it covers (Bubblewrap.Wrap), so a socket
		// bound less than socketSettle ago is reachable, as under the
		// landlock runner. Letting only the named ones through is the
		// place for a filter that reads connect's address (a seccomp user
		// notification) or Landlock's resolve_unix (ABI 9).
		return w, nil
	}
	// No unix socket at all, whatever its age: a seccomp filter on the
	// thread that forks bwrap (socketRule).
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, unavailable("sandbox: the host is shutting down")
	}
	if _, ok := r.prepared[socketRuleToken]; !ok {
		c, err := newSocketRule()
		if err != nil {
			return nil, unavailable("sandbox: %v", err)
		}
		r.prepared[socketRuleToken] = c
	}
	w.Confinement, w.Enforcement = socketRuleToken, "bubblewrap,seccomp"
	return w, nil
}

// socketRuleToken names the bubblewrap runner's confinement (socketRule).
const socketRuleToken = "bwrap-no-unix-sockets"

// Confinement is how ctx.subprocess restricts the thread that forks a
// command spawned under token; an unknown token is an error (nothing may
// run unconfined).
func (r *Runner) Confinement(token string) (func() error, error) {
	r.mu.Lock()
	c, ok := r.prepared[token]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("the host holds no confinement %q (ask ctx.sandbox to wrap the command again)", token)
	}
	return c.Confine, nil
}
