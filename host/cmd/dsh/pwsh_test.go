package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
	"github.com/dshrun/dsh/plugins/lib/pwshargs"
)

// The PowerShell executors through the real binaries. What runs here
// without PowerShell is what dsh hands the program and how it treats the
// program's exit and absence, with a stand-in named pwsh that runs no
// PowerShell; pwshreal_test.go drives PowerShell itself where it is
// installed.

const pwshComp = `
plugins:
  - id: env
    name: shell-env
  - id: pwsh
    name: pwsh-local
  - id: tools
    name: tool-pwsh
`

// notInstalled is what the model reads when pwsh is not installed.
const notInstalled = "[pwsh (PowerShell 7) is not installed on this machine: see https://learn.microsoft.com/powershell/scripting/install/installing-powershell to install it, or set program in this executor's config to the PowerShell to run.]"

// sandboxedComp is a composition of executor confined by runner, with ws
// its workspace.
func sandboxedComp(executor, runner, ws string) string {
	return "sandbox:\n  defaultMode: workspace-write\n  workspaceRoot: " + ws + "\n  runner: " + runner + "\nplugins:\n" +
		"  - {id: env, name: shell-env}\n  - {id: shell, name: " + executor + "}\n  - {id: tools, name: tool-pwsh}\n"
}

// pathWith is a PATH of a new folder holding links to the named programs
// only.
func pathWith(t *testing.T, programs ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range programs {
		if err := os.Symlink(testneeds.Command(t, p), filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + dir
}

// A pwsh that is not installed is one sentence to the model naming it and
// where to install it, from pwsh-local and from pwsh-sandbox under either
// runner (bubblewrap's launch fails, landlock's lookup does).
func TestPwshNotInstalled(t *testing.T) {
	call := `{"command":"Get-Date","description":"d"}`
	out, errOut, code := dsh(t, []string{pathWith(t)}, "call", comp(t, pwshComp), "pwsh", call)
	if code != 0 || out != notInstalled+"\n" {
		t.Fatalf("pwsh-local: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	ws := t.TempDir()
	for _, runner := range []string{"bubblewrap", "landlock"} {
		out, errOut, code := dsh(t, []string{pathWith(t, "bwrap", "true")}, "call", comp(t, sandboxedComp("pwsh-sandbox", runner, ws)), "pwsh", call)
		if runner == "landlock" && strings.Contains(out, "the sandbox cannot confine commands here") {
			t.Logf("no landlock runner here: %s", out)
			continue
		}
		if code != 0 || out != notInstalled+"\n" {
			t.Fatalf("pwsh-sandbox, %s: exit %d, stdout %q, stderr:\n%s", runner, code, out, errOut)
		}
	}
}

// standIn writes, in dir, a program named pwsh that is not PowerShell: it
// records its arguments in dir/argv, tries to write outside the workspace
// (outside/x), and exits 4.
func standIn(t *testing.T, dir, outside string) {
	t.Helper()
	sh := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"" + dir + "/argv\"\necho ran\ntouch '" + outside + "/x'\nexit 4\n"
	if err := os.WriteFile(filepath.Join(dir, "pwsh"), []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
}

// pwsh-sandbox confines the program it runs under each runner as
// bash-sandbox confines bash: the wrapped command line reaches the
// program, its exit code is the result's, and what the sandbox refused it
// is reported as for bash.
func TestPwshSandboxStandIn(t *testing.T) {
	ws := t.TempDir()
	bin := filepath.Join(ws, "bin") // in the workspace: the sandbox's /tmp is a folder of its own
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	outside, err := os.MkdirTemp("/var/tmp", "dsh-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	standIn(t, bin, outside)
	cmd := "New-Item x; 'it''s'"
	for _, runner := range []string{"bubblewrap", "landlock"} {
		if runner == "bubblewrap" {
			testneeds.Command(t, "bwrap")
		}
		out, errOut, code := dsh(t, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, "call", comp(t, sandboxedComp("pwsh-sandbox", runner, ws)), "pwsh",
			`{"command":"New-Item x; 'it''s'","description":"d"}`)
		if runner == "landlock" && strings.Contains(out, "the sandbox cannot confine commands here") {
			t.Logf("no landlock runner here: %s", out)
			continue
		}
		if code != 0 || !strings.HasPrefix(out, "ran\n") || !strings.HasSuffix(out, "\n[exit code: 4]\n[sandbox: file access denied under workspace-write mode]\n") {
			t.Fatalf("%s: exit %d, stdout %q, stderr:\n%s", runner, code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
			t.Fatalf("%s: the program wrote outside the workspace: %v", runner, err)
		}
		b, err := os.ReadFile(filepath.Join(bin, "argv"))
		if err != nil {
			t.Fatal(err)
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(argv) != 7 || strings.Join(argv[:6], " ") != "-NoLogo -NoProfile -NonInteractive -OutputFormat Text -EncodedCommand" {
			t.Fatalf("%s: argv %q", runner, argv)
		}
		if got, err := pwshargs.DecodeCommand(argv[6]); err != nil || got != pwshargs.Script(cmd) {
			t.Fatalf("%s: the program got %v:\n%s", runner, err, got)
		}
		_ = os.Remove(filepath.Join(bin, "argv"))
	}
}

// Where the sandbox cannot confine, pwsh-sandbox runs nothing and says so
// in bash-sandbox's words.
func TestPwshSandboxUnavailable(t *testing.T) {
	ws := t.TempDir()
	bin := filepath.Join(ws, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	standIn(t, bin, ws)
	env := []string{"PATH=" + bin} // no bwrap
	var said []string
	for _, executor := range []string{"bash-sandbox", "pwsh-sandbox"} {
		out, errOut, code := dsh(t, env, "call", comp(t, sandboxedComp(executor, "bubblewrap", ws)), "pwsh", `{"command":"pwsh","description":"d"}`)
		if code != 0 || !strings.HasPrefix(out, "[the sandbox cannot confine commands here, so nothing was run: ") {
			t.Fatalf("%s: exit %d, stdout %q, stderr:\n%s", executor, code, out, errOut)
		}
		said = append(said, out)
	}
	if said[0] != said[1] {
		t.Fatalf("bash-sandbox said %q, pwsh-sandbox %q", said[0], said[1])
	}
	if _, err := os.Stat(filepath.Join(bin, "argv")); !os.IsNotExist(err) {
		t.Fatalf("something ran: %v", err)
	}
}

// One `shell` settings section resolves under bash-local and pwsh-local
// alike; the PowerShell to run is pwsh-local's own key, in its entry's
// config, and a bash executor refuses it in the shared section.
func TestPwshSettingsResolveUnderEitherExecutor(t *testing.T) {
	const settings = `settings:
  shell:
    cwd: .
    timeoutMs: 60000
    maxTimeoutMs: 300000
    maxOutputBytes: 32000
    maxSpillBytes: 1048576
    graceMs: 2000
    maxProcesses: 512
    maxMemoryBytes: -1
plugins:
  - id: env
    name: shell-env
  - id: tools
    name: tool-bash
  - id: shell
`
	for _, entry := range []string{"    name: bash-local\n", "    name: pwsh-local\n", "    name: pwsh-local\n    config:\n      program: /opt/microsoft/powershell/7/pwsh\n"} {
		_, errOut, code := dsh(t, nil, "validate", comp(t, settings+entry))
		if code != 0 || !strings.Contains(errOut, "is valid") {
			t.Errorf("%s: exit %d:\n%s", strings.TrimSpace(entry), code, errOut)
		}
	}
	withProgram := strings.Replace(settings, "    graceMs: 2000\n", "    graceMs: 2000\n    program: pwsh\n", 1)
	_, errOut, code := dsh(t, nil, "validate", comp(t, withProgram+"    name: bash-local\n"))
	if code != 2 || !strings.Contains(errOut, `comp.yaml:9:5: plugin "shell": settings.shell: unknown key "program"`) {
		t.Errorf("program in the shared section, under bash-local: exit %d:\n%s", code, errOut)
	}
	if _, errOut, code := dsh(t, nil, "validate", comp(t, withProgram+"    name: pwsh-local\n")); code != 0 {
		t.Errorf("program in the shared section, under pwsh-local: exit %d:\n%s", code, errOut)
	}
}

// bash-local and pwsh-local in one composition both provide ctx.shell:
// the composition is refused, naming both entries.
func TestPwshAndBashDuplicateShell(t *testing.T) {
	f := comp(t, pwshComp+"  - id: bash\n    name: bash-local\n")
	for _, cmd := range []string{"validate", "serve"} {
		_, errOut, code := dsh(t, nil, cmd, f)
		if code != 2 || !strings.Contains(errOut, `comp.yaml:9:5: plugin "bash": service "shell" is already provided by plugin "pwsh" (`) {
			t.Errorf("%s: exit %d:\n%s", cmd, code, errOut)
		}
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("left processes: %v", left)
	}
}

// The bundled PowerShell compositions load as they are.
func TestPwshCompositionsValidate(t *testing.T) {
	for _, name := range []string{"pwsh.yaml", "pwsh-sandbox.yaml", "pwsh-persistent.yaml"} {
		f := filepath.Join(testplugins.Root(), "compositions", name)
		if _, errOut, code := dsh(t, nil, "validate", f); code != 0 {
			t.Errorf("%s: exit %d:\n%s", name, code, errOut)
		}
	}
}
