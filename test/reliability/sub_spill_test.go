package reliability

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// digits is what `yes 0123456789 | head -c n` prints: the test knows every
// byte and newline of the output without asking dsh.
func digits(n int) []byte {
	return bytes.Repeat([]byte("0123456789\n"), n/11+1)[:n]
}

func digitsCmd(n int) string { return fmt.Sprintf("yes 0123456789 | head -c %d", n) }

// The characters of output the bash tool shows by default (its
// maxOutputChars): the tail shown is the stream's last whole lines within it.
const budget = 30000

// commas writes n the way notices do: 1234567 is "1,234,567".
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// cut is a truncation notice, read back.
type cut struct {
	line           string
	omitted, lines int
	first, of      int // partial: the file holds the first bytes of of
	complete, lost bool
	reason, path   string
}

var cutRE = regexp.MustCompile(`^\[output truncated: (\d{1,3}(?:,\d{3})*) bytes \((\d{1,3}(?:,\d{3})*) lines?\) omitted(?:; full output: (\S+)|; partial output \(first (\d{1,3}(?:,\d{3})*) of (\d{1,3}(?:,\d{3})*) bytes; ([^)]*\)?)\): (\S+)| and lost: (.*))\]$`)

func num(s string) int {
	n, _ := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	return n
}

// readCut finds the stdout notice in a result's text and checks the parts
// every notice must get right against the stream the command printed: the
// kept tail, the omitted bytes and newlines.
func readCut(t *testing.T, what, text string, stream []byte) cut {
	t.Helper()
	lines := strings.Split(text, "\n")
	var c cut
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "[output truncated") {
			c.line, at = l, i
		}
	}
	m := cutRE.FindStringSubmatch(c.line)
	if m == nil {
		t.Fatalf("%s: no truncation notice of the one format in %q", what, text[max(0, len(text)-400):])
	}
	c.omitted, c.lines = num(m[1]), num(m[2])
	switch {
	case m[3] != "":
		c.complete, c.path = true, m[3]
	case m[7] != "":
		c.first, c.of, c.reason, c.path = num(m[4]), num(m[5]), m[6], m[7]
	default:
		c.lost, c.reason = true, m[8]
	}
	// The body before the notice is the stream's last whole lines within
	// the budget, a last newline dropped by the layout.
	body := strings.Join(lines[:at], "\n")
	kept := len(body)
	if bytes.HasSuffix(stream, []byte("\n")) {
		kept++
	}
	if kept > budget || kept < budget-100 || kept > len(stream) ||
		strings.TrimSuffix(string(stream[len(stream)-kept:]), "\n") != body ||
		stream[len(stream)-kept-1] != '\n' {
		t.Fatalf("%s: the text before the notice (%d bytes) is not the stream's last whole lines within %d", what, kept, budget)
	}
	omitted := stream[:len(stream)-kept]
	if c.omitted != len(omitted) || c.lines != bytes.Count(omitted, []byte("\n")) {
		t.Fatalf("%s: %q: want %s bytes (%s lines)", what, c.line, commas(len(omitted)), commas(bytes.Count(omitted, []byte("\n"))))
	}
	if !strings.Contains(c.line, commas(c.omitted)+" bytes") {
		t.Fatalf("%s: %q: counts without thousands separators", what, c.line)
	}
	return c
}

// checkFile checks what a notice says of its spill file against the file.
func checkFile(t *testing.T, what string, c cut, stream []byte) {
	t.Helper()
	if c.lost {
		return
	}
	b, err := os.ReadFile(c.path)
	if err != nil {
		t.Fatalf("%s: %q names a file that is not there: %v", what, c.line, err)
	}
	switch {
	case c.complete:
		if !bytes.Equal(b, stream) {
			t.Fatalf("%s: %q: the file holds %d bytes, not the %d of the output", what, c.line, len(b), len(stream))
		}
	default:
		if c.of != len(stream) || c.first >= len(stream) || len(b) < c.first || !bytes.Equal(b[:c.first], stream[:c.first]) {
			t.Fatalf("%s: %q: the file (%d bytes) does not hold the output's first %d bytes", what, c.line, len(b), c.first)
		}
	}
}

// checkFacts checks that the structured facts of a stream carry the
// notice's numbers and the spill file's state.
func checkFacts(t *testing.T, what string, facts map[string]any, c cut) {
	t.Helper()
	f, _ := facts["stdout"].(map[string]any)
	n := func(k string) int { v, _ := f[k].(float64); return int(v) }
	complete, _ := f["spillComplete"].(bool)
	path, _ := f["spillPath"].(string)
	reason, _ := f["spillReason"].(string)
	ok := n("omittedBytes") == c.omitted && n("omittedLines") == c.lines && complete == c.complete
	switch {
	case c.complete:
		ok = ok && path == c.path && reason == ""
	case c.lost:
		ok = ok && path == "" && n("spillBytes") == 0 && reason != ""
	default:
		ok = ok && path == c.path && n("spillBytes") == c.first && reason != ""
	}
	if !ok {
		t.Fatalf("%s: structured facts %v disagree with %q", what, f, c.line)
	}
}

// A full disk: the host's runtime directory, spill files included, on a
// 4 MiB tmpfs. 22 MB of output fill it: the notice says the spill file is
// partial and why, with exact numbers. The next commands on the still full
// disk, and a job's read, say the truth too, and the session goes on.
func TestFullDiskSpillTellsTheTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	rt := tmpfs(t, "4m")
	s := startServeIn(t, ctx, rt, toolsComp)

	f := fault(t, "full disk: 22 MB of output, spill files on a 4 MiB tmpfs")
	stream := digits(22_000_000)
	text, facts := s.tool(t, ctx, "bash", map[string]any{"command": digitsCmd(len(stream))})
	c := readCut(t, "22 MB", text, stream)
	if c.complete || c.lost || c.reason != "disk full (ENOSPC)" || !strings.HasPrefix(c.path, rt) {
		t.Fatalf("22 MB on a 4 MiB disk: %q", c.line)
	}
	checkFile(t, "22 MB", c, stream)
	if fi, err := os.Stat(c.path); err != nil || fi.Size() != int64(c.first) {
		t.Fatalf("the file holds %v bytes, the notice says %d: %v", fi.Size(), c.first, err)
	}
	checkFacts(t, "22 MB", facts, c)
	if len(s.links) != 1 || !strings.HasPrefix(s.links[0], "partial output: ") {
		t.Fatalf("the resource link of a partial spill file: %q", s.links)
	}
	f.Saw("%q, linked as %q", c.line, s.links[0])

	for i := 0; i < 2; i++ {
		stream := digits(1_000_000)
		text, facts := s.tool(t, ctx, "bash", map[string]any{"command": digitsCmd(len(stream))})
		c := readCut(t, "next 1 MB", text, stream)
		checkFile(t, "next 1 MB", c, stream)
		checkFacts(t, "next 1 MB", facts, c)
		if c.complete {
			t.Fatalf("a full disk took 1 MB whole: %q", c.line)
		}
		f.Saw("then %q", c.line)
	}

	// A job's read, on the same full disk.
	stream = digits(500_000)
	out, _ := s.bash(t, ctx, map[string]any{"command": digitsCmd(len(stream)), "run_in_background": true})
	id := jobID(out)
	if id == "" {
		t.Fatalf("no job id in %q", out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := s.bash(t, ctx, map[string]any{"command": "true"})
		if strings.Contains(out, "[job "+id+" finished") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never finished", id)
		}
	}
	text, facts = s.tool(t, ctx, "job_output", map[string]any{"job_id": id})
	c = readCut(t, "job read", strings.TrimSuffix(text, "\n[job "+id+" finished]"), stream)
	checkFile(t, "job read", c, stream)
	checkFacts(t, "job read", facts, c)
	f.Saw("job_output %q", c.line)

	s.commandsRun(t, ctx, 10)
	f.Saw("10 later commands exit 0")
	if left, _ := filepath.Glob(filepath.Join(rt, "dsh", "host-*", "spill", "*", "*")); len(left) == 0 {
		t.Fatalf("the partial spill file is gone while its session lasts")
	}
}

// The per-stream cap and a spill file holding everything, through the
// real binaries: each notice says which, and the file agrees.
func TestSpillNoticesSayWhatTheFileHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := startServe(t, ctx, `
settings:
  shell:
    maxSpillBytes: 100000
`+toolsComp)
	f := fault(t, "spill cap: 1 MB of output, maxSpillBytes 100000")
	stream := digits(1_000_000)
	text, facts := s.tool(t, ctx, "bash", map[string]any{"command": digitsCmd(len(stream))})
	c := readCut(t, "capped", text, stream)
	if c.complete || c.lost || c.reason != "maxSpillBytes cap" || c.first != 100_000 {
		t.Fatalf("capped: %q", c.line)
	}
	checkFile(t, "capped", c, stream)
	checkFacts(t, "capped", facts, c)
	f.Saw("%q", c.line)

	stream = digits(90_000)
	text, facts = s.tool(t, ctx, "bash", map[string]any{"command": digitsCmd(len(stream))})
	c = readCut(t, "whole", text, stream)
	if !c.complete {
		t.Fatalf("90 kB under a 100 kB cap: %q", c.line)
	}
	checkFile(t, "whole", c, stream)
	checkFacts(t, "whole", facts, c)
	f.Saw("then %q", c.line)
	s.commandsRun(t, ctx, 5)
	f.Saw("5 later commands exit 0")
}
