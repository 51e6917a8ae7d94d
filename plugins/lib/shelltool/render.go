package shelltool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk/modeltext"
)

// DefaultMaxOutputChars is the model budget of one result: what stdout
// and stderr together may show, in characters.
const DefaultMaxOutputChars = 30_000

// view is one stream as the model reads it: its cleaned last lines within
// its share of the budget, or nothing when it is binary, and what it does
// not show (the executor's retention and the budget together).
type view struct {
	name   string // "output" or "stderr"
	text   []byte
	binary bool
	// omittedBytes and omittedLines count, in the raw stream, what comes
	// before the first byte shown (everything, for binary output).
	omittedBytes, omittedLines int64
	removed                    modeltext.Removed
	c                          *shell.Collected // facts: totals, spill file
}

// omitted reports whether the model does not see the whole stream.
func (v view) omitted() bool { return v.binary || v.omittedBytes > 0 }

// views makes the two streams' views within a budget of max characters:
// each gets the smaller of its length and half, and what one leaves the
// other may use. A binary stream shows nothing and leaves its share.
func views(stdout, stderr []byte, so, se *shell.Collected, max int) (view, view) {
	out, errs := view{name: "output", c: so}, view{name: "stderr", c: se}
	out.binary, errs.binary = modeltext.IsBinary(stdout), modeltext.IsBinary(stderr)
	length := func(v view, b []byte) int {
		if v.binary {
			return 0
		}
		cleaned, _ := modeltext.Clean(b)
		return utf8.RuneCount(cleaned)
	}
	shareOut, shareErr := modeltext.Share(max, length(out, stdout), length(errs, stderr))
	fill := func(v *view, b []byte, share int) {
		if v.binary {
			v.omittedBytes, v.omittedLines = v.c.GetDropped()+int64(len(b)), v.c.GetDroppedLines()+int64(bytes.Count(b, newline))
			return
		}
		tv := modeltext.TailView(b, share, v.c.GetDropped() > 0)
		v.text, v.removed = tv.Text, tv.Removed
		v.omittedBytes = v.c.GetDropped() + tv.OmittedBytes
		v.omittedLines = v.c.GetDroppedLines() + tv.OmittedLines
	}
	fill(&out, stdout, shareOut)
	fill(&errs, stderr, shareErr)
	return out, errs
}

var newline = []byte{'\n'}

// body is stdout, then stderr in a [stderr] section.
func body(out, errs view) string {
	s := string(out.text)
	if len(errs.text) > 0 {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += "[stderr]\n" + string(errs.text)
	}
	return s
}

// notices are the lines that say what a view leaves out; readBinary says
// how to read binary output no file holds.
func notices(readBinary string, vs ...view) []string {
	var out []string
	for _, v := range vs {
		switch {
		case v.binary:
			out = append(out, binaryNotice(v, readBinary))
		case v.omittedBytes > 0:
			out = append(out, cutNotice(v))
		}
	}
	return out
}

// assemble puts each marker on its own line after the body; a result
// without output is its markers alone, with no empty line before them.
func assemble(b string, markers []string) string {
	lines := markers
	if b = strings.TrimSuffix(b, "\n"); b != "" {
		lines = append([]string{b}, markers...)
	}
	return strings.Join(lines, "\n")
}

// withNotices puts the finished-job notices above a result, with an empty
// line between them, or alone when the result has no text.
func withNotices(notices, text string) string {
	if text == "" {
		return notices
	}
	return notices + "\n\n" + text
}

func exitMarker(code *int32, signal string) string {
	c := 0
	if code != nil {
		c = int(*code)
	}
	return strings.TrimPrefix(shell.ExitMarker(c, signal), "\n")
}

// renderRun is the model-facing text of a foreground run within max
// characters of output: body, what it leaves out, the timeout line, the
// exit marker last.
func renderRun(r *shell.RunResult, max int, readBinary string) (string, view, view) {
	out, errs := views(r.Stdout.GetData(), r.Stderr.GetData(), r.Stdout, r.Stderr, max)
	markers := notices(readBinary, out, errs)
	if r.TimedOut {
		markers = append(markers, fmt.Sprintf("[timed out after %dms]", r.TimeoutMs))
	}
	if r.Aborted {
		markers = append(markers, "[aborted]")
	}
	markers = append(markers, limitMarkers("command", r.Limits)...)
	if m := exitMarker(r.ExitCode, r.Signal); m != "" {
		markers = append(markers, m)
	}
	markers = append(markers, sandboxMarkers(r.Sandbox)...)
	return assemble(body(out, errs), markers), out, errs
}

// limitMarkers say, one plain sentence each, which limit of the command
// (or job: what) stopped something in it, and its value.
func limitMarkers(what string, hits []*shell.LimitHit) []string {
	var m []string
	for _, h := range hits {
		m = append(m, "[limit: "+limitSentence(what, h)+"]")
	}
	return m
}

// limitSentence is what a limit did, without brackets.
func limitSentence(what string, h *shell.LimitHit) string {
	switch h.GetLimit() {
	case shell.LimitProcesses:
		return fmt.Sprintf("the %s reached its limit of %s processes and threads alive at once, so starting another failed", what, modeltext.Thousands(h.GetValue()))
	case shell.LimitMemory:
		return fmt.Sprintf("a process of the %s was killed on reaching the %s's memory limit of %s", what, what, bytesText(h.GetValue()))
	}
	return fmt.Sprintf("the %s reached its %s limit of %s", what, h.GetLimit(), modeltext.Thousands(h.GetValue()))
}

// bytesText is n in the largest binary unit that keeps it readable: "2
// GiB", "1.5 GiB", "64 MiB", "900 bytes".
func bytesText(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return modeltext.Thousands(n) + " bytes"
}

// limitJSON is a limit a tree hit, in structured content.
type limitJSON struct {
	Limit string `json:"limit"`
	Value int64  `json:"value"`
}

func limitsOf(hits []*shell.LimitHit) []limitJSON {
	var out []limitJSON
	for _, h := range hits {
		out = append(out, limitJSON{h.GetLimit(), h.GetValue()})
	}
	return out
}

// sandboxMarkers tell the model that the sandbox refused something (so a
// retry with sandbox_permissions, or network_hosts for a host its proxy
// refused, may help), or that nothing ran: a sandboxing executor's facts,
// as a run or a ctx.jobs read reports them.
func sandboxMarkers(s *shell.SandboxInfo) []string {
	var m []string
	if s == nil || s.GetMode() == "" {
		return nil
	}
	if s.GetRunnerFailed() {
		m = append(m, "[sandbox: the command could not be confined, so it did not run]")
	}
	if s.GetDenied() && s.GetDenialSource() != "proxy" {
		m = append(m, fmt.Sprintf("[sandbox: file access denied under %s mode]", s.GetMode()))
	}
	for _, h := range s.GetNetworkDenied() {
		m = append(m, "[sandbox: network access to "+h+" denied]")
	}
	return m
}

// sandboxJSON is the sandbox facts of a result.
type sandboxJSON struct {
	Mode         string   `json:"mode"`
	Denied       bool     `json:"denied"`
	Enforcement  string   `json:"enforcement,omitempty"`
	RunnerFailed bool     `json:"runnerFailed,omitempty"`
	DeniedPaths  []string `json:"deniedPaths,omitempty"`
	DenialSource string   `json:"denialSource,omitempty"`
	// The hosts (host:port) the sandbox's proxy refused, and reached.
	NetworkDenied  []string `json:"networkDenied,omitempty"`
	NetworkReached []string `json:"networkReached,omitempty"`
}

func sandboxOf(s *shell.SandboxInfo) *sandboxJSON {
	if s == nil || s.GetMode() == "" {
		return nil
	}
	return &sandboxJSON{Mode: s.GetMode(), Denied: s.GetDenied(), Enforcement: s.GetEnforcement(), RunnerFailed: s.GetRunnerFailed(), DeniedPaths: s.GetDeniedPaths(), DenialSource: s.GetDenialSource(),
		NetworkDenied: s.GetNetworkDenied(), NetworkReached: s.GetNetworkReached()}
}

// cutNotice says how much of a stream the model does not see and where it
// is: the spill file when it holds every byte, what part of it the file
// holds and why no more, or that it is lost and why. It never names a file
// as the full output unless it is.
func cutNotice(v view) string {
	lines := "lines"
	if v.omittedLines == 1 {
		lines = "line"
	}
	return fmt.Sprintf("[%s truncated: %s bytes (%s %s) omitted%s]", v.name, modeltext.Thousands(v.omittedBytes), modeltext.Thousands(v.omittedLines), lines, whereIs(v))
}

// binaryNotice stands for a stream that is not text.
func binaryNotice(v view, readBinary string) string {
	where := whereIs(v)
	if where == "; no spill file was reported" {
		where = "; not shown (" + readBinary + ")"
	}
	return fmt.Sprintf("[binary %s: %s bytes%s]", v.name, modeltext.Thousands(v.omittedBytes), where)
}

// whereIs is where the rest of a stream is, after "; ".
func whereIs(v view) string {
	c, stream := v.c, v.name
	path := c.GetSpillPath()
	switch {
	case path != "" && c.GetSpillComplete():
		return "; full " + stream + ": " + path
	case path != "" && c.GetSpillReason() != "":
		return fmt.Sprintf("; partial %s (first %s of %s bytes; %s): %s", stream,
			modeltext.Thousands(c.GetSpillBytes()), modeltext.Thousands(c.GetTotal()), spillReason(c), path)
	case path != "":
		// An executor that names a spill file but not how much it holds.
		return "; " + stream + " so far, perhaps not all of it: " + path
	case c.GetSpillReason() != "":
		return " and lost: " + spillReason(c)
	}
	return "; no spill file was reported"
}

// spillReason words a spill file's reason for holding less than its stream.
func spillReason(c *shell.Collected) string {
	detail := c.GetSpillError()
	why := func(what string) string {
		if detail == "" {
			return what
		}
		return what + ": " + detail
	}
	switch c.GetSpillReason() {
	case "cap":
		return "maxSpillBytes cap"
	case "budget":
		return "total spill budget used up"
	case "owner_budget":
		return "this session's spill budget used up"
	case "disk_full":
		return "disk full (ENOSPC)"
	case "disk_quota":
		return "disk quota exceeded (EDQUOT)"
	case "write_error":
		return why("write error")
	case "create_error":
		return why("the spill file could not be created")
	}
	return why(c.GetSpillReason())
}

// runFailed reports whether a run's result carries an exit marker: the
// tool result is an error exactly when the command did not exit 0.
func runFailed(r *shell.RunResult) bool {
	return r.Signal != "" || r.ExitCode == nil || *r.ExitCode != 0 || r.TimedOut || r.Aborted
}

// streamFacts are a stream's facts in structured content: the numbers and
// the spill file's state behind its notice, and what cleaning removed.
type streamFacts struct {
	TotalBytes int64 `json:"totalBytes"`
	// Truncated is set when the model does not see the whole stream;
	// Omitted* count what it does not see (the executor's retention and
	// the tool's budget together).
	Truncated    bool   `json:"truncated"`
	OmittedBytes int64  `json:"omittedBytes,omitempty"`
	OmittedLines int64  `json:"omittedLines,omitempty"`
	ShownChars   int    `json:"shownChars"`
	Binary       bool   `json:"binary,omitempty"`
	SpillPath    string `json:"spillPath,omitempty"`
	SpillBytes   int64  `json:"spillBytes,omitempty"`
	// Set once the stream spilled, or was cut without a spill file.
	SpillComplete *bool  `json:"spillComplete,omitempty"`
	SpillReason   string `json:"spillReason,omitempty"`
	SpillError    string `json:"spillError,omitempty"`
	// Cleaned counts what was taken out of the text shown: terminal
	// control sequences, other controls, carriage-return overwrites,
	// invalid UTF-8 (the spill file keeps the raw bytes).
	Cleaned *cleanedFacts `json:"cleaned,omitempty"`
}

type cleanedFacts struct {
	Sequences  int `json:"sequences,omitempty"`
	Controls   int `json:"controls,omitempty"`
	Overwrites int `json:"overwrites,omitempty"`
	Invalid    int `json:"invalidUtf8,omitempty"`
}

type runFacts struct {
	ExitCode   *int32       `json:"exitCode"`
	Signal     string       `json:"signal,omitempty"`
	TimedOut   bool         `json:"timedOut"`
	Aborted    bool         `json:"aborted"`
	TimeoutMs  int64        `json:"timeoutMs"`
	DurationMs int64        `json:"durationMs"`
	Stdout     streamFacts  `json:"stdout"`
	Stderr     streamFacts  `json:"stderr"`
	Sandbox    *sandboxJSON `json:"sandbox,omitempty"`
	Limits     []limitJSON  `json:"limits,omitempty"`
}

func facts(v view) streamFacts {
	c := v.c
	f := streamFacts{
		TotalBytes:   c.GetTotal(),
		Truncated:    v.omitted(),
		OmittedBytes: v.omittedBytes,
		OmittedLines: v.omittedLines,
		ShownChars:   utf8.RuneCount(v.text),
		Binary:       v.binary,
		SpillPath:    c.GetSpillPath(),
		SpillBytes:   c.GetSpillBytes(),
		SpillReason:  c.GetSpillReason(),
		SpillError:   c.GetSpillError(),
	}
	if v.omitted() || c.GetSpillPath() != "" || c.GetSpillReason() != "" {
		complete := c.GetSpillComplete()
		f.SpillComplete = &complete
	}
	if r := v.removed; r.Any() {
		f.Cleaned = &cleanedFacts{r.Sequences, r.Controls, r.Overwrites, r.Invalid}
	}
	return f
}

func runStructured(r *shell.RunResult, out, errs view) []byte {
	f := runFacts{
		ExitCode:   r.ExitCode,
		Signal:     r.Signal,
		TimedOut:   r.TimedOut,
		Aborted:    r.Aborted,
		TimeoutMs:  r.TimeoutMs,
		DurationMs: r.DurationMs,
		Stdout:     facts(out),
		Stderr:     facts(errs),
		Limits:     limitsOf(r.Limits),
	}
	if r.Sandbox != nil {
		f.Sandbox = sandboxOf(r.Sandbox)
	}
	b, _ := json.Marshal(f)
	return b
}

// renderStarted answers a background start.
func renderStarted(j *jobsv1.Job) string {
	return fmt.Sprintf("[job %s started (pid %d); read its output with job_output, stop it with job_kill]", j.Id, j.Pid)
}

// renderRead is the text of a job_output read within max characters of
// output: the new output, what it leaves out (the executor's retention
// and the budget together), the job's state, the exit marker last.
func renderRead(r *jobsv1.JobRead, max int, readBinary string) (string, view, view) {
	out, errs := views(r.Stdout, r.Stderr, r.StdoutFacts, r.StderrFacts, max)
	markers := notices(readBinary, out, errs)
	j := r.Job
	if j.Status == shell.StatusRunning {
		markers = append(markers, "[job "+j.Id+" is still running]")
	} else {
		markers = append(markers, "[job "+j.Id+" finished]")
		markers = append(markers, limitMarkers("job", j.Limits)...)
		if m := exitMarker(j.ExitCode, j.Signal); m != "" {
			markers = append(markers, m)
		}
	}
	if r.Sandbox != nil {
		markers = append(markers, sandboxMarkers(r.Sandbox)...)
	}
	return assemble(body(out, errs), markers), out, errs
}

type jobFacts struct {
	JobID    string       `json:"jobId"`
	Status   string       `json:"status"`
	ExitCode *int32       `json:"exitCode,omitempty"`
	Signal   string       `json:"signal,omitempty"`
	Lossy    bool         `json:"lossy,omitempty"`
	Stdout   *streamFacts `json:"stdout,omitempty"`
	Stderr   *streamFacts `json:"stderr,omitempty"`
	Pid      int32        `json:"pid,omitempty"`
	Sandbox  *sandboxJSON `json:"sandbox,omitempty"`
	Limits   []limitJSON  `json:"limits,omitempty"`
}

// jobStructured is a job's facts; with a read, its streams' too.
func jobStructured(j *jobsv1.Job, r *jobsv1.JobRead, vs ...view) []byte {
	f := factsOf(j)
	if r != nil && len(vs) == 2 {
		out, errs := facts(vs[0]), facts(vs[1])
		f.Lossy, f.Stdout, f.Stderr = r.Lossy, &out, &errs
		if r.Sandbox != nil {
			f.Sandbox = sandboxOf(r.Sandbox)
		}
	}
	b, _ := json.Marshal(f)
	return b
}

// factsOf is a job's facts without a read.
func factsOf(j *jobsv1.Job) jobFacts {
	return jobFacts{JobID: j.Id, Status: j.Status, ExitCode: j.ExitCode, Signal: j.Signal, Pid: j.Pid, Limits: limitsOf(j.Limits)}
}

// endedHow words how a finished job ended, the same in its notice and in
// job_list: a clean exit is "completed".
func endedHow(j *jobsv1.Job) string {
	switch {
	case j.Signal != "":
		return "killed by signal " + j.Signal
	case j.Status == shell.StatusKilled:
		return "killed" // its exit code, -1, says nothing
	case j.ExitCode != nil && *j.ExitCode != 0:
		return "exited with code " + strconv.Itoa(int(*j.ExitCode))
	}
	return "completed"
}

// renderNotices words the jobs that finished since the owner was last told,
// one line each, for the top of the next result.
func renderNotices(finished []*jobsv1.Job) string {
	var lines []string
	for _, j := range finished {
		how := endedHow(j)
		for _, h := range j.Limits {
			how += "; " + limitSentence("job", h)
		}
		lines = append(lines, fmt.Sprintf("[job %s finished: %s; read its output with job_output] %s", j.Id, how, oneLine(cleaned(j.Command), 80)))
	}
	return strings.Join(lines, "\n")
}

// oneLine is s up to its first newline and at most n runes, marked where cut.
func oneLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' {
			r = append(r[:i:i], []rune(" …")...)
			break
		}
	}
	if len(r) > n {
		r = append(r[:n:n], '…')
	}
	return string(r)
}

// resources are the spill files of the streams the model does not see
// whole, for the front end to offer (MCP resource links).
func resources(vs ...view) []*toolsv1.Resource {
	var out []*toolsv1.Resource
	for _, v := range vs {
		c := v.c
		if c.GetSpillPath() == "" || !v.omitted() {
			continue
		}
		title := "full " + v.name
		if !c.GetSpillComplete() {
			title = "partial " + v.name
		}
		out = append(out, &toolsv1.Resource{Path: c.GetSpillPath(), Title: title, Complete: c.GetSpillComplete()})
	}
	return out
}

// listCommandRunes bounds a command as job_list shows it: enough to tell
// jobs apart.
const listCommandRunes = 200

// renderList is the text of job_list at now: one line a job, oldest
// first, saying how it stands and how much of its output is unread, then
// its command.
func renderList(list []*jobsv1.Job, now time.Time) string {
	if len(list) == 0 {
		return "[you have no background jobs: none is running, and every finished one's output was read to its end]"
	}
	lines := make([]string, 0, len(list))
	for _, j := range list {
		lines = append(lines, fmt.Sprintf("[job %s: %s; %s] %s", j.Id, jobState(j, now), unreadText(j.UnreadBytes), oneLine(cleaned(j.Command), listCommandRunes)))
	}
	return strings.Join(lines, "\n")
}

// jobState is how a listed job stands: running since when, or how it
// ended, how long it ran and when it started, and the limits it reached.
func jobState(j *jobsv1.Job, now time.Time) string {
	started := time.UnixMilli(j.StartedUnixMs)
	if j.Status == shell.StatusRunning {
		return "running, started " + duration(now.Sub(started)) + " ago"
	}
	how := endedHow(j)
	if j.FinishedUnixMs != 0 {
		how += " after " + duration(time.UnixMilli(j.FinishedUnixMs).Sub(started))
	}
	how += ", started " + duration(now.Sub(started)) + " ago"
	for _, h := range j.Limits {
		how += "; " + limitSentence("job", h)
	}
	return how
}

// unreadText says how much of a job's output job_output has not returned.
func unreadText(n int64) string {
	switch n {
	case 0:
		return "all its output read"
	case 1:
		return "1 byte of output not read yet"
	}
	return modeltext.Thousands(n) + " bytes of output not read yet"
}

// duration is d to the second ("45s", "2m 5s", "5m"), to the minute past
// an hour ("1h 3m"); a moment in the future (another clock) is "0s".
func duration(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	parts := []string{}
	if h > 0 {
		parts, s = append(parts, strconv.Itoa(h)+"h"), 0
	}
	if m > 0 {
		parts = append(parts, strconv.Itoa(m)+"m")
	}
	if s > 0 || len(parts) == 0 {
		parts = append(parts, strconv.Itoa(s)+"s")
	}
	return strings.Join(parts, " ")
}

// cleaned is s as the model may read it: without terminal codes and
// other controls.
func cleaned(s string) string {
	b, _ := modeltext.Clean([]byte(s))
	return string(b)
}

// listedJob is a job in job_list's structured content.
type listedJob struct {
	jobFacts
	Command        string `json:"command"`
	Description    string `json:"description,omitempty"`
	StartedUnixMs  int64  `json:"startedUnixMs"`
	FinishedUnixMs int64  `json:"finishedUnixMs,omitempty"`
	// DurationMs is how long it has run, or ran.
	DurationMs  int64 `json:"durationMs"`
	UnreadBytes int64 `json:"unreadBytes"`
}

func listStructured(list []*jobsv1.Job, now time.Time) []byte {
	out := struct {
		Jobs []listedJob `json:"jobs"`
	}{Jobs: []listedJob{}}
	for _, j := range list {
		end := now.UnixMilli()
		if j.FinishedUnixMs != 0 { // set once it has finished
			end = j.FinishedUnixMs
		}
		out.Jobs = append(out.Jobs, listedJob{
			jobFacts:       factsOf(j),
			Command:        cleaned(j.Command),
			Description:    cleaned(j.Description),
			StartedUnixMs:  j.StartedUnixMs,
			FinishedUnixMs: j.FinishedUnixMs,
			DurationMs:     max(end-j.StartedUnixMs, 0),
			UnreadBytes:    j.UnreadBytes,
		})
	}
	b, _ := json.Marshal(out)
	return b
}
