package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

var binDir string

func TestMain(m *testing.M) { testplugins.Main(m, "dsh-cli-test-", &binDir) }

func comp(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "comp.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// dsh runs the built binary; plugins are found next to it.
func dsh(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), args...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

const good = `
plugins:
  - id: env
    name: shell-env
  - id: probe
    name: '@deepseek-ai/dsh-probe'
`

func TestVersion(t *testing.T) {
	out, _, code := dsh(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "dsh ") {
		t.Fatalf("code %d, stdout %q", code, out)
	}
}

func TestValidate(t *testing.T) {
	out, errOut, code := dsh(t, nil, "validate", comp(t, good))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if out != "" {
		t.Errorf("validate wrote to stdout: %q", out)
	}
	for _, w := range []string{"is valid", "env: shell-env", "provides shellEnv", "probe: probe", "injects shellEnv"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("validate left processes: %v", left)
	}
}

func TestBadInputExitsTwo(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"malformed yaml": {"plugins:\n  - id: [x\n", "comp.yaml:2"},
		"unknown key":    {"plugins:\n  - id: x\n    name: shell-env\n    confg: {}\n", "comp.yaml:4"},
		"duplicate":      {"plugins:\n  - id: a\n    name: shell-env\n  - id: b\n    name: shell-env\n", "comp.yaml:4"},
		"apply fails":    {good + "    config: {failApply: true}\n", "comp.yaml:5"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := comp(t, tc.yaml)
			for _, cmd := range []string{"validate", "serve"} {
				if name == "apply fails" && cmd == "validate" {
					continue // validate does not apply
				}
				_, errOut, code := dsh(t, nil, cmd, f)
				if code != 2 || !strings.Contains(errOut, tc.want) {
					t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 2 and %q", cmd, code, errOut, tc.want)
				}
			}
			if left := testplugins.Running(binDir); len(left) > 0 {
				t.Fatalf("left processes: %v", left)
			}
		})
	}
	if _, _, code := dsh(t, nil, "validate"); code != 2 {
		t.Errorf("validate without a file: exit %d", code)
	}
	if _, _, code := dsh(t, nil, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

func TestConfigMasksSecrets(t *testing.T) {
	f := comp(t, `
plugins:
  - id: env
    name: shell-env
    config:
      facts:
        DSH_REGION: ${REGION}
        DSH_CRED: ${SERVICE_TOKEN}
      apiKey: literal-secret
`)
	out, errOut, code := dsh(t, []string{"REGION=eu-west", "SERVICE_TOKEN=hunter2"}, "config", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "eu-west") {
		t.Errorf("interpolated value missing:\n%s", out)
	}
	for _, secret := range []string{"hunter2", "literal-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("secret %q printed:\n%s", secret, out)
		}
	}
}

// dsh config shows the clients section and masks every bearer token: one
// from a credential-like variable, one from a plainly named one, one
// written out.
func TestConfigMasksClientTokens(t *testing.T) {
	ci, laptop, literal := strings.Repeat("c", 40), strings.Repeat("p", 40), strings.Repeat("l", 40)
	f := comp(t, `
clients:
  owners: resumable
  resumeWithin: 2m
  tokens:
    - name: ci
      token: ${DSH_CI_TOKEN}
    - name: laptop
      token: ${LAPTOP}
    - name: literal
      token: `+literal+`
plugins:
  - id: env
    name: shell-env
`)
	out, errOut, code := dsh(t, []string{"DSH_CI_TOKEN=" + ci, "LAPTOP=" + laptop}, "config", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"owners: resumable", "resumeWithin: 2m0s", "name: ci", "name: laptop", "name: literal", "token: '********'"} {
		if !strings.Contains(out, w) {
			t.Errorf("config lacks %q:\n%s", w, out)
		}
	}
	for _, secret := range []string{ci, laptop, literal} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("token %q printed:\n%s%s", secret, out, errOut)
		}
	}
}

// startServe runs dsh serve until it reports ready.
func startServe(t *testing.T, file string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", file)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout = &out
	// An open, silent stdin: the MCP session neither speaks nor ends.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		t.Log(sc.Text())
		if strings.Contains(sc.Text(), "ready in") {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd, &out
		}
	}
	cmd.Wait()
	t.Fatalf("dsh serve never became ready (exit %d)", cmd.ProcessState.ExitCode())
	return nil, nil
}

func TestServeStopsOnSIGTERM(t *testing.T) {
	cmd, stdout := startServe(t, comp(t, good))
	if n := len(testplugins.Running(binDir)); n < 3 {
		t.Fatalf("want dsh and two plugins running, found %d processes", n)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("serve wrote to stdout: %q", stdout.String())
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("left processes: %v", left)
	}
}

// A SIGKILLed host cannot tear down; its plugins must still go.
func TestPluginsDieWithKilledHost(t *testing.T) {
	cmd, _ := startServe(t, comp(t, good))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The kernel sends each plugin its SIGKILL as the host dies
	// (Pdeathsig); what the bound waits for is the killed processes'
	// exit, which a loaded machine schedules late.
	const within = 10 * time.Second
	deadline := time.Now().Add(within)
	for {
		left := testplugins.Running(binDir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugins alive %v after the host was killed: %v", within, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const toolsComp = `
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-local
  - id: tools
    name: tool-bash
`

func TestCall(t *testing.T) {
	f := comp(t, toolsComp)
	out, errOut, code := dsh(t, nil, "call", f, "bash", `{"command":"echo hi; exit 3","description":"d"}`)
	if code != 0 || out != "hi\n[exit code: 3]\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	// The audit trail: owner, command, working directory, exit, duration.
	for _, w := range []string{"owner=cli", `command="echo hi; exit 3"`, "workdir=", "exit=3", "duration="} {
		if !strings.Contains(errOut, w) {
			t.Errorf("audit line lacks %s:\n%s", w, errOut)
		}
	}
	out, _, code = dsh(t, nil, "call", "--json", f, "bash", `{"command":"printf x","description":"d"}`)
	var res struct {
		Text       string `json:"text"`
		IsError    bool   `json:"isError"`
		Structured struct {
			ExitCode *int `json:"exitCode"`
		} `json:"structured"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Text != "x" || res.IsError || res.Structured.ExitCode == nil || *res.Structured.ExitCode != 0 {
		t.Fatalf("--json: exit %d %q %v", code, out, err)
	}
	// Bad arguments, an unknown tool, bad JSON: exit 2 with a message.
	for _, args := range [][]string{
		{"bash", `{"command":"x"}`},
		{"nosuch", `{}`},
		{"bash", `{not json`},
	} {
		_, errOut, code := dsh(t, nil, "call", f, args[0], args[1])
		if code != 2 || !strings.Contains(errOut, "dsh call:") {
			t.Errorf("%v: exit %d, stderr %s", args, code, errOut)
		}
	}
	if left := testplugins.Running(binDir); len(left) > 0 {
		t.Fatalf("left processes: %v", left)
	}
}

// The default composition is what make run serves: it must load and run.
func TestDefaultComposition(t *testing.T) {
	f := filepath.Join(testplugins.Root(), "compositions", "default.yaml")
	out, errOut, code := dsh(t, nil, "call", f, "bash", `{"command":"echo $DSH_COMPOSITION","description":"d"}`)
	if code != 0 || out != "default\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
}

// An interrupted dsh call stops the command's tree and says so in one
// sentence, with the shell's status for SIGINT.
func TestCallInterrupted(t *testing.T) {
	n := 400000 + os.Getpid()%99999
	marker := strconv.Itoa(n)
	// The shell spells the number out, so only the sleep's argv has it.
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "call", comp(t, toolsComp), "bash",
		fmt.Sprintf(`{"command":"sleep $((%d + 1))","description":"d"}`, n-1))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); len(testplugins.Matching("sleep "+marker)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "dsh call: interrupted; bash was stopped") || strings.Contains(stderr.String(), "dsh call: tool") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	if left := testplugins.Matching("sleep " + marker); len(left) > 0 {
		t.Fatalf("the command outlived the interrupted call: %v", left)
	}
}
