package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/shell"
)

// text turns output bytes into text; invalid UTF-8 shows as U+FFFD.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// body is stdout, then stderr in a [stderr] section.
func body(stdout, stderr []byte) string {
	out := text(stdout)
	if len(stderr) > 0 {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += "[stderr]\n" + text(stderr)
	}
	return out
}

// assemble puts each marker on its own line after the body, so
// shell.ParseExitStatus finds the last one even after empty output.
func assemble(b string, markers []string) string {
	b = strings.TrimSuffix(b, "\n")
	for _, m := range markers {
		b += "\n" + m
	}
	return b
}

func exitMarker(code *int32, signal string) string {
	c := 0
	if code != nil {
		c = int(*code)
	}
	return strings.TrimPrefix(shell.ExitMarker(c, signal), "\n")
}

// renderRun is the model-facing text of a foreground run: body, truncation
// notices, the timeout line, the exit marker last.
func renderRun(r *shell.RunResult) string {
	var markers []string
	if r.Stdout.GetTruncated() {
		markers = append(markers, cutNotice("output", r.Stdout))
	}
	if r.Stderr.GetTruncated() {
		markers = append(markers, cutNotice("stderr", r.Stderr))
	}
	if r.TimedOut {
		markers = append(markers, fmt.Sprintf("[timed out after %dms]", r.TimeoutMs))
	}
	if r.Aborted {
		markers = append(markers, "[aborted]")
	}
	if m := exitMarker(r.ExitCode, r.Signal); m != "" {
		markers = append(markers, m)
	}
	return assemble(body(r.Stdout.GetData(), r.Stderr.GetData()), markers)
}

// collected is one stream's counts and spill file, as a ctx.shell run
// (shell.Collected) or a ctx.jobs read (JobRead's facts) reports them.
type collected interface {
	GetTotal() int64
	GetTruncated() bool
	GetDropped() int64
	GetDroppedLines() int64
	GetSpillPath() string
	GetSpillBytes() int64
	GetSpillComplete() bool
	GetSpillReason() string
	GetSpillError() string
}

// cutNotice says what of a cut stream ("output" or "stderr") was left out
// and where it is: the spill file when it holds every byte, what part of
// it the spill file holds and why no more, or that it is lost and why. It
// never names a file as the full output unless it is.
func cutNotice(stream string, c collected) string {
	lines := "lines"
	if c.GetDroppedLines() == 1 {
		lines = "line"
	}
	n := fmt.Sprintf("[%s truncated: %s bytes (%s %s) omitted", stream, thousands(c.GetDropped()), thousands(c.GetDroppedLines()), lines)
	path := c.GetSpillPath()
	switch {
	case path != "" && c.GetSpillComplete():
		return n + "; full " + stream + ": " + path + "]"
	case path != "" && c.GetSpillReason() != "":
		return fmt.Sprintf("%s; partial %s (first %s of %s bytes; %s): %s]", n, stream,
			thousands(c.GetSpillBytes()), thousands(c.GetTotal()), spillReason(c), path)
	case path != "":
		// An executor that names a spill file but not how much it holds.
		return n + "; " + stream + " so far, perhaps not all of it: " + path + "]"
	case c.GetSpillReason() != "":
		return n + " and lost: " + spillReason(c) + "]"
	}
	return n + "; no spill file was reported]"
}

// spillReason words a spill file's reason for holding less than its stream.
func spillReason(c collected) string {
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
	case "disk_full":
		if detail == syscall.EDQUOT.Error() {
			return "disk quota exceeded (EDQUOT)"
		}
		return "disk full (ENOSPC)"
	case "write_error":
		return why("write error")
	case "create_error":
		return why("the spill file could not be created")
	}
	return why(c.GetSpillReason())
}

// thousands writes n with comma separators: 1234567 is "1,234,567".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

// runFailed reports whether a run's result carries an exit marker: the
// tool result is an error exactly when the command did not exit 0.
func runFailed(r *shell.RunResult) bool {
	return r.Signal != "" || r.ExitCode == nil || *r.ExitCode != 0 || r.TimedOut || r.Aborted
}

// streamFacts are a stream's facts in structured content: the numbers and
// the spill file's state behind its truncation notice.
type streamFacts struct {
	TotalBytes   int64  `json:"totalBytes"`
	Truncated    bool   `json:"truncated"`
	OmittedBytes int64  `json:"omittedBytes,omitempty"`
	OmittedLines int64  `json:"omittedLines,omitempty"`
	SpillPath    string `json:"spillPath,omitempty"`
	SpillBytes   int64  `json:"spillBytes,omitempty"`
	// Set once the stream spilled, or was cut without a spill file.
	SpillComplete *bool  `json:"spillComplete,omitempty"`
	SpillReason   string `json:"spillReason,omitempty"`
	SpillError    string `json:"spillError,omitempty"`
}

type runFacts struct {
	ExitCode   *int32      `json:"exitCode"`
	Signal     string      `json:"signal,omitempty"`
	TimedOut   bool        `json:"timedOut"`
	Aborted    bool        `json:"aborted"`
	TimeoutMs  int64       `json:"timeoutMs"`
	DurationMs int64       `json:"durationMs"`
	Stdout     streamFacts `json:"stdout"`
	Stderr     streamFacts `json:"stderr"`
}

func facts(c collected) streamFacts {
	f := streamFacts{
		TotalBytes:   c.GetTotal(),
		Truncated:    c.GetTruncated(),
		OmittedBytes: c.GetDropped(),
		OmittedLines: c.GetDroppedLines(),
		SpillPath:    c.GetSpillPath(),
		SpillBytes:   c.GetSpillBytes(),
		SpillReason:  c.GetSpillReason(),
		SpillError:   c.GetSpillError(),
	}
	if c.GetTruncated() || c.GetSpillPath() != "" || c.GetSpillReason() != "" {
		complete := c.GetSpillComplete()
		f.SpillComplete = &complete
	}
	return f
}

func runStructured(r *shell.RunResult) []byte {
	b, _ := json.Marshal(runFacts{
		ExitCode:   r.ExitCode,
		Signal:     r.Signal,
		TimedOut:   r.TimedOut,
		Aborted:    r.Aborted,
		TimeoutMs:  r.TimeoutMs,
		DurationMs: r.DurationMs,
		Stdout:     facts(r.Stdout),
		Stderr:     facts(r.Stderr),
	})
	return b
}

// renderStarted answers a background start.
func renderStarted(j *jobsv1.Job) string {
	return fmt.Sprintf("[job %s started (pid %d); read its output with job_output, stop it with job_kill]", j.Id, j.Pid)
}

// renderRead is the text of a job_output read: the new output, a notice
// for each stream that lost bytes before they were read, the job's state,
// the exit marker last.
func renderRead(r *jobsv1.JobRead) string {
	var markers []string
	if r.StdoutFacts.GetTruncated() {
		markers = append(markers, cutNotice("output", r.StdoutFacts))
	}
	if r.StderrFacts.GetTruncated() {
		markers = append(markers, cutNotice("stderr", r.StderrFacts))
	}
	j := r.Job
	if j.Status == shell.StatusRunning {
		markers = append(markers, "[job "+j.Id+" is still running]")
	} else {
		markers = append(markers, "[job "+j.Id+" finished]")
		if m := exitMarker(j.ExitCode, j.Signal); m != "" {
			markers = append(markers, m)
		}
	}
	return assemble(body(r.Stdout, r.Stderr), markers)
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
}

func jobStructured(j *jobsv1.Job, r *jobsv1.JobRead) []byte {
	f := jobFacts{JobID: j.Id, Status: j.Status, ExitCode: j.ExitCode, Signal: j.Signal, Pid: j.Pid}
	if r != nil {
		out, errs := facts(r.StdoutFacts), facts(r.StderrFacts)
		f.Lossy, f.Stdout, f.Stderr = r.Lossy, &out, &errs
	}
	b, _ := json.Marshal(f)
	return b
}

// renderNotices words the jobs that finished since the owner was last told,
// one line each, for the top of the next result.
func renderNotices(finished []*jobsv1.Job) string {
	var lines []string
	for _, j := range finished {
		how := "completed"
		switch {
		case j.Signal != "":
			how = "killed by signal " + j.Signal
		case j.ExitCode != nil && *j.ExitCode != 0:
			how = "exited with code " + strconv.Itoa(int(*j.ExitCode))
		}
		lines = append(lines, fmt.Sprintf("[job %s finished: %s; read its output with job_output] %s", j.Id, how, oneLine(j.Command, 80)))
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

// resources are the spill files a result names, for the front end to
// offer (MCP resource links).
func resources(streams ...collected) []*toolsv1.Resource {
	var out []*toolsv1.Resource
	for i, c := range streams {
		if c.GetSpillPath() == "" {
			continue
		}
		what := "output"
		if i == 1 {
			what = "stderr"
		}
		title := "full " + what
		if !c.GetSpillComplete() {
			title = "partial " + what
		}
		out = append(out, &toolsv1.Resource{Path: c.GetSpillPath(), Title: title, Complete: c.GetSpillComplete()})
	}
	return out
}
