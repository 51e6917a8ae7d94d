package sandboxexec

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/plugins/shell"
)

// The kernel's audit records of Landlock denials need the audit subsystem,
// which is off on most machines; the command's own errors are read
// instead. A denial is an error of EACCES, EPERM or EROFS that names a
// path the policy does not let the command write (outside the writable
// roots, or protected inside them), or a command killed by SIGSYS (a
// seccomp kill). Exits of 2, 126 or 127 without such an error are the
// command's own failures.

// deniedWords are how EACCES, EPERM, EROFS and EBUSY (a folder pinned
// because it holds a protected path) read in tools' errors, and how .NET
// (PowerShell's cmdlets, dotnet tools) says EACCES and EPERM: "Access to
// the path '/x' is denied."
var deniedWords = []string{"Permission denied", "Operation not permitted", "Read-only file system", "Device or resource busy", "Access to the path"}

// quoted finds the paths tools quote in their errors: 'x', "x", ‘x’, `x'.
var quoted = regexp.MustCompile("['\"‘`]((?:/|\\./|\\.\\./|~/)?[^'\"‘’`\\s][^'\"‘’`]*)['\"’]")

// judge marks info denied when the command's stderr or exit shows the
// sandbox refused something, naming the paths its errors give.
func judge(info *shell.SandboxInfo, sp *shell.SandboxPolicy, workdir string, stderr []byte, exit *int32, signal string) {
	if signal == "SIGSYS" || (exit != nil && *exit == 128+31) {
		info.Denied = true
		info.DenialSource = "errors"
	}
	for _, line := range bytes.Split(stderr, []byte("\n")) {
		l := string(line)
		if !slices.ContainsFunc(deniedWords, func(w string) bool { return strings.Contains(l, w) }) {
			continue
		}
		for _, path := range pathsIn(l) {
			if !filepath.IsAbs(path) {
				if workdir == "" {
					continue
				}
				path = filepath.Join(workdir, path)
			}
			path = filepath.Clean(path)
			// Inside a writable root, what is read-only is what the
			// sandbox keeps so: a protected path, or a git directory's
			// control files, which the runner finds itself.
			if writable(sp, path) && !strings.Contains(l, "Read-only file system") {
				continue
			}
			info.Denied = true
			info.DenialSource = "errors"
			if !slices.Contains(info.DeniedPaths, path) && len(info.DeniedPaths) < 16 {
				info.DeniedPaths = append(info.DeniedPaths, path)
			}
		}
	}
}

// pathsIn are the paths an error line names: quoted ones, and the
// "prog: PATH: reason" form of shells and many tools.
func pathsIn(line string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1]) // what tools quote in these errors is a file
	}
	if len(out) > 0 {
		return out
	}
	parts := strings.Split(line, ": ")
	for _, p := range parts[:max(len(parts)-1, 0)] {
		p = strings.TrimSpace(p)
		if strings.HasPrefix(p, "line ") {
			continue
		}
		if looksLikePath(p) && !strings.Contains(p, " ") {
			out = append(out, p)
		}
	}
	return out
}

func looksLikePath(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.Contains(s, "/")
}

// writable reports whether the policy lets a command write path: inside
// a writable root, not under a protected path, and not a folder holding
// one (those are pinned: they cannot be renamed or removed).
func writable(sp *shell.SandboxPolicy, path string) bool {
	if sp.GetMode() == sandbox.DangerFullAccess {
		return true
	}
	for _, p := range sp.GetProtectedPaths() {
		if within(path, p) || within(p, path) {
			return false
		}
	}
	for _, r := range slices.Concat(sp.GetWritableRoots(), sp.GetCacheRoots()) {
		if within(path, r) {
			return true
		}
	}
	return false
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// launchFailed reports a bubblewrap runner that could not set the
// sandbox up: bwrap's own error, exit 1, before the command ran.
func launchFailed(res *shell.RunResult) bool {
	return res.Sandbox != nil && strings.HasPrefix(res.Sandbox.Enforcement, sandbox.RunnerBubblewrap) &&
		res.ExitCode != nil && *res.ExitCode == 1 && bytes.HasPrefix(res.Stderr.GetData(), []byte("bwrap: "))
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
