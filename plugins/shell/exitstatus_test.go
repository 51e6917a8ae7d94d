package shell

import (
	"strings"
	"testing"
)

func TestParseExitStatus(t *testing.T) {
	cases := []struct {
		in   string
		want ExitStatus
	}{
		{"", ExitStatus{Body: ""}},
		{"hello\n", ExitStatus{Body: "hello\n"}},
		{"out\n[exit code: 3]", ExitStatus{Body: "out", ExitCode: 3}},
		{"\n[exit code: 3]", ExitStatus{Body: "", ExitCode: 3}},
		{"out\n\n[killed by signal: SIGKILL]", ExitStatus{Body: "out\n", Signal: "SIGKILL"}},
		{"out\n[timed out after 100ms]\n[killed by signal: SIGTERM]", ExitStatus{Body: "out\n[timed out after 100ms]", Signal: "SIGTERM"}},
		// A result with no output is its markers alone.
		{"[exit code: 3]", ExitStatus{Body: "", ExitCode: 3}},
		{"[killed by signal: SIGKILL]", ExitStatus{Body: "", Signal: "SIGKILL"}},
		{"[timed out after 100ms]\n[killed by signal: SIGTERM]", ExitStatus{Body: "[timed out after 100ms]", Signal: "SIGTERM"}},
		// Not a line of its own: ordinary output.
		{"see [exit code: 3]", ExitStatus{Body: "see [exit code: 3]"}},
		{"x[killed by signal: SIGKILL]", ExitStatus{Body: "x[killed by signal: SIGKILL]"}},
		// Not at the end.
		{"a\n[exit code: 3]\nmore", ExitStatus{Body: "a\n[exit code: 3]\nmore"}},
		// Zero is not a marker.
		{"a\n[exit code: 0]", ExitStatus{Body: "a\n[exit code: 0]"}},
		{"a\n[exit code: 007]", ExitStatus{Body: "a\n[exit code: 007]"}},
		{"a\n[exit code: 99999999999999999999999]", ExitStatus{Body: "a\n[exit code: 99999999999999999999999]"}},
		// Only the last marker is consumed.
		{"\n[exit code: 1]\n[exit code: 2]", ExitStatus{Body: "\n[exit code: 1]", ExitCode: 2}},
		{"x\n[killed by signal: ]", ExitStatus{Body: "x\n[killed by signal: ]"}},
	}
	for _, tc := range cases {
		if got := ParseExitStatus(tc.in); got != tc.want {
			t.Errorf("ParseExitStatus(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestExitMarkerRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		code int
		sig  string
	}{{0, ""}, {1, ""}, {255, ""}, {0, "SIGKILL"}, {0, "SIGTERM"}} {
		for _, body := range []string{"", "x", "x\n", "see [exit code: 4]"} {
			got := ParseExitStatus(body + ExitMarker(tc.code, tc.sig))
			if got.Body != body || got.ExitCode != tc.code || got.Signal != tc.sig {
				t.Errorf("round trip of %q code=%d sig=%q: %+v", body, tc.code, tc.sig, got)
			}
		}
		// With no output, the marker is the whole result.
		got := ParseExitStatus(strings.TrimPrefix(ExitMarker(tc.code, tc.sig), "\n"))
		if got.Body != "" || got.ExitCode != tc.code || got.Signal != tc.sig {
			t.Errorf("the marker alone, code=%d sig=%q: %+v", tc.code, tc.sig, got)
		}
	}
}

func FuzzParseExitStatus(f *testing.F) {
	for _, s := range []string{"", "a\n[exit code: 3]", "\n[killed by signal: SIGINT]", "[exit code: 1]", "\n[exit code: 0]"} {
		f.Add(s, 0, "")
	}
	f.Add("out", 2, "")
	f.Add("out\n", 0, "SIGKILL")
	f.Fuzz(func(t *testing.T, body string, code int, sig string) {
		got := ParseExitStatus(body)
		if !strings.HasPrefix(body, got.Body) {
			t.Fatalf("body %q is not a prefix of %q", got.Body, body)
		}
		if got.Signal != "" && got.ExitCode != 0 {
			t.Fatalf("both a signal and an exit code: %+v", got)
		}
		// Whatever a renderer appends to any body comes back out.
		// (With no marker appended a body that itself ends in a marker is
		// read as one: the renderer, not the parser, prevents that.)
		if code < 0 || strings.ContainsAny(sig, "]\n") || ExitMarker(code, sig) == "" {
			return
		}
		got = ParseExitStatus(body + ExitMarker(code, sig))
		if got.Body != body || got.ExitCode != code && sig == "" || got.Signal != sig {
			t.Fatalf("round trip of %q code=%d sig=%q: %+v", body, code, sig, got)
		}
	})
}
