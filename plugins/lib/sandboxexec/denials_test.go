package sandboxexec

import (
	"slices"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/plugins/shell"
)

func code(c int32) *int32 { return &c }

// What counts as a denial: an EACCES, EPERM or EROFS on a path the policy
// does not let the command write, or a SIGSYS; a failure of the command's
// own (a missing file, a syntax error, a write the policy allows that
// failed for another reason) does not.
func TestJudge(t *testing.T) {
	ws := &shell.SandboxPolicy{Mode: "workspace-write", WritableRoots: []string{"/w", "/cache"}, ProtectedPaths: []string{"/w/.git/config", "/w/.git/hooks"}}
	ro := &shell.SandboxPolicy{Mode: "read-only"}
	for _, c := range []struct {
		name   string
		sp     *shell.SandboxPolicy
		stderr string
		exit   *int32
		signal string
		denied bool
		paths  []string
	}{
		{"bash redirect outside", ws, "bash: line 1: /etc/x: Permission denied\n", code(1), "", true, []string{"/etc/x"}},
		{"touch outside, quoted", ws, "touch: cannot touch '/tmp/y': Read-only file system\n", code(1), "", true, []string{"/tmp/y"}},
		{"python", ws, "PermissionError: [Errno 13] Permission denied: '/opt/z'\n", code(1), "", true, []string{"/opt/z"}},
		{"chmod outside", ws, "chmod: changing permissions of '/etc/passwd': Operation not permitted\n", code(1), "", true, []string{"/etc/passwd"}},
		{"a protected path inside a root", ws, "bash: line 1: /w/.git/config: Read-only file system\n", code(1), "", true, []string{"/w/.git/config"}},
		{"under a protected folder", ws, "cp: cannot create regular file '/w/.git/hooks/pre-commit': Read-only file system\n", code(1), "", true, []string{"/w/.git/hooks/pre-commit"}},
		{"relative, from the workdir", ro, "touch: cannot touch 'f': Read-only file system\n", code(1), "", true, []string{"/w/f"}},
		{"exit 126 with such an error", ws, "bash: line 1: /usr/local/bin/tool: Permission denied\n", code(126), "", true, []string{"/usr/local/bin/tool"}},
		{"renaming a folder that holds a protected path", ws, "mv: cannot move '.git' to 'g2': Device or resource busy\n", code(1), "", true, []string{"/w/.git"}},
		{"a nested repository's config", ws, "bash: line 1: /w/nested/.git/config: Read-only file system\n", code(1), "", true, []string{"/w/nested/.git/config"}},
		{"busy elsewhere in a root", ws, "rmdir: failed to remove '/w/mnt': Device or resource busy\n", code(1), "", false, nil},
		{"PowerShell, EACCES", ws, "New-Item: Access to the path '/etc/x' is denied.\n", code(1), "", true, []string{"/etc/x"}},
		{"PowerShell, EROFS", ws, "Set-Content: Read-only file system : '/tmp/y'\n", code(1), "", true, []string{"/tmp/y"}},
		{"PowerShell, inside a writable root", ws, "Out-File: Access to the path '/w/locked' is denied.\n", code(1), "", false, nil},
		{"seccomp kill", ws, "", code(159), "", true, nil},
		{"SIGSYS", ws, "", nil, "SIGSYS", true, nil},
		{"inside a writable root", ws, "bash: line 1: /w/locked: Permission denied\n", code(1), "", false, nil},
		{"another writable root", ws, "touch: cannot touch '/cache/x': Permission denied\n", code(1), "", false, nil},
		{"not found", ws, "cat: /etc/nope: No such file or directory\n", code(1), "", false, nil},
		{"syntax error, exit 2", ws, "bash: -c: line 1: syntax error near unexpected token `)'\n", code(2), "", false, nil},
		{"command not found, 127", ws, "bash: line 1: frob: command not found\n", code(127), "", false, nil},
		{"126 without such an error", ws, "bash: line 1: ./x: cannot execute binary file: Exec format error\n", code(126), "", false, nil},
		{"no path named", ws, "ping: socket: Operation not permitted\n", code(2), "", false, nil},
	} {
		info := &shell.SandboxInfo{Mode: c.sp.Mode}
		judge(info, c.sp, "/w", []byte(c.stderr), c.exit, c.signal)
		if info.Denied != c.denied || !slices.Equal(info.DeniedPaths, c.paths) {
			t.Errorf("%s: denied %v %q, want %v %q", c.name, info.Denied, info.DeniedPaths, c.denied, c.paths)
		}
	}
}

// What the sandbox undid after the command is a denial, said with its
// paths, beside what its errors said.
func TestReportUndone(t *testing.T) {
	info := &shell.SandboxInfo{Mode: "workspace-write"}
	reportUndone(info, nil)
	if info.Denied || info.DenialSource != "" {
		t.Fatalf("nothing undone is no denial: %+v", info)
	}
	reportUndone(info, []*sandbox.Undone{{Path: "/w/.envrc", Why: "a protected path that did not exist"}, {Path: "/w/n/.git/config", Why: "a new .git: its config"}})
	if !info.Denied || info.DenialSource != "undone" || !slices.Equal(info.DeniedPaths, []string{"/w/.envrc", "/w/n/.git/config"}) {
		t.Fatalf("undone: %+v", info)
	}
	judged := &shell.SandboxInfo{Mode: "workspace-write", Denied: true, DenialSource: "errors", DeniedPaths: []string{"/etc/x"}}
	reportUndone(judged, []*sandbox.Undone{{Path: "/w/.envrc"}})
	if judged.DenialSource != "errors" || !slices.Equal(judged.DeniedPaths, []string{"/etc/x", "/w/.envrc"}) {
		t.Fatalf("beside errors: %+v", judged)
	}
}
