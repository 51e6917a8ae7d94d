package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output and build-fail
	FailedBuild string
}

type testKey struct{ pkg, test string }

type skipped struct{ pkg, test, reason string }

// reporter turns go test -json into what go test prints without it (the
// output of failed tests, a line per package), and ends with every skipped
// test grouped by its reason, every failure, and the counts.
type reporter struct {
	w       io.Writer
	verbose bool   // print every line as it comes, as go test -v does
	trim    string // prefix cut from package paths in the summary

	output     map[testKey]*strings.Builder // a running test's output so far
	unfinished map[string][]string          // tests cut short, by package, until its end
	failedP    map[string]bool              // packages with a failed test
	skips      []skipped
	fails      []string

	passed, failed, nskipped int
	packageFails             int // packages that failed with no failed test
}

func newReporter(w io.Writer, verbose bool, trim string) *reporter {
	return &reporter{w: w, verbose: verbose, trim: trim,
		output: map[testKey]*strings.Builder{}, unfinished: map[string][]string{}, failedP: map[string]bool{}}
}

// read reports every event of r; lines that are not events are printed as
// they are.
func (r *reporter) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	// Output of a test can come as one long line (test2json splits lines
	// only past 4 KiB, but a build error can be long).
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(r.w, "%s\n", line)
			continue
		}
		r.event(e)
	}
	return sc.Err()
}

func (r *reporter) event(e event) {
	switch {
	case e.Action == "build-output":
		// The compiler's messages: always shown, as go test does.
		io.WriteString(r.w, e.Output)
	case e.Test == "":
		r.packageEvent(e)
	default:
		r.testEvent(e)
	}
}

func (r *reporter) packageEvent(e event) {
	switch e.Action {
	case "output":
		if strings.HasPrefix(e.Output, "FAIL") {
			// The tests a timeout or a panic cut short go above the
			// package's result, as their output came before it.
			r.unfinished[e.Package] = append(r.unfinished[e.Package], r.flushUnfinished(e.Package)...)
		}
		// "PASS" alone is go test -v's; a package's result line is enough.
		if r.verbose || e.Output != "PASS\n" {
			io.WriteString(r.w, e.Output)
		}
	case "fail":
		cut := append(r.unfinished[e.Package], r.flushUnfinished(e.Package)...)
		delete(r.unfinished, e.Package)
		switch {
		case e.FailedBuild != "":
			r.packageFails++
			r.fail(e.Package, "build failed")
		case len(cut) > 0 && !r.failedP[e.Package]:
			// The test binary died (a timeout, a panic in another
			// goroutine) while these ran: each is a failure.
			for _, test := range cut {
				r.packageFails++
				r.fail(e.Package, test+" (did not finish)")
			}
		case !r.failedP[e.Package]:
			// A failure no test carries: TestMain's exit status, say.
			// Its output is above.
			r.packageFails++
			r.fail(e.Package, "failed outside its tests (see its output above)")
		}
	case "pass", "skip":
		r.flushUnfinished(e.Package)
		delete(r.unfinished, e.Package)
	}
}

// flushUnfinished prints the output of the tests of pkg that never ended
// (a panic or a timeout took the test binary down while they ran) and
// returns their names.
func (r *reporter) flushUnfinished(pkg string) []string {
	var keys []testKey
	for k := range r.output {
		if k.pkg == pkg {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].test < keys[j].test })
	var names []string
	for _, k := range keys {
		if out := r.output[k].String(); !r.verbose && out != "" {
			fmt.Fprintf(r.w, "--- DID NOT FINISH: %s\n", k.test)
			r.printLines(out, "")
		}
		delete(r.output, k)
		names = append(names, k.test)
	}
	return names
}

func (r *reporter) testEvent(e event) {
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		if r.verbose {
			io.WriteString(r.w, e.Output)
		}
		b := r.output[k]
		if b == nil {
			b = &strings.Builder{}
			r.output[k] = b
		}
		b.WriteString(e.Output)
	case "pass":
		r.passed++
		delete(r.output, k)
	case "skip":
		r.nskipped++
		r.skips = append(r.skips, skipped{e.Package, e.Test, skipReason(r.take(k))})
	case "fail":
		r.failed++
		r.failedP[e.Package] = true
		out := r.take(k)
		if !r.verbose {
			// As go test prints a failure: its result line, then its log,
			// whole.
			r.printLines(out, "--- FAIL: ")
		}
		r.fail(e.Package, e.Test)
	}
}

func (r *reporter) take(k testKey) string {
	b := r.output[k]
	delete(r.output, k)
	if b == nil {
		return ""
	}
	return b.String()
}

// printLines prints out without go test -v's framing lines (=== RUN and
// the like), the first line starting with first moved to the top.
func (r *reporter) printLines(out, first string) {
	lines := strings.SplitAfter(out, "\n")
	var head string
	var rest []string
	for _, l := range lines {
		switch {
		case l == "" || framing.MatchString(l):
		case first != "" && head == "" && strings.HasPrefix(l, first):
			head = l
		default:
			rest = append(rest, l)
		}
	}
	io.WriteString(r.w, head)
	for _, l := range rest {
		io.WriteString(r.w, l)
	}
	if n := len(rest); n > 0 && !strings.HasSuffix(rest[n-1], "\n") {
		io.WriteString(r.w, "\n")
	}
}

func (r *reporter) fail(pkg, what string) {
	r.fails = append(r.fails, r.short(pkg)+": "+what)
}

func (r *reporter) short(pkg string) string {
	if s := strings.TrimPrefix(pkg, r.trim); s != "" {
		return s
	}
	return pkg
}

var (
	framing = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME) `)
	logLine = regexp.MustCompile(`^ {4}[^ ]+\.go:\d+: ?(.*)$`)
)

// skipReason is the last message a skipped test logged (t.Skip's), without
// its file:line, its continuation lines joined to it.
func skipReason(out string) string {
	var reason []string
	for _, l := range strings.Split(out, "\n") {
		if m := logLine.FindStringSubmatch(l); m != nil {
			reason = []string{m[1]}
		} else if reason != nil && strings.HasPrefix(l, "        ") {
			reason = append(reason, strings.TrimSpace(l))
		} else if strings.HasPrefix(l, "--- SKIP: ") {
			break
		}
	}
	if len(reason) == 0 {
		return "(no reason given)"
	}
	return strings.Join(reason, " ")
}

// finish prints the summary and returns whether anything failed.
func (r *reporter) finish() (failed bool) {
	// What go test never ended (stopped by Ctrl-C, say) is shown all the same.
	left := map[string]bool{}
	for k := range r.output {
		left[k.pkg] = true
	}
	for pkg := range left {
		r.flushUnfinished(pkg)
	}
	if len(r.skips) > 0 {
		fmt.Fprintf(r.w, "\nskipped, by reason:\n")
		byReason := map[string][]skipped{}
		var reasons []string
		for _, s := range r.skips {
			if byReason[s.reason] == nil {
				reasons = append(reasons, s.reason)
			}
			byReason[s.reason] = append(byReason[s.reason], s)
		}
		sort.Strings(reasons)
		for _, reason := range reasons {
			fmt.Fprintf(r.w, "  %s\n", reason)
			tests := map[string][]string{}
			var pkgs []string
			for _, s := range byReason[reason] {
				p := r.short(s.pkg)
				if tests[p] == nil {
					pkgs = append(pkgs, p)
				}
				tests[p] = append(tests[p], s.test)
			}
			sort.Strings(pkgs)
			for _, p := range pkgs {
				sort.Strings(tests[p])
				fmt.Fprintf(r.w, "    %s: %s\n", p, strings.Join(tests[p], ", "))
			}
		}
	}
	if len(r.fails) > 0 {
		sort.Strings(r.fails)
		fmt.Fprintf(r.w, "\nfailed:\n")
		for _, f := range r.fails {
			fmt.Fprintf(r.w, "  %s\n", f)
		}
	}
	// A package that failed without a failed test (a build failure)
	// counts, so the count is never 0 when something failed.
	fmt.Fprintf(r.w, "\ntests: %d passed, %d failed, %d skipped\n", r.passed, r.failed+r.packageFails, r.nskipped)
	return len(r.fails) > 0
}
