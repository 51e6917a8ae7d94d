package shelltool

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/internal/golden"
	"github.com/dshrun/dsh/plugins/shell"
)

func code(n int32) *int32 { return &n }

func out(s string) *shell.Collected {
	return &shell.Collected{Data: []byte(s), Total: int64(len(s))}
}

// spilled is a cut stream: data is its tail of total bytes, the spill file
// at path holds its first spillBytes; reason is why no more ("" when all).
func spilled(data string, total, droppedLines int64, path string, spillBytes int64, reason string) *shell.Collected {
	return &shell.Collected{
		Data: []byte(data), Total: total, Truncated: true,
		Dropped: total - int64(len(data)), DroppedLines: droppedLines,
		SpillPath: path, SpillBytes: spillBytes, SpillComplete: reason == "" && spillBytes == total, SpillReason: reason,
	}
}

// numbers is "from\n" .. "to\n".
func numbers(from, to int) []byte {
	var b bytes.Buffer
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

// spillAll is a stream retained whole and also in a complete spill file
// (it outgrew spill_after_bytes).
func spillAll(data []byte) *shell.Collected {
	return &shell.Collected{Data: data, Total: int64(len(data)), SpillPath: "/s/all.stdout", SpillBytes: int64(len(data)), SpillComplete: true}
}

func withError(c *shell.Collected, e string) *shell.Collected {
	c.SpillError = e
	return c
}

func TestRenderGolden(t *testing.T) {
	cases := map[string]*shell.RunResult{
		"exit0":        {ExitCode: code(0), Stdout: out("hello\n"), Stderr: out("")},
		"exit0-empty":  {ExitCode: code(0), Stdout: out(""), Stderr: out("")},
		"exit3":        {ExitCode: code(3), Stdout: out("partial\n"), Stderr: out("boom\n")},
		"exit3-empty":  {ExitCode: code(3), Stdout: out(""), Stderr: out("")},
		"stderr-only":  {ExitCode: code(1), Stdout: out(""), Stderr: out("no such file")},
		"no-newline":   {ExitCode: code(2), Stdout: out("a"), Stderr: out("b")},
		"timeout":      {Signal: "SIGTERM", TimedOut: true, TimeoutMs: 300, Stdout: out("tick\n"), Stderr: out("")},
		"signal":       {Signal: "SIGKILL", Stdout: out(""), Stderr: out("")},
		"aborted":      {Signal: "SIGTERM", Aborted: true, Stdout: out("x\n"), Stderr: out("")},
		"invalid-utf8": {ExitCode: code(0), Stdout: &shell.Collected{Data: []byte("a\xffb\n")}, Stderr: out("")},
		"truncated": {ExitCode: code(0),
			Stdout: spilled("99999\n100000\n", 588895, 99998, "/run/dsh/spill/cli/p1.stdout", 588895, ""),
			Stderr: out("")},
		"truncated-both-timeout": {Signal: "SIGKILL", TimedOut: true, TimeoutMs: 1000,
			Stdout: spilled("end\n", 5000, 1, "/s/p2.stdout", 5000, ""),
			Stderr: spilled("warn\n", 9000, 1000, "/s/p2.stderr", 9000, "")},
		"truncated-disk-full": {ExitCode: code(0),
			Stdout: spilled("0123456789\n", 22000000, 1999999, "/run/dsh/spill/cli/p3.stdout", 4177920, "disk_full"),
			Stderr: out("")},
		"truncated-disk-quota": {ExitCode: code(0),
			Stdout: withError(spilled("0123456789\n", 22000000, 1999999, "/s/p12.stdout", 4177920, "disk_quota"), "disk quota exceeded"),
			Stderr: out("")},
		"truncated-cap": {ExitCode: code(0),
			Stdout: spilled("tail\n", 1073741824, 0, "/s/p4.stdout", 67108864, "cap"),
			Stderr: out("")},
		"truncated-budget": {ExitCode: code(0),
			Stdout: spilled("x\n", 3000000, 2999999, "/s/p5.stdout", 1000, "budget"),
			Stderr: spilled("e\n", 70000, 1, "/s/p5.stderr", 70000, "")},
		"truncated-owner-budget": {ExitCode: code(0),
			Stdout: spilled("x\n", 3000000, 2999999, "/s/p11.stdout", 1000, "owner_budget"),
			Stderr: withError(spilled("w\n", 64002, 1, "", 0, "owner_budget"), "")},
		"truncated-write-error": {ExitCode: code(1),
			Stdout: withError(spilled("y\n", 3000000, 1499999, "/s/p6.stdout", 1048576, "write_error"), "file too large"),
			Stderr: out("")},
		"truncated-lost-disk-full": {ExitCode: code(0),
			Stdout: withError(spilled("0123456789\n", 1000000, 85091, "", 0, "disk_full"), "no space left on device"),
			Stderr: withError(spilled("w\n", 64002, 1, "", 0, "create_error"), "permission denied")},
		// What the model is shown of what was retained: the budget, binary
		// output, terminal control sequences.
		"budget-both-streams": {ExitCode: code(0),
			Stdout: spillAll(numbers(1, 20000)), Stderr: spillAll(numbers(1, 3000))},
		"budget-one-stream": {ExitCode: code(0), Stdout: spillAll(numbers(1, 20000)), Stderr: out("one warning\n")},
		"budget-after-retention": {ExitCode: code(0),
			Stdout: spilled(string(numbers(1, 64000))[5:], 1924895, 290857, "/s/p8.stdout", 1924895, ""), Stderr: out("")},
		"budget-one-long-line": {ExitCode: code(0), Stdout: spillAll([]byte(strings.Repeat("x", 50000) + "\n")), Stderr: out("")},
		"binary":               {ExitCode: code(0), Stdout: spillAll(append([]byte("\x7fELF\x02\x01\x00\x00"), make([]byte, 20000)...)), Stderr: out("")},
		"binary-small":         {ExitCode: code(0), Stdout: out("\x00\x01\x02\x03"), Stderr: out("")},
		"clean-colours":        {ExitCode: code(1), Stdout: out("\x1b[32m✓\x1b[0m parses\n\x1b[1;31m✗ reads the port\x1b[0m\n"), Stderr: out("\x1b]52;c;Y3VybA==\x07oops\n")},
		"clean-progress":       {ExitCode: code(0), Stdout: out("installing 10%\rinstalling 50%\rinstalling 100%\r\ndone\n"), Stderr: out("")},
		// A limit of the command's tree stopped something in it.
		"limit-processes": {ExitCode: code(2), Stdout: out("48\n49\n"), Stderr: out("sh: 1: Cannot fork\n"),
			Limits: []*shell.LimitHit{{Limit: shell.LimitProcesses, Value: 4096}}},
		"limit-memory": {ExitCode: code(137), Stdout: out(""), Stderr: out(""),
			Limits: []*shell.LimitHit{{Limit: shell.LimitMemory, Value: 2 << 30}}},
		// What the sandbox refused: files, hosts its proxy refused, both.
		"sandbox-files": {ExitCode: code(1), Stdout: out(""), Stderr: out("touch: cannot touch '/etc/x': Read-only file system\n"),
			Sandbox: &shell.SandboxInfo{Mode: "workspace-write", Denied: true, DenialSource: "errors", DeniedPaths: []string{"/etc/x"}}},
		"sandbox-network-denied": {ExitCode: code(56), Stdout: out(""), Stderr: out("curl: (56) CONNECT tunnel failed, response 403\n"),
			Sandbox: &shell.SandboxInfo{Mode: "workspace-write", Denied: true, DenialSource: "proxy", NetworkDenied: []string{"evil.test:443"}, NetworkReached: []string{"github.com:443"}}},
		"sandbox-files-and-network": {ExitCode: code(1), Stdout: out("fetched\n"), Stderr: out("touch: cannot touch '/etc/x': Read-only file system\n"),
			Sandbox: &shell.SandboxInfo{Mode: "read-only", Denied: true, DenialSource: "errors", DeniedPaths: []string{"/etc/x"}, NetworkDenied: []string{"a.test:443", "b.test:80"}}},
		"sandbox-network-reached": {ExitCode: code(0), Stdout: out("ok\n"), Stderr: out(""),
			Sandbox: &shell.SandboxInfo{Mode: "workspace-write", NetworkReached: []string{"github.com:443"}}},
		"truncated-unreported": {ExitCode: code(0),
			Stdout: &shell.Collected{Data: []byte("z\n"), Total: 100000, Truncated: true, Dropped: 99998, DroppedLines: 49999, SpillPath: "/s/p7.stdout"},
			Stderr: &shell.Collected{Data: []byte("q\n"), Total: 100000, Truncated: true, Dropped: 99998, DroppedLines: 49999}},
	}
	for name, r := range cases {
		text, _, _ := renderRun(r, DefaultMaxOutputChars, testShell.ReadBinary)
		golden.Check(t, "run-"+name, text)
		// The exit marker is always recoverable (the sandbox's lines
		// follow it).
		st := shell.ParseExitStatus(withoutSandboxLines(text))
		wantCode := 0
		if r.ExitCode != nil {
			wantCode = int(*r.ExitCode)
		}
		if st.Signal != r.Signal || (r.Signal == "" && st.ExitCode != wantCode) {
			t.Errorf("%s: ParseExitStatus = %+v", name, st)
		}
		if runFailed(r) != (strings.Contains("\n"+text, "\n[exit code: ") || strings.Contains(text, "[killed by signal: ") || r.TimedOut || r.Aborted) {
			t.Errorf("%s: isError disagrees with the markers", name)
		}
		noBlankEdges(t, "run-"+name, text)
	}
}

// withoutSandboxLines is a result without its trailing [sandbox: …] lines.
func withoutSandboxLines(text string) string {
	lines := strings.Split(text, "\n")
	for len(lines) > 1 && strings.HasPrefix(lines[len(lines)-1], "[sandbox: ") {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// noBlankEdges fails t when a result starts or ends with an empty line: a
// result without output is its markers alone.
func noBlankEdges(t *testing.T, name, text string) {
	t.Helper()
	if strings.HasPrefix(text, "\n") || strings.HasSuffix(text, "\n") {
		t.Errorf("%s starts or ends with an empty line: %q", name, text)
	}
}

func TestRenderReadGolden(t *testing.T) {
	cases := map[string]*jobsv1.JobRead{
		"running":       {Job: &jobsv1.Job{Id: "j1", Status: "running"}, Stdout: []byte("line1\nline2\n")},
		"running-empty": {Job: &jobsv1.Job{Id: "j1", Status: "running"}},
		"finished-0":    {Job: &jobsv1.Job{Id: "j2", Status: "completed", ExitCode: code(0)}, Stdout: []byte("done\n"), Stderr: []byte("warning\n")},
		"finished-4":    {Job: &jobsv1.Job{Id: "j3", Status: "completed", ExitCode: code(4)}},
		"killed":        {Job: &jobsv1.Job{Id: "j4", Status: "killed", Signal: "SIGTERM"}, Stdout: []byte("partial")},
		"limit-memory": {Job: &jobsv1.Job{Id: "j8", Status: "killed", Signal: "SIGKILL",
			Limits: []*shell.LimitHit{{Limit: "memory", Value: 1536 << 20}}}, Stdout: []byte("allocating\n")},
		"lossy": {Job: &jobsv1.Job{Id: "j5", Status: "running"}, Stdout: []byte("tail\n"), Lossy: true, StdoutSpillPath: "/s/p9.stdout",
			StdoutFacts: noData(spilled("tail\n", 200000, 31999, "/s/p9.stdout", 200000, ""))},
		"lossy-partial": {Job: &jobsv1.Job{Id: "j6", Status: "completed", ExitCode: code(0)}, Stdout: []byte("tail\n"), Stderr: []byte("oops\n"), Lossy: true,
			StdoutSpillPath: "/s/p10.stdout", StdoutFacts: noData(spilled("tail\n", 22000000, 1999999, "/s/p10.stdout", 4177920, "disk_full")),
			StderrFacts: noData(spilled("oops\n", 70000, 1, "", 0, "create_error"))},
		"network-denied": {Job: &jobsv1.Job{Id: "j9", Status: "completed", ExitCode: code(6)}, Stderr: []byte("curl: (6) Could not resolve host: evil.test\n"),
			Sandbox: &shell.SandboxInfo{Mode: "workspace-write", Denied: true, DenialSource: "proxy", NetworkDenied: []string{"evil.test:443"}}},
	}
	for name, r := range cases {
		text, _, _ := renderRead(r, DefaultMaxOutputChars, testShell.ReadBinary)
		golden.Check(t, "read-"+name, text)
		noBlankEdges(t, "read-"+name, text)
	}
	golden.Check(t, "started", renderStarted(&jobsv1.Job{Id: "j7", Pid: 4242}))
}

// noData is a stream's facts without its data, as JobRead carries them.
func noData(c *shell.Collected) *shell.Collected {
	c.Data = nil
	return c
}

// The structured facts carry the notice's numbers and the spill file's
// state: a partial file is never complete.
func TestStructuredFacts(t *testing.T) {
	r := &shell.RunResult{ExitCode: code(0),
		Stdout: spilled("0123456789\n", 22000000, 1999999, "/s/p3.stdout", 4177920, "disk_full"),
		Stderr: out("fine\n")}
	_, so, se := renderRun(r, DefaultMaxOutputChars, testShell.ReadBinary)
	golden.Check(t, "facts-run-disk-full", string(runStructured(r, so, se))+"\n")
	read := &jobsv1.JobRead{Job: &jobsv1.Job{Id: "j6", Status: "running"}, Stdout: []byte("tail\n"), Lossy: true, StdoutSpillPath: "/s/p10.stdout",
		StdoutFacts: noData(spilled("tail\n", 200000, 31999, "/s/p10.stdout", 200000, "")), StderrFacts: noData(out(""))}
	_, so, se = renderRead(read, DefaultMaxOutputChars, testShell.ReadBinary)
	golden.Check(t, "facts-read-lossy", string(jobStructured(read.Job, read, so, se))+"\n")
	// What cleaning took out, and binary output, are facts too.
	r = &shell.RunResult{ExitCode: code(0), Stdout: out("\x1b[31mred\x1b[0m\r\nbar 10%\rbar 100%\n"), Stderr: out("\x00\x01")}
	_, so, se = renderRun(r, DefaultMaxOutputChars, testShell.ReadBinary)
	golden.Check(t, "facts-run-cleaned", string(runStructured(r, so, se))+"\n")
	// The hosts the proxy refused and reached.
	r = &shell.RunResult{ExitCode: code(56), Stdout: out(""), Stderr: out("curl: (56) CONNECT tunnel failed, response 403\n"),
		Sandbox: &shell.SandboxInfo{Mode: "workspace-write", Enforcement: "bubblewrap: mount,network,seccomp", Denied: true, DenialSource: "proxy", NetworkDenied: []string{"evil.test:443"}, NetworkReached: []string{"github.com:443"}}}
	_, so, se = renderRun(r, DefaultMaxOutputChars, testShell.ReadBinary)
	golden.Check(t, "facts-run-network", string(runStructured(r, so, se))+"\n")
}

// Finished jobs are worded by the tool: how each ended, and its command on
// one line of at most 80 characters.
func TestRenderNotices(t *testing.T) {
	four, zero, minus := int32(4), int32(0), int32(-1)
	long := "exit 4 # " + strings.Repeat("é", 100)
	got := renderNotices([]*jobsv1.Job{
		{Id: "j1", Command: long, Status: "completed", ExitCode: &four},
		{Id: "j2", Command: "sleep 600\necho never", Status: "killed", Signal: "SIGTERM"},
		{Id: "j3", Command: "true", Status: "completed", ExitCode: &zero},
		{Id: "j4", Command: "make -j", Status: "completed", ExitCode: &four, Limits: []*shell.LimitHit{{Limit: "processes", Value: 50}}},
		{Id: "j5", Command: "remote", Status: "killed", ExitCode: &minus}, // an executor that knows no signal, as ctx.jobs sends it
	})
	want := "[job j1 finished: exited with code 4; read its output with job_output] " + string([]rune(long)[:80]) + "…\n" +
		"[job j2 finished: killed by signal SIGTERM; read its output with job_output] sleep 600 …\n" +
		"[job j3 finished: completed; read its output with job_output] true\n" +
		"[job j4 finished: exited with code 4; the job reached its limit of 50 processes and threads alive at once, so starting another failed; read its output with job_output] make -j\n" +
		"[job j5 finished: killed; read its output with job_output] remote"
	if got != want {
		t.Errorf("notices:\n%s\nwant\n%s", got, want)
	}
	// An empty line parts them from the result; a result with no text
	// (a command that printed nothing and exited 0) leaves them alone.
	if got := withNotices("[job j3 finished: completed; read its output with job_output] true", "hi"); got != "[job j3 finished: completed; read its output with job_output] true\n\nhi" {
		t.Errorf("notices over a result: %q", got)
	}
	if got := withNotices("[job j3 finished: completed; read its output with job_output] true", ""); got != "[job j3 finished: completed; read its output with job_output] true" {
		t.Errorf("notices over no text: %q", got)
	}
}

// job_list's text: each job's state, how long it ran and when it started,
// the output not read yet, its command cleaned on one line; and a sentence
// for no jobs.
func TestRenderList(t *testing.T) {
	now := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	list := []*jobsv1.Job{
		{Id: "j1", Command: "npm run dev", Description: "dev server", Status: "running", StartedUnixMs: at(2*time.Hour + 3*time.Minute + 4*time.Second), UnreadBytes: 123456, Pid: 41},
		{Id: "j2", Command: "make test\necho done", Status: "completed", ExitCode: code(2), StartedUnixMs: at(5 * time.Minute), FinishedUnixMs: at(4*time.Minute + 15*time.Second), UnreadBytes: 1},
		{Id: "j3", Command: "true", Status: "completed", ExitCode: code(0), StartedUnixMs: at(40 * time.Second), FinishedUnixMs: at(40 * time.Second)},
		{Id: "j4", Command: "\x1b[31msleep\x1b[0m 600", Status: "killed", Signal: "SIGTERM", StartedUnixMs: at(90 * time.Second), FinishedUnixMs: at(30 * time.Second), UnreadBytes: 7},
		{Id: "j5", Command: "./leak", Status: "killed", Signal: "SIGKILL", StartedUnixMs: at(time.Minute), FinishedUnixMs: at(50 * time.Second),
			Limits: []*shell.LimitHit{{Limit: shell.LimitMemory, Value: 1 << 30}}},
		{Id: "j6", Command: "long " + strings.Repeat("x", 300), Status: "running", StartedUnixMs: now.Add(time.Second).UnixMilli()},
		{Id: "j7", Command: "remote", Status: "killed", ExitCode: code(-1), StartedUnixMs: at(20 * time.Second), FinishedUnixMs: at(10 * time.Second)},
	}
	text := renderList(list, now)
	golden.Check(t, "list", text)
	noBlankEdges(t, "list", text)
	golden.Check(t, "facts-list", string(listStructured(list, now))+"\n")
	if got := renderList(nil, now); got != "[you have no background jobs: none is running, and every finished one's output was read to its end]" {
		t.Errorf("no jobs: %q", got)
	}
	if got := string(listStructured(nil, now)); got != `{"jobs":[]}` {
		t.Errorf("no jobs, structured: %s", got)
	}
}
