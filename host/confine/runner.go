package confine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/netproxy"
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
	nets     map[string]*netBox     // by id: the proxies of proxied confinements, for Settle
	closed   bool

	onNetwork atomic.Pointer[func(netproxy.Event)]

	landlockOnce sync.Once
	landlockErr  error
	bwrapOnce    sync.Once
	bwrap        wrapper
	bwrapErr     error
}

// wrapper is a runner that confines by wrapping the command line.
type wrapper interface {
	// wrap is Bubblewrap.Wrap; joined: the thread that forks bwrap is
	// in the proxied policy's namespace already.
	wrap(p *sandbox.Policy, mode string, opt Options, argv []string, joined bool) ([]string, error)
}

var _ sandbox.Sandboxes = (*Runner)(nil)

// NewRunner confines with choice ("auto", "landlock" or "bubblewrap";
// "" is auto); opt is added to every policy.
func NewRunner(choice string, opt Options) *Runner {
	return &Runner{opt: opt, choice: choice, prepared: map[string]confinement{}, guards: map[string]*guard{}, nets: map[string]*netBox{}}
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
	r.prepared, r.retired, r.guards, r.nets, r.closed = map[string]confinement{}, nil, map[string]*guard{}, map[string]*netBox{}, true
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
		Owner:    add.Owner,
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
	// One watch for both: the guard's, then the proxy's (wrapWith's).
	w.Settle = strings.Join(slices.DeleteFunc([]string{fmt.Sprintf("%s.%d", key, g.mark()), w.Settle}, func(s string) bool { return s == "" }), settleSep)
	return w, nil
}

// settleSep joins the parts of a settle token: the guard's watch
// ("g<key>.<mark>") and the proxy's ("n<id>.<mark>").
const settleSep = "+"

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
// that did not exist, a protected path that did not exist; and, for a
// proxied policy, tells what its proxy reached and refused since the
// wrap (or the last settle of the watch), each host once. With keep the
// watch goes on under the token returned (each token is settled once:
// until then what may be the command's is kept).
func (r *Runner) Settle(_ context.Context, req *sandbox.SettleRequest) (*sandbox.Settled, error) {
	type part struct {
		key  string
		mark uint64
		g    *guard
		box  *netBox
	}
	var parts []part
	r.mu.Lock()
	for _, text := range strings.Split(req.GetSettle(), settleSep) {
		key, markText, ok := strings.Cut(text, ".")
		mark, err := strconv.ParseUint(markText, 10, 64)
		pt := part{key: key, mark: mark, g: r.guards[key], box: r.nets[key]}
		if !ok || err != nil || (pt.g == nil && pt.box == nil) {
			r.mu.Unlock()
			return nil, unavailable("sandbox: the host holds no watch %q to settle (wrap the command again)", req.GetSettle())
		}
		parts = append(parts, pt)
	}
	r.mu.Unlock()
	out := &sandbox.Settled{}
	var kept []string
	for _, pt := range parts {
		var next uint64
		if pt.g != nil {
			var undone []undone
			undone, next = pt.g.settle(pt.mark, req.GetKeep())
			for _, u := range undone {
				out.Undone = append(out.Undone, &sandbox.Undone{Path: u.path, Why: u.why})
			}
		} else {
			var reached []string
			var denied []*sandbox.NetworkDenial
			reached, denied, next = pt.box.settle(pt.mark, req.GetKeep())
			out.NetworkReached = append(out.NetworkReached, reached...)
			out.NetworkDenied = append(out.NetworkDenied, denied...)
		}
		kept = append(kept, fmt.Sprintf("%s.%d", pt.key, next))
	}
	if req.GetKeep() {
		out.Settle = strings.Join(kept, settleSep)
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
	if proxied(p) {
		if err := rulesOf(p).Check(); err != nil {
			return unavailable("sandbox: the network rules: %v", err)
		}
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
	lists := func(lists ...[]string) {
		for _, list := range lists {
			fmt.Fprintf(h, "%d;", len(list))
			for _, s := range list {
				field(s)
			}
		}
	}
	field(mode)
	field(p.WorkspaceRoot)
	fmt.Fprintf(h, "%v;", p.Network)
	field(opt.Tmp)
	if proxied(p) {
		// Each owner's proxy is its own, and so is each set of rules.
		nr := p.GetNetworkRules()
		field("proxied")
		field(opt.Owner)
		field(nr.GetMode())
		lists(nr.GetAllow(), nr.GetDeny())
		var hosts []string
		for _, k := range slices.Sorted(maps.Keys(nr.GetHosts())) {
			hosts = append(hosts, k, nr.GetHosts()[k])
		}
		lists(hosts)
	}
	lists(p.WritableRoots, p.CacheRoots, p.ProtectedPaths, p.UnixSockets, opt.Hide, opt.Show, opt.ReadOnly)
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
		var box *netBox
		if proxied(req.Policy) {
			// The proxy listens in the namespace just built.
			if box, err = r.boxIn(req.Policy, opt.Owner, func() (proxyListeners, error) { return proxyListenersOf(next) }); err != nil {
				next.Close()
				return nil, err
			}
		}
		if ok {
			r.retired = append(r.retired, c)
		}
		r.prepared[token] = hold(next, opt, req.Mode, box)
	}
	w := &sandbox.Wrapped{Argv: req.Argv, Confinement: token, Runner: sandbox.RunnerLandlock}
	layers := []string{"landlock", "mount", "seccomp", "capabilities"}
	if h, ok := r.prepared[token].(*held); ok && h.box != nil {
		layers = append(layers, "network-proxy")
		w.Settle = h.box.watch()
	} else if !req.Policy.Network {
		layers = append(layers, "network")
	}
	if len(req.Policy.UnixSockets) > 0 {
		// socket(AF_UNIX) let through, the host's other sockets covered
		// in the mount namespace (socketsns_linux.go).
		layers = append(layers, "unix-socket-covers")
	}
	w.Enforcement = strings.Join(layers, ",")
	return w, nil
}

// boxIn starts the proxy of p for owner on the listeners listen opens,
// and registers it for Settle. r.mu is held.
func (r *Runner) boxIn(p *sandbox.Policy, owner string, listen func() (proxyListeners, error)) (*netBox, error) {
	lis, err := listen()
	if err != nil {
		return nil, unavailable("sandbox: the network proxy's listeners: %v", err)
	}
	box, err := r.openBox(rulesOf(p), owner, lis)
	if err != nil {
		return nil, unavailable("sandbox: %v", err)
	}
	r.nets[box.id] = box
	return box, nil
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
	argv, err := b.wrap(req.Policy, req.Mode, opt, req.Argv, proxied(req.Policy))
	if err != nil {
		return nil, unavailable("sandbox: %v", err)
	}
	w := &sandbox.Wrapped{Argv: argv, Runner: sandbox.RunnerBubblewrap, Enforcement: "bubblewrap"}
	if proxied(req.Policy) {
		return r.bwrapProxied(req, opt, w)
	}
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

// bwrapProxied is w, a proxied policy's bwrap command line, with the
// confinement that puts bwrap in the namespace of the proxy (one per
// token, as the landlock runner's).
func (r *Runner) bwrapProxied(req *sandbox.WrapRequest, opt Options, w *sandbox.Wrapped) (*sandbox.Wrapped, error) {
	withRule := len(req.Policy.UnixSockets) == 0
	token := "b" + Token(req.Policy, req.Mode, opt)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, unavailable("sandbox: the host is shutting down")
	}
	h, ok := r.prepared[token].(*held)
	if !ok {
		var c confinement
		box, err := r.boxIn(req.Policy, opt.Owner, func() (proxyListeners, error) {
			var lis proxyListeners
			var err error
			c, lis, err = newBwrapNet(withRule)
			return lis, err
		})
		if err != nil {
			return nil, err
		}
		// TMPDIR is bwrap's --setenv; the proxy's variables are both.
		h = hold(c, opt, sandbox.ReadOnly, box)
		r.prepared[token] = h
	}
	w.Confinement, w.Settle = token, h.box.watch()
	w.Enforcement = "bubblewrap,network-proxy"
	if withRule {
		w.Enforcement = "bubblewrap,seccomp,network-proxy"
	}
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
