package procs

import (
	"slices"
	"syscall"
	"testing"
)

// The Windows tree's decisions, tested on every system (tree_windows.go
// acts on them, and its build checks the constants against x/sys/windows).

func TestJobLimits(t *testing.T) {
	const (
		breakawayOK       = 0x00000800
		silentBreakawayOK = 0x00001000
	)
	if jobLimits&jobLimitKillOnJobClose == 0 {
		t.Error("a job must kill its processes when the host's handle closes: that is what ends them with the host")
	}
	if jobLimits&jobLimitDieOnUnhandledException == 0 {
		t.Error("a crashed process must end, not wait on an error dialog")
	}
	if jobLimits&(breakawayOK|silentBreakawayOK) != 0 {
		t.Errorf("limits %#x let a child leave its tree", jobLimits)
	}
	if jobLimits != 0x2400 {
		t.Errorf("limits = %#x, want KILL_ON_JOB_CLOSE|DIE_ON_UNHANDLED_EXCEPTION (0x2400)", jobLimits)
	}
}

func TestCreationFlags(t *testing.T) {
	for _, tc := range []struct {
		hostConsole bool
		want        uint32
	}{
		// Suspended until it is in its job; a group of its own for
		// Ctrl-Break; its own windowless console when the host has none.
		{true, 0x00000204},
		{false, 0x08000204},
	} {
		if got := commandCreation(tc.hostConsole); got != tc.want {
			t.Errorf("commandCreation(hostConsole=%v) = %#x, want %#x", tc.hostConsole, got, tc.want)
		}
	}
	if terminalCreation != 0x00080404 {
		t.Errorf("terminalCreation = %#x, want SUSPENDED|UNICODE_ENVIRONMENT|EXTENDED_STARTUPINFO_PRESENT", terminalCreation)
	}
	if terminalCreation&createNewProcessGroup != 0 {
		t.Error("a terminal's command in a group of its own would ignore the Ctrl-C typed to it")
	}
	if terminalCreation&createNoWindow != 0 {
		t.Error("a terminal's command must stay on its pseudo-console")
	}
}

func TestStopPlan(t *testing.T) {
	B, C, G, T, D := stepBreak, stepCloseConsole, stepGrace, stepTerminate, stepDrain
	for _, tc := range []struct {
		name                            string
		graceful, terminal, hostConsole bool
		plan, beforeGrace               []stopStep
	}{
		{"command, stop, console shared", true, false, true, []stopStep{B, G, T, D}, []stopStep{B}},
		// Ctrl-Break cannot reach a command on a console of its own: no
		// grace is waited for nothing.
		{"command, stop, no console", true, false, false, []stopStep{T, D}, []stopStep{T, D}},
		{"command, kill, console shared", false, false, true, []stopStep{T, D}, []stopStep{T, D}},
		{"command, kill, no console", false, false, false, []stopStep{T, D}, []stopStep{T, D}},
		// A terminal's hangup is its console's close, whatever the host's
		// console.
		{"terminal, stop", true, true, true, []stopStep{C, G, T, D}, []stopStep{C}},
		{"terminal, stop, no console", true, true, false, []stopStep{C, G, T, D}, []stopStep{C}},
		// Killed, its console is closed last so its output ends.
		{"terminal, kill", false, true, true, []stopStep{T, D, C}, []stopStep{T, D, C}},
		{"terminal, kill, no console", false, true, false, []stopStep{T, D, C}, []stopStep{T, D, C}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := stopPlan(tc.graceful, tc.terminal, tc.hostConsole)
			if !slices.Equal(plan, tc.plan) {
				t.Fatalf("plan = %v, want %v", plan, tc.plan)
			}
			if got := beforeGrace(plan); !slices.Equal(got, tc.beforeGrace) {
				t.Errorf("before the grace = %v, want %v", got, tc.beforeGrace)
			}
			// Whatever the plan, the tree ends terminated and drained:
			// nothing outlives a stop's grace.
			if i, j := slices.Index(plan, T), slices.Index(plan, D); i < 0 || j != i+1 {
				t.Errorf("plan %v does not end the job and wait for it", plan)
			}
			if g := slices.Index(plan, G); g >= 0 && g > slices.Index(plan, T) {
				t.Errorf("plan %v waits its grace after the kill", plan)
			}
		})
	}
	if s := stepBreak.String() + ", " + stepGrace.String() + ", " + stepTerminate.String(); s != "ctrl-break, grace, terminate job" {
		t.Errorf("steps read %q", s)
	}
}

func TestStopSignal(t *testing.T) {
	for _, tc := range []struct {
		sig          syscall.Signal
		polite, kill bool
	}{
		{syscall.SIGTERM, true, false},
		{syscall.SIGINT, true, false},
		{syscall.SIGHUP, true, false},
		{syscall.SIGQUIT, true, false},
		{syscall.SIGKILL, false, true},
		{syscall.Signal(0), false, false},
		{syscall.SIGSEGV, false, false},
		{syscall.Signal(64), false, false},
	} {
		polite, kill := stopSignal(tc.sig)
		if polite != tc.polite || kill != tc.kill {
			t.Errorf("stopSignal(%d) = polite %v, kill %v; want %v, %v", tc.sig, polite, kill, tc.polite, tc.kill)
		}
	}
}

func TestStoppedBy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code       uint32
		sent       syscall.Signal
		terminated bool
		sig        syscall.Signal
		killed     bool
	}{
		{"terminated: the job's code", jobKilledExitCode, 0, true, syscall.SIGKILL, true},
		{"terminated after a stop", jobKilledExitCode, syscall.SIGTERM, true, syscall.SIGKILL, true},
		{"broke, ended on it", statusControlCExit, syscall.SIGTERM, false, syscall.SIGTERM, true},
		{"broke, then terminated, ended on the break", statusControlCExit, syscall.SIGTERM, true, syscall.SIGTERM, true},
		{"console closed, ended on it", statusControlCExit, syscall.SIGHUP, false, syscall.SIGHUP, true},
		// An exit code is a number a program may choose: without what
		// the host did, it says nothing.
		{"137 of its own", jobKilledExitCode, 0, false, 0, false},
		{"a Ctrl-C the host did not send", statusControlCExit, 0, false, 0, false},
		{"handled the break, exited 1", 1, syscall.SIGTERM, false, 0, false},
		{"exited 0 as the job was terminated", 0, 0, true, 0, false},
		{"handled the break, exited 0", 0, syscall.SIGTERM, true, 0, false},
	} {
		sig, killed := stoppedBy(tc.code, tc.sent, tc.terminated)
		if sig != tc.sig || killed != tc.killed {
			t.Errorf("%s: stoppedBy(%#x, %d, %v) = %d, %v; want %d, %v", tc.name, tc.code, tc.sent, tc.terminated, sig, killed, tc.sig, tc.killed)
		}
	}
}
