// Command testrun is make test: it readies what the tests need, runs
// go test -race -json with the arguments it is given, prints what go test
// prints without -json, and ends with every skipped test and its reason,
// every failure, and the counts. It exits 1 when anything failed.
//
//	go run ./internal/testrun [go test flags] [packages]
//	go run ./internal/testrun -report [-v] < events.json   # report recorded go test -json output
//	go run ./internal/testrun -missing                     # the Debian packages the tests want and lack, one a line
//
// Before the tests it stops, naming the package, when the race detector has
// no C compiler; runs npm ci in test/mcp-node and test/console when npm is
// there and what they hold (the TypeScript SDK client, playwright-core) is
// missing or older than its lock file; and names
// the programs the tests use that are not installed (their tests skip).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/dshrun/dsh/internal/testneeds"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "-missing":
			_, pkgs := testneeds.Missing()
			for _, p := range pkgs {
				fmt.Fprintln(stdout, p)
			}
			return 0
		case "-report":
			return report(stdin, stdout, stderr, verbose(args[1:]))
		}
	}
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	env := append(os.Environ(), "CGO_ENABLED=1")
	if msg := needCompiler(goCmd); msg != "" {
		fmt.Fprintln(stderr, "make test: "+msg)
		return 2
	}
	if nodeClient(stderr) {
		// The node tests (the TypeScript SDK client, playwright-core)
		// then fail rather than skip if they find what they drive
		// missing; a missing chromium is told apart (DSH_BROWSER_TESTS).
		env = append(env, "DSH_NODE_TESTS=1")
	}
	if programs, pkgs := testneeds.Missing(); len(programs) > 0 {
		fmt.Fprintf(stderr, "make test: not installed, so the tests that use them skip: %s (apt-get install %s)\n",
			strings.Join(programs, ", "), strings.Join(pkgs, " "))
	}
	if others := testneeds.MissingElsewhere(); len(others) > 0 {
		fmt.Fprintf(stderr, "make test: not installed, so the tests that use them skip: %s\n", strings.Join(others, ", "))
	}

	// Ctrl-C reaches go test too (one process group): it stops, and what
	// ran so far is still summed up here. Notify, not Ignore: an ignored
	// signal stays ignored in go test.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	cmd := exec.Command(goCmd, append([]string{"test", "-race", "-json"}, args...)...)
	cmd.Env = env
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "make test:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "make test:", err)
		return 2
	}
	r := newReporter(stdout, verbose(args), modulePrefix())
	readErr := r.read(out)
	io.Copy(io.Discard, out) // whatever a read error left, so go test can finish
	waitErr := cmd.Wait()
	failed := r.finish()
	if readErr != nil {
		fmt.Fprintln(stderr, "make test: reading go test's output:", readErr)
		return 2
	}
	var exit *exec.ExitError
	switch {
	case failed:
		return 1
	case errors.As(waitErr, &exit):
		// go test failed in a way no event showed (a bad flag, say):
		// its own message is above, on stderr.
		fmt.Fprintf(stderr, "make test: go test exited with status %d\n", exit.ExitCode())
		return exit.ExitCode()
	case waitErr != nil:
		fmt.Fprintln(stderr, "make test:", waitErr)
		return 2
	}
	return 0
}

func report(stdin io.Reader, stdout, stderr io.Writer, v bool) int {
	r := newReporter(stdout, v, modulePrefix())
	err := r.read(stdin)
	failed := r.finish()
	if err != nil {
		fmt.Fprintln(stderr, "reading go test -json output:", err)
		return 2
	}
	if failed {
		return 1
	}
	return 0
}

// verbose reports whether go test is asked for -v, whose output is then
// shown as it comes.
func verbose(args []string) bool {
	for _, a := range args {
		switch a {
		case "-v", "-v=true", "-test.v", "-test.v=true", "--v":
			return true
		}
	}
	return false
}

// needCompiler says what to install when -race cannot build: the race
// detector is cgo, which needs the C compiler go env CC names.
func needCompiler(goCmd string) string {
	cc := "gcc"
	if out, err := exec.Command(goCmd, "env", "CC").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) > 0 {
			cc = f[0]
		}
	}
	if _, err := exec.LookPath(cc); err == nil {
		return ""
	}
	install := "install one, or set CC"
	if cc == "gcc" {
		install = testneeds.Install("gcc")
	}
	return fmt.Sprintf("the race detector (go test -race) needs a C compiler for cgo, and %s is not installed: %s", cc, install)
}

// nodeDirs are the folders of node packages the tests drive, each with the
// package whose presence shows npm ci ran there, and what it is for.
var nodeDirs = []struct{ dir, pkg, what string }{
	{filepath.Join("test", "mcp-node"), filepath.Join("@modelcontextprotocol", "sdk"), "the TypeScript SDK client the tests drive"},
	{filepath.Join("test", "console"), "playwright-core", "playwright-core, which drives chromium in the console's browser tests"},
}

// nodeClient makes sure each of nodeDirs holds what its lock file names
// (npm ci when it is missing or older than the lock file) and reports
// whether every one does.
func nodeClient(stderr io.Writer) bool {
	ok := true
	for _, d := range nodeDirs {
		if !npmCI(stderr, d.dir, d.pkg, d.what) {
			ok = false
		}
	}
	return ok
}

// npmCI runs npm ci in dir unless it is fresh, and reports whether it is.
func npmCI(stderr io.Writer, dir, pkg, what string) bool {
	if fresh(dir, pkg) {
		return true
	}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		return false // not dsh's tree
	}
	for _, p := range []string{"node", "npm"} {
		if _, err := exec.LookPath(p); err != nil {
			return false // the missing program is named with the others
		}
	}
	fmt.Fprintf(stderr, "make test: npm ci in %s (%s)\n", dir, what)
	ci := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	ci.Dir = dir
	out, err := ci.CombinedOutput()
	if err != nil {
		fmt.Fprintf(stderr, "make test: npm ci in %s failed, so the tests that use it skip: %v\n%s", dir, err, out)
		return false
	}
	return fresh(dir, pkg)
}

// fresh reports whether npm ci left node_modules, holding pkg, after the
// lock file last changed (npm writes node_modules/.package-lock.json as it
// installs).
func fresh(dir, pkg string) bool {
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false
	}
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil {
		return false
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		return false
	}
	return !installed.ModTime().Before(lock.ModTime())
}

// modulePrefix is the path of the module in the current directory and a
// slash, cut from package paths in the summary; "" when there is none.
func modulePrefix() string {
	f, err := os.Open("go.mod")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`) + "/"
		}
	}
	return ""
}
