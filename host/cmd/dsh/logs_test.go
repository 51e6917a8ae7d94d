package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/internal/bounded"
	"github.com/dshrun/dsh/internal/syncbuf"
	"github.com/dshrun/dsh/internal/testplugins"
)

// logLine is one line of the host's text log.
type logLine struct {
	raw, level, name, msg string
	keys                  []string
	vals                  map[string]string
}

var (
	lineHead  = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) \[(TRACE|DEBUG|INFO|WARN|ERROR)\] *([^ :]+): (.*)$`)
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)
	firstKey  = regexp.MustCompile(`: ([A-Za-z_@.]+)=`)
)

// parseLog reads the log lines of stderr (the status lines and table
// dsh serve prints are not log lines).
func parseLog(t *testing.T, stderr string) []logLine {
	t.Helper()
	var out []logLine
	for _, raw := range strings.Split(stderr, "\n") {
		if raw == "" || raw[0] < '0' || raw[0] > '9' {
			continue
		}
		m := lineHead.FindStringSubmatch(raw)
		if m == nil {
			t.Fatalf("not a log line: %q", raw)
		}
		l := logLine{raw: raw, level: m[2], name: m[3], msg: m[4], vals: map[string]string{}}
		if loc := firstKey.FindStringSubmatchIndex(m[4]); loc != nil {
			l.msg = m[4][:loc[0]]
			rest := m[4][loc[0]+2:]
			for rest != "" {
				eq := strings.IndexByte(rest, '=')
				if eq < 0 {
					t.Fatalf("%q: no key=value at %q", raw, rest)
				}
				k, v := rest[:eq], rest[eq+1:]
				val := v
				if strings.HasPrefix(v, `"`) {
					q, err := strconv.QuotedPrefix(v)
					if err != nil {
						t.Fatalf("%q: bad quoted value at %q", raw, v)
					}
					val, _ = strconv.Unquote(q)
					v = v[len(q):]
				} else if sp := strings.IndexByte(v, ' '); sp >= 0 {
					val, v = v[:sp], v[sp:]
				} else {
					v = ""
				}
				l.keys = append(l.keys, k)
				l.vals[k] = val
				rest = strings.TrimPrefix(v, " ")
			}
		}
		out = append(out, l)
	}
	return out
}

// The log as a person reads it, from the real host and plugins: one time
// stamp a line, the keys of one kind of line always in the same order
// (who and what first), no empty keys, a cancelled call said as one, and
// a background job's start and end, each once.
func TestLogLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*bounded.Bound)
	defer cancel()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", "--log-level", "debug", comp(t, toolsComp))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	logs := &syncbuf.Buffer{}
	cmd.Stderr = logs
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs)
	}
	defer cs.Close()
	waitLog := func(what string, re *regexp.Regexp) string {
		t.Helper()
		for deadline := time.Now().Add(bounded.Bound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if m := re.FindString(logs.String()); m != "" {
				return m
			}
		}
		t.Fatalf("%s: no line matching %s within %v:\n%s", what, re, bounded.Bound, logs)
		return ""
	}

	// Many lines of the same kinds, from the host and from a plugin.
	const n = 20
	for i := 0; i < n; i++ {
		callBash(t, ctx, cs, map[string]any{"command": fmt.Sprintf("echo line %d", i)})
	}

	// A background job that prints 5 bytes.
	r := callBash(t, ctx, cs, map[string]any{"command": "sleep 0.2; printf 12345", "run_in_background": true})
	job := regexp.MustCompile(`\bj\d+\b`).FindString(text(t, r))
	if job == "" {
		t.Fatalf("no job id in %q", text(t, r))
	}
	waitLog("the job's end", regexp.MustCompile(`job finished: .* job=`+job+` .*exit=0 duration=\S+ output_bytes=5\n`))

	// A call the client cancels while its command runs.
	m := strconv.Itoa(470000 + os.Getpid()%99999)
	cctx, cancelCall := context.WithCancel(ctx)
	go func() {
		for deadline := time.Now().Add(bounded.Bound); len(testplugins.Matching("sleep "+m)) == 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		cancelCall()
	}()
	if _, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep " + m, "description": "cancelled"}}); err == nil {
		t.Fatal("the cancelled call returned no error to its client")
	}
	waitGone(t, "sleep "+m, bounded.Bound)
	waitLog("the cancelled call", regexp.MustCompile(`\[INFO\]  dsh: call cancelled: owner=mcp-\S+ tool=bash command="sleep `+m+`" after=\S+\n`))

	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	lines := parseLog(t, logs.String())

	// Each kind of line (logger and message) keeps its keys in one order;
	// the Lead keys come first, in Lead's order.
	before := map[string]map[[2]string]bool{}
	count := map[string]int{}
	for _, l := range lines {
		kind := l.name + ": " + l.msg
		count[kind]++
		if n := len(timestamp.FindAllString(l.raw, -1)); n != 1 || strings.Contains(l.raw, "timestamp=") || strings.Contains(l.raw, "@module=") {
			t.Errorf("%d time stamps (or go-plugin's keys) in %q", n, l.raw)
		}
		if strings.Contains(l.raw, `=""`) {
			t.Errorf("an empty key in %q", l.raw)
		}
		seen := map[[2]string]bool{}
		for i, a := range l.keys {
			for _, b := range l.keys[i+1:] {
				seen[[2]string{a, b}] = true
			}
		}
		if before[kind] == nil {
			before[kind] = map[[2]string]bool{}
		}
		for p := range seen {
			if before[kind][[2]string{p[1], p[0]}] {
				t.Errorf("%s: %s before %s here, after it in an earlier line: %q", kind, p[0], p[1], l.raw)
			}
			before[kind][p] = true
		}
		open := 0
		for ; open < len(l.keys) && leadIndexOf(l.keys[open]) >= 0; open++ {
			if open > 0 && leadIndexOf(l.keys[open]) < leadIndexOf(l.keys[open-1]) {
				t.Errorf("%q: the opening keys are not in the order %v", l.raw, hostlog.Lead)
			}
		}
		for _, k := range l.keys[open:] {
			if leadIndexOf(k) >= 0 {
				t.Errorf("%q: %s does not open the line", l.raw, k)
			}
		}
		if l.level != "DEBUG" && l.level != "TRACE" && strings.Contains(l.raw, "sleep "+m) && l.msg != "call cancelled" {
			t.Errorf("a cancelled call worded as a failure: %q", l.raw)
		}
	}
	if got := count["dsh.tools: command finished"]; got != n {
		t.Errorf("%d command lines, want %d", got, n)
	}
	for _, kind := range []string{"dsh.jobs: job started", "dsh.jobs: job finished", "dsh: call cancelled"} {
		if count[kind] != 1 {
			t.Errorf("%d lines %q, want 1", count[kind], kind)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
}

func leadIndexOf(k string) int {
	for i, l := range hostlog.Lead {
		if l == k {
			return i
		}
	}
	return -1
}
