package shell

import (
	"regexp"
	"strconv"
)

// ExitStatus is what ParseExitStatus recovers from a rendered tool result.
type ExitStatus struct {
	// Body is the text without the consumed marker.
	Body string
	// ExitCode is the process's exit code; 0 for a clean exit and when the
	// process was killed by a signal.
	ExitCode int
	// Signal names the signal that killed the process ("SIGKILL"), or "".
	Signal string
}

// A marker is a whole line and ends the text: the first line of a result
// with no output, else the line after a newline. Text that merely ends in
// one ("see [exit code: 3]") does not match.
var (
	signalMarker = regexp.MustCompile(`(?:^|\n)\[killed by signal: ([^\]\n]+)\]$`)
	exitMarker   = regexp.MustCompile(`(?:^|\n)\[exit code: ([1-9][0-9]*)\]$`)
)

// ParseExitStatus splits a rendered shell result into its body and exit
// status: a trailing "[killed by signal: X]" line gives a signal, a trailing
// non-zero "[exit code: N]" line an exit code, and neither a clean exit 0.
// The consumed marker and the newline before it are removed from Body, so
// a presentation that shows the status on its own does not show it twice.
// Output whose last line reads like a marker, from a command that exited
// 0, is read as that marker: the structured result's exitCode is exact.
func ParseExitStatus(text string) ExitStatus {
	if m := signalMarker.FindStringSubmatchIndex(text); m != nil {
		return ExitStatus{Body: text[:m[0]], Signal: text[m[2]:m[3]]}
	}
	if m := exitMarker.FindStringSubmatchIndex(text); m != nil {
		code, err := strconv.Atoi(text[m[2]:m[3]])
		if err == nil {
			return ExitStatus{Body: text[:m[0]], ExitCode: code}
		}
		// Too large for an int: not a marker any renderer wrote.
	}
	return ExitStatus{Body: text}
}

// ExitMarker renders the marker ParseExitStatus reads, with its leading
// newline: "\n[killed by signal: SIGKILL]" when signal is set, else
// "\n[exit code: N]" for a non-zero code, else "". A result with no output
// is the marker without that newline.
func ExitMarker(exitCode int, signal string) string {
	switch {
	case signal != "":
		return "\n[killed by signal: " + signal + "]"
	case exitCode != 0:
		return "\n[exit code: " + strconv.Itoa(exitCode) + "]"
	}
	return ""
}
