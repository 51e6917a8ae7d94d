package composition

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Sandbox is the composition's sandbox section: the policy the host serves
// as ctx.sandboxPolicy to sandboxing executors. Paths are absolute, clean
// and with symlinks resolved; the section's relative paths are from the
// composition's folder.
type Sandbox struct {
	DefaultMode string // ModeReadOnly, ModeWorkspaceWrite or ModeDangerFullAccess
	// WorkspaceRoot is writable in workspace-write mode, and where
	// sandboxed commands start. A section that names none gets the
	// working directory of the process reading the file: the folder dsh
	// was started in, as a user starts it from their project.
	WorkspaceRoot string
	WritableRoots []string // more writable roots, beside the workspace
	CacheRoots    []string // writable like them; no protected paths in them (caches.go)
	Network       bool     // network reachable from confined commands
	// NetworkRules, when the section's network is a map: commands reach
	// the network only through the host's proxy, under these rules
	// (Network is then false).
	NetworkRules *NetworkRules
	// ProtectedPaths stay read-only inside the writable roots: .git/config,
	// .git/hooks, .claude, .codex, .envrc, .vscode and .idea of each root,
	// the composition file, and those the section adds.
	ProtectedPaths []string
	UnixSockets    []string // unix sockets at these paths may be reached
	// Runner is what confines commands: RunnerAuto (the default: landlock
	// where the kernel has it, else bubblewrap), RunnerLandlock or
	// RunnerBubblewrap.
	Runner string
	Pos    Pos // where the section is
}

// The sandbox modes.
const (
	ModeReadOnly         = "read-only"
	ModeWorkspaceWrite   = "workspace-write"
	ModeDangerFullAccess = "danger-full-access"
)

// The runners.
const (
	RunnerAuto       = "auto"
	RunnerLandlock   = "landlock"
	RunnerBubblewrap = "bubblewrap"
)

var (
	sandboxModes   = []string{ModeReadOnly, ModeWorkspaceWrite, ModeDangerFullAccess}
	sandboxRunners = []string{RunnerAuto, RunnerLandlock, RunnerBubblewrap}
	sandboxKeys    = []string{"defaultMode", "workspaceRoot", "writableRoots", "network", "protectedPaths", "unixSockets", "runner", "cacheRoots"}
	// protectedInRoot are kept read-only in every writable root: what
	// would let a command change how the agent's tools, git, the shell
	// (direnv) or an editor behave later. A commit still works:
	// .git/index, objects and refs stay writable. The runner adds every
	// other git directory's control files, and undoes any of these a
	// command creates.
	protectedInRoot = []string{".git/config", ".git/hooks", ".claude", ".codex", ".envrc", ".vscode", ".idea"}
)

// sandbox reads the sandbox section.
func (p *parser) sandbox(c *Composition, kp pair, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil && p.usable(kp.val) {
			p.errorf(kp.val, "sandbox must be a map with keys %s, got %s", strings.Join(sandboxKeys, ", "), describe(v))
		}
		return
	}
	sb := &Sandbox{DefaultMode: ModeWorkspaceWrite, Runner: RunnerAuto, Pos: p.pos(kp.key)}
	home, _ := p.lookup("HOME")
	// root resolves a writable root; started says the root is the folder
	// dsh was started in, not one the section names.
	root := func(n pair, s string, started bool) (string, bool) {
		from, use := fmt.Sprintf("relative paths are from the composition's folder, %s", c.Dir), "use a project folder"
		if started {
			from = "no workspaceRoot is named, so the workspace is the folder dsh was started in"
			use = from + ": start dsh in a project folder, or name one"
		}
		path := s
		if !filepath.IsAbs(path) {
			path = filepath.Join(c.Dir, path)
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			p.errorf(n.val, "sandbox.%s: %s does not exist (%s)", n.name, path, from)
			return "", false
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			p.errorf(n.val, "sandbox.%s: %s is not a directory", n.name, path)
			return "", false
		}
		if real == "/" || (home != "" && sameDir(real, home)) {
			p.errorf(n.val, "sandbox.%s: %s cannot be a writable root: it would leave nothing outside the sandbox worth protecting (%s)", n.name, real, use)
			return "", false
		}
		return real, true
	}
	path := func(s string) string {
		if !filepath.IsAbs(s) {
			s = filepath.Join(c.Dir, s)
		}
		if real, err := filepath.EvalSymlinks(s); err == nil {
			return real
		}
		return filepath.Clean(s)
	}
	strs := func(sp pair) ([]string, bool) {
		list, ok := m[sp.name].([]any)
		if !ok {
			p.errorf(sp.val, "sandbox.%s must be a list of paths, got %s", sp.name, describe(m[sp.name]))
			return nil, false
		}
		var out []string
		for _, item := range list {
			s, ok := item.(string)
			if !ok || s == "" {
				p.errorf(sp.val, "sandbox.%s: want paths, got %s", sp.name, describe(item))
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	var workspace string
	var workspacePair pair
	var networkSet bool
	var extraProtected []string
	var caches []cacheRoot
	for _, sp := range pairs(kp.val) {
		if !p.usable(sp.val) {
			continue
		}
		switch sp.name {
		case "defaultMode":
			s, _ := m[sp.name].(string)
			if !slices.Contains(sandboxModes, s) {
				p.errorf(sp.val, "sandbox.defaultMode: want one of %s, got %s", strings.Join(sandboxModes, ", "), describe(m[sp.name]))
				continue
			}
			sb.DefaultMode = s
		case "runner":
			s, _ := m[sp.name].(string)
			if !slices.Contains(sandboxRunners, s) {
				p.errorf(sp.val, "sandbox.runner: want one of %s, got %s", strings.Join(sandboxRunners, ", "), describe(m[sp.name]))
				continue
			}
			sb.Runner = s
		case "workspaceRoot":
			s, ok := m[sp.name].(string)
			if !ok || s == "" {
				p.errorf(sp.val, "sandbox.workspaceRoot must be a path, got %s", describe(m[sp.name]))
				continue
			}
			workspace, workspacePair = s, sp
		case "writableRoots":
			list, _ := strs(sp)
			for _, s := range list {
				if r, ok := root(sp, s, false); ok {
					sb.WritableRoots = append(sb.WritableRoots, r)
				}
			}
		case "network":
			p.network(sb, sp, m[sp.name])
			networkSet = true
		case "protectedPaths":
			list, _ := strs(sp)
			for _, s := range list {
				extraProtected = append(extraProtected, path(s))
			}
		case "cacheRoots":
			caches = p.cacheRoots(sp, m[sp.name], home)
		case "unixSockets":
			list, _ := strs(sp)
			for _, s := range list {
				sb.UnixSockets = append(sb.UnixSockets, path(s))
			}
		default:
			p.errorf(sp.key, "unknown sandbox key %q (allowed: %s)", sp.name, strings.Join(sandboxKeys, ", "))
		}
	}
	if workspacePair.val == nil {
		// None named: the folder dsh was started in, which is where a
		// user starts it for the project they mean.
		workspacePair = pair{name: "workspaceRoot", key: kp.key, val: kp.key}
		if wd, err := os.Getwd(); err != nil {
			p.errorf(kp.key, "sandbox: no workspaceRoot is named and the folder dsh was started in cannot be read (%v): name one", err)
		} else if r, ok := root(workspacePair, wd, true); ok {
			sb.WorkspaceRoot = r
		}
	} else if r, ok := root(workspacePair, workspace, false); ok {
		sb.WorkspaceRoot = r
	}
	if !networkSet {
		// Off where commands are confined; danger-full-access confines
		// nothing.
		sb.Network = sb.DefaultMode == ModeDangerFullAccess
	}
	for _, r := range append([]string{sb.WorkspaceRoot}, sb.WritableRoots...) {
		if r == "" {
			continue
		}
		for _, rel := range protectedInRoot {
			sb.ProtectedPaths = append(sb.ProtectedPaths, filepath.Join(r, rel))
		}
	}
	sb.ProtectedPaths = append(sb.ProtectedPaths, c.File)
	for _, x := range extraProtected {
		if !slices.Contains(sb.ProtectedPaths, x) {
			sb.ProtectedPaths = append(sb.ProtectedPaths, x)
		}
	}
	p.checkCacheRoots(sb, caches)
	c.Sandbox = sb
}

// sameDir reports whether a and b are the same directory.
func sameDir(a, b string) bool {
	if real, err := filepath.EvalSymlinks(b); err == nil {
		b = real
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// String says the policy in one line, for logs and dsh config.
func (s *Sandbox) String() string {
	if s == nil {
		return "no sandbox section"
	}
	network := fmt.Sprint(s.Network)
	if s.NetworkRules != nil {
		network = s.NetworkRules.String()
	}
	return fmt.Sprintf("%s, workspace %s, %d more writable roots, %d cache roots, network %s, %d protected paths, %d unix sockets, runner %s",
		s.DefaultMode, s.WorkspaceRoot, len(s.WritableRoots), len(s.CacheRoots), network, len(s.ProtectedPaths), len(s.UnixSockets), s.Runner)
}
