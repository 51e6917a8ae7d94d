package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/golden"
)

// testdata/sample.json is go test -json -timeout 3s of testdata/sample: a
// package that passes, one that does not build, one whose test panics, one
// whose test the timeout cuts short, and one with a pass, a fail, a skip
// and a parent with a passed and a skipped subtest. The golden file is what
// make test prints of it.
func TestReportRecorded(t *testing.T) {
	in, err := os.Open(filepath.Join("testdata", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	r := newReporter(&out, false, "example.com/sample/")
	if err := r.read(in); err != nil {
		t.Fatal(err)
	}
	if !r.finish() {
		t.Error("finish() = false with failed tests, want true")
	}
	golden.Check(t, "sample", out.String())
}

// A passing test's log is shown only under -v, as go test does.
func TestReportVerbose(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []bool{false, true} {
		var out bytes.Buffer
		r := newReporter(&out, v, "example.com/sample/")
		if err := r.read(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		r.finish()
		if got := strings.Contains(out.String(), "said only when asked"); got != v {
			t.Errorf("verbose %v: the passing test's log shown = %v\n%s", v, got, out.String())
		}
		if !strings.HasSuffix(out.String(), "\ntests: 4 passed, 4 failed, 2 skipped\n") {
			t.Errorf("verbose %v: no closing count:\n%s", v, out.String())
		}
	}
}

func TestSkipReason(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"=== RUN   TestX\n    x_test.go:9: note\n    x_test.go:10: bwrap is not installed (apt-get install bubblewrap)\n--- SKIP: TestX (0.00s)\n",
			"bwrap is not installed (apt-get install bubblewrap)"},
		{"=== RUN   TestX\n    x_test.go:10: first\n        second\n--- SKIP: TestX (0.00s)\n", "first second"},
		{"=== RUN   TestX\n--- SKIP: TestX (0.00s)\n", "(no reason given)"},
	} {
		if got := skipReason(tc.out); got != tc.want {
			t.Errorf("skipReason(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

// testrun builds this command.
func testrun(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testrun")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// The exit status is what make test reports: 1 when anything failed, 0
// when everything passed or skipped.
func TestReportExitCode(t *testing.T) {
	bin := testrun(t)
	data, err := os.ReadFile(filepath.Join("testdata", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	var passing []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if strings.Contains(l, `"example.com/sample/passes"`) {
			passing = append(passing, l)
		}
	}
	for _, tc := range []struct {
		name, in, last string
		code           int
	}{
		{"all", string(data), "tests: 4 passed, 4 failed, 2 skipped", 1},
		{"passing", strings.Join(passing, ""), "tests: 1 passed, 0 failed, 0 skipped", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "-report")
			cmd.Dir = filepath.Join("testdata", "sample") // its go.mod names the module
			cmd.Stdin = strings.NewReader(tc.in)
			out, err := cmd.Output()
			if got := exitCode(t, err); got != tc.code {
				t.Errorf("exit status %d, want %d\n%s", got, tc.code, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if got := lines[len(lines)-1]; got != tc.last {
				t.Errorf("last line %q, want %q\n%s", got, tc.last, out)
			}
		})
	}
}

// The whole run against the go test of this machine: the compiler's error,
// each failure's full log, the skip reasons, the counts and the exit status.
func TestRunLive(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed (apt-get install gcc)")
	}
	bin := testrun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-count=1", "-timeout=3s", "./...")
	cmd.Dir = filepath.Join("testdata", "sample")
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.Output()
	if got := exitCode(t, err); got != 1 {
		t.Errorf("exit status %d, want 1", got)
	}
	for _, want := range []string{
		"broken/broken_test.go:6:33: undefined: undefinedName\n",
		"--- FAIL: TestFail (",
		"    mixed_test.go:10: first line of the log\n    mixed_test.go:11: the failure\n        over two lines\n",
		"--- FAIL: TestPanics (",
		"panic: boom",
		"--- DID NOT FINISH: TestHangs\n    hangs_test.go:11: waiting\npanic: test timed out after 3s\n",
		"ok  \texample.com/sample/passes\t",
		"skipped, by reason:\n  frobnicate is not installed (apt-get install frobnicate)\n    mixed: TestSkip\n  needs /proc\n    mixed: TestParent/skipped\n",
		"failed:\n  broken: build failed\n  hangs: TestHangs (did not finish)\n  mixed: TestFail\n  panics: TestPanics\n",
		"\ntests: 4 passed, 4 failed, 2 skipped\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "said only when asked") || strings.Contains(string(out), "=== RUN") {
		t.Errorf("a passing test's log or the -v framing shown:\n%s", out)
	}
}
