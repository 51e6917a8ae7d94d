package composition

import (
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Cache roots (sandbox.cacheRoots) are folders outside the project that
// package managers and compilers write to (~/.npm, ~/.cache/pip,
// ~/.cache/go-build): writable in workspace-write mode like the writable
// roots, none unless the section names them. Each is an absolute path or
// starts with ~/ (the host's HOME), is made when missing, and may be
// neither /, HOME itself, nor a protected path, inside one, or around one
// (a folder holding a project is a writable root, not a cache). Nor may
// it be the workspace or a writable root, inside one, or around one: the
// runner watches those roots for new git directories and protected paths
// and leaves cache roots alone, so a cache root in the workspace would
// carve an unwatched hole in it.

// cacheRoot is one entry of the list, with its node for errors.
type cacheRoot struct {
	path string
	node *yaml.Node
}

// cacheRoots reads the list v of sandbox.cacheRoots at sp.
func (p *parser) cacheRoots(sp pair, v any, home string) []cacheRoot {
	list, ok := v.([]any)
	if !ok {
		p.errorf(sp.val, "sandbox.cacheRoots must be a list of paths, got %s", describe(v))
		return nil
	}
	var out []cacheRoot
	for i, item := range list {
		n := sp.val
		if s := resolve(sp.val); s.Kind == yaml.SequenceNode && i < len(s.Content) {
			n = s.Content[i]
		}
		s, ok := item.(string)
		if item == nil {
			p.errorf(n, "sandbox.cacheRoots: want a path, got null (a bare ~ is YAML's null: quote it)")
			continue
		}
		if !ok || s == "" {
			p.errorf(n, "sandbox.cacheRoots: want a path, got %s", describe(item))
			continue
		}
		path := s
		if s == "~" || strings.HasPrefix(s, "~/") {
			if home == "" {
				p.errorf(n, "sandbox.cacheRoots: %s starts with ~ but HOME is not set", s)
				continue
			}
			path = filepath.Join(home, strings.TrimPrefix(s, "~"))
		}
		if !filepath.IsAbs(path) {
			p.errorf(n, "sandbox.cacheRoots: %s is a relative path (a cache root is absolute, or starts with ~/)", s)
			continue
		}
		path = filepath.Clean(path)
		if path == "/" || (home != "" && sameDir(path, home)) {
			p.errorf(n, "sandbox.cacheRoots: %s cannot be a cache root: it would leave nothing outside the sandbox worth protecting (name the cache folders, e.g. ~/.npm)", path)
			continue
		}
		if err := os.MkdirAll(path, 0o755); err != nil {
			p.errorf(n, "sandbox.cacheRoots: %s cannot be made: %v", path, err)
			continue
		}
		real, err := filepath.EvalSymlinks(path)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(real); err == nil && !fi.IsDir() {
				p.errorf(n, "sandbox.cacheRoots: %s is not a directory", path)
				continue
			}
		}
		if err != nil {
			p.errorf(n, "sandbox.cacheRoots: %s: %v", path, err)
			continue
		}
		if real == "/" || (home != "" && sameDir(real, home)) {
			p.errorf(n, "sandbox.cacheRoots: %s (%s) cannot be a cache root: it would leave nothing outside the sandbox worth protecting", path, real)
			continue
		}
		out = append(out, cacheRoot{path: real, node: n})
	}
	return out
}

// checkCacheRoots refuses the cache roots that are, are inside, or hold a
// protected path, the workspace or a writable root, and keeps the others
// in sb.
func (p *parser) checkCacheRoots(sb *Sandbox, roots []cacheRoot) {
	for _, r := range roots {
		bad := ""
		for _, pp := range sb.ProtectedPaths {
			if inside(pp, r.path) || inside(r.path, pp) {
				bad = pp
				break
			}
		}
		if bad != "" {
			p.errorf(r.node, "sandbox.cacheRoots: %s cannot be a cache root: the protected path %s would be in it or around it (a project folder is a writable root: sandbox.writableRoots)", r.path, bad)
			continue
		}
		root := ""
		for _, w := range append([]string{sb.WorkspaceRoot}, sb.WritableRoots...) {
			if w != "" && (inside(w, r.path) || inside(r.path, w)) {
				root = w
				break
			}
		}
		if root != "" {
			what := "the writable root"
			if root == sb.WorkspaceRoot {
				what = "the workspace root"
			}
			p.errorf(r.node, "sandbox.cacheRoots: %s cannot be a cache root: it overlaps %s %s, where new git directories and protected paths are watched and cache roots are not (name a cache folder outside the writable roots)", r.path, what, root)
			continue
		}
		sb.CacheRoots = append(sb.CacheRoots, r.path)
	}
}

// inside reports whether path is dir or under it.
func inside(dir, path string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
