//go:build linux

package kubeexec

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runWrapper runs Wrapper under the machine's sh as an exec would: header,
// then the input after the ack, then hold stdin open until hold is closed.
func runWrapper(t *testing.T, dir, command string, env map[string]string, input string, hold chan struct{}) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := NewID()
	h := Header(dir, command, env)
	argv := WrapperArgv(id, len(h), len(input), 500)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ack := make(chan struct{})
	cmd.Stdout = &ackWriter{w: &stdout, ack: ack}
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second // a sleep left behind must not hold the test
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(in, h)
		select {
		case <-ack:
		case <-ctx.Done():
		}
		io.WriteString(in, input)
		if hold != nil {
			<-hold
		}
		in.Close()
	}()
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestWrapperRunsTheCommand(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	out, errOut, code := runWrapper(t, "/tmp", `echo "$0 $(pwd) $FOO"; cat; echo err >&2; exit 7`, map[string]string{"FOO": "it's x"}, "in\nput", hold)
	if out != "bash /tmp it's x\nin\nput" || errOut != "err\n" || code != 7 {
		t.Fatalf("stdout %q stderr %q code %d", out, errOut, code)
	}
}

func TestWrapperEndsTheTreeWhenStdinEnds(t *testing.T) {
	start := time.Now()
	hold := make(chan struct{})
	go func() { time.Sleep(time.Second); close(hold) }()
	_, _, code := runWrapper(t, "", `setsid sleep 60 & sleep 60`, nil, "", hold)
	if code != 143 || time.Since(start) > 10*time.Second {
		t.Fatalf("code %d after %v", code, time.Since(start))
	}
	out, _ := exec.Command("sh", "-c", "ps -eo args | grep '^sleep 60' || true").Output()
	if strings.TrimSpace(string(out)) != "" {
		t.Fatalf("left running: %s", out)
	}
}

// Where the container has no bash, sh runs the command.
func TestWrapperFallsBackToSh(t *testing.T) {
	bin := t.TempDir()
	for _, p := range []string{"sh", "head", "cat", "tr", "env", "kill", "sleep"} {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Skipf("no %s here", p)
		}
		if err := os.Symlink(path, filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	out, errOut, code := runWrapper(t, "", `echo "$0"`, nil, "", nil)
	if out != "sh\n" || errOut != "" || code != 0 {
		t.Fatalf("stdout %q stderr %q code %d", out, errOut, code)
	}
}

// A command longer than Linux takes in one argument runs, as bash -c
// would run it; an environment too large to start a program with is one
// sentence.
func TestKubernetesWrapperLongCommand(t *testing.T) {
	hold := make(chan struct{}) // stdin's end would end the command
	defer close(hold)
	long := ": " + strings.Repeat("x", 300000) + "; echo \"ok $0\"; read -r line; echo \"in $line\"; exit 4"
	out, errOut, code := runWrapper(t, "", long, nil, "input\n", hold)
	if out != "ok bash\nin input\n" || errOut != "" || code != 4 {
		t.Fatalf("a long command: %q %q %d", out, errOut, code)
	}
	out, errOut, code = runWrapper(t, "", "echo hi", map[string]string{"BIG": strings.Repeat("y", 200000)}, "", hold)
	want := "The command's environment is too large for a program in the container to start with (Linux takes at most 128 KiB in one variable, and about 2 MiB in all).\n"
	if out != "" || errOut != want || code != 126 {
		t.Fatalf("a large environment: %q %q %d", out, errOut, code)
	}
	out, _, code = runWrapper(t, "", "echo \"${#MID}\"", map[string]string{"MID": strings.Repeat("y", 100000)}, "", hold)
	if out != "100000\n" || code != 0 {
		t.Fatalf("a variable under the limit: %q %d", out, code)
	}
}

// A working directory that looks like an option of cd is a directory.
func TestKubernetesWrapperDashWorkdir(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	for _, dir := range []string{"-P", "-"} {
		out, errOut, code := runWrapper(t, dir, "pwd", nil, "", hold)
		want := "The working directory " + dir + " does not exist in the container or cannot be entered.\n"
		if out != "" || errOut != want || code != 1 {
			t.Errorf("workdir %s: %q %q %d", dir, out, errOut, code)
		}
	}
}
