// Package settle tells why a terminal is quiet: whether the program in its
// foreground waits to read the terminal, is stopped, or is doing something
// else (computing, sleeping, waiting on a pipe or a child).
//
// It answers from evidence, never from silence: the foreground process
// group of the PTY, and for each of its threads the system call it is
// blocked in (from /proc) and what that call waits on: a read of a
// descriptor that is the terminal, a select or poll whose read set holds
// the terminal, an epoll instance watching it. Whatever is not conclusive
// is Running, with a detail that says why. The caller (the terminal
// registry) combines the answer with how long the output has been quiet.
//
// It works on Linux only; elsewhere Check returns an error that says so.
package settle

import (
	"fmt"
	"time"
)

// Reason is what the terminal's foreground is doing.
type Reason int

const (
	// Running: the foreground is not waiting for the terminal (busy,
	// sleeping, waiting on something else), or the evidence does not show
	// that it is.
	Running Reason = iota
	// StdinRead: a thread of the foreground process group is blocked
	// reading the terminal, and none of the group runs or is stopped.
	StdinRead
	// Stopped: a process of the foreground group is stopped (a signal
	// such as SIGSTOP or SIGTTIN, or a tracer), so nothing there moves
	// until it is continued.
	Stopped
)

func (r Reason) String() string {
	switch r {
	case Running:
		return "running"
	case StdinRead:
		return "stdin_read"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Process names one process.
type Process struct {
	Pid     int
	Command string // its comm, as /proc/PID/comm has it
}

func (p Process) String() string { return fmt.Sprintf("pid %d %s", p.Pid, p.Command) }

// Result is what Check found.
type Result struct {
	Reason Reason
	// Detail says which process and how it was told, e.g.
	// "pid 123 cat: read on fd 0 (/dev/pts/4)", or why the evidence was
	// not conclusive.
	Detail string
	// Process is the one Detail is about; zero when there is none.
	Process Process
	// Others are the descriptors a StdinRead's wait watches besides the
	// terminal, as "fd N (what it links to)". A program that relays a
	// remote session (ssh, docker attach, a tmux client) waits on the
	// terminal and a socket at once, whether the far side is idle or busy.
	Others []string
	// Busy: a thread of the foreground group was seen running or waiting
	// for a CPU (state R), or the shell was, whatever the Reason. A
	// program that computes prints nothing for as long as it likes (an
	// interpreter loading its modules on a loaded machine, before its
	// prompt), and a job the shell is still starting waits on the shell,
	// so their silence says nothing of them being idle.
	Busy bool
	// Pgrp is the terminal's foreground process group.
	Pgrp int
	// Canonical and Echo are the terminal's line discipline modes: a
	// canonical read with echo off is most likely a password prompt.
	Canonical, Echo bool
	// StoppedJobs are stopped processes of the shell's session outside the
	// foreground group: a job control shell takes the terminal back from a
	// job that stops (cat & reading the terminal gets SIGTTIN), so the
	// foreground is the shell's prompt while these wait to be continued.
	StoppedJobs []Process
}

// DefaultGap is the time between the two looks at each thread.
const DefaultGap = 5 * time.Millisecond

// Options tune a Check.
type Options struct {
	// Gap is the time between the two looks at each thread (DefaultGap
	// when zero): a thread counts as blocked in a call only if it is
	// found in it both times, so one caught passing through a read that
	// returns at once does not count.
	Gap time.Duration
}
