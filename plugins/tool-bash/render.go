package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dshrun/dsh/plugins/jobs/jobsv1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/plugins/subprocess/subprocessv1"
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
		markers = append(markers, "[output truncated; full output: "+r.Stdout.GetSpillPath()+"]")
	}
	if r.Stderr.GetTruncated() {
		markers = append(markers, "[stderr truncated; full stderr: "+r.Stderr.GetSpillPath()+"]")
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

// runFailed reports whether a run's result carries an exit marker: the
// tool result is an error exactly when the command did not exit 0.
func runFailed(r *shell.RunResult) bool {
	return r.Signal != "" || r.ExitCode == nil || *r.ExitCode != 0 || r.TimedOut || r.Aborted
}

type streamFacts struct {
	TotalBytes int64  `json:"totalBytes"`
	Truncated  bool   `json:"truncated"`
	SpillPath  string `json:"spillPath,omitempty"`
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

func facts(c *subprocessv1.Collected) streamFacts {
	return streamFacts{TotalBytes: c.GetTotal(), Truncated: c.GetTruncated(), SpillPath: c.GetSpillPath()}
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

// renderRead is the text of a job_output read: the new output, a notice if
// some was lost before it was read, the job's state, the exit marker last.
func renderRead(r *jobsv1.JobRead) string {
	var markers []string
	if r.Lossy {
		spill := r.StdoutSpillPath
		if spill == "" {
			spill = r.StderrSpillPath
		}
		markers = append(markers, "[some output was dropped before it was read; full output: "+spill+"]")
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
	JobID           string `json:"jobId"`
	Status          string `json:"status"`
	ExitCode        *int32 `json:"exitCode,omitempty"`
	Signal          string `json:"signal,omitempty"`
	Lossy           bool   `json:"lossy,omitempty"`
	StdoutSpillPath string `json:"stdoutSpillPath,omitempty"`
	StderrSpillPath string `json:"stderrSpillPath,omitempty"`
	Pid             int32  `json:"pid,omitempty"`
}

func jobStructured(j *jobsv1.Job, r *jobsv1.JobRead) []byte {
	f := jobFacts{JobID: j.Id, Status: j.Status, ExitCode: j.ExitCode, Signal: j.Signal, Pid: j.Pid}
	if r != nil {
		f.Lossy, f.StdoutSpillPath, f.StderrSpillPath = r.Lossy, r.StdoutSpillPath, r.StderrSpillPath
	}
	b, _ := json.Marshal(f)
	return b
}
