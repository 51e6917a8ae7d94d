package procs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// A terminal on Windows is a pseudo-console (ConPTY): the host writes its
// input to one pipe and reads its output, already rendered as a terminal's
// escape sequences, from another; the console's server (a conhost the
// system starts) holds the other ends. Its command is created on the
// console by CreateProcess itself, since os/exec cannot pass the
// pseudo-console attribute, and put in its Job Object as every command.
//
// What differs from a Unix terminal: the pipes block (a write waits for
// the console to take it, which it does at once, and a caller's deadline
// does not cut it short), a console has no foreground process group
// (Foreground fails, and Interrupt with it: Ctrl-C is typed, as "\x03"),
// and only SIGKILL can be sent by name, to the main process.

// ttyEnds is a new terminal: its output (master) and input pipes, and the
// pseudo-console, the tree's from the start on (procTree).
type ttyEnds struct {
	master, input *os.File
	console       windows.Handle
}

// conptyProc is how to tell whether this Windows has pseudo-consoles
// (Windows 10 1809 on): x/sys/windows would panic calling one it lacks.
var conptyProc = windows.NewLazySystemDLL("kernel32.dll").NewProc("CreatePseudoConsole")

func openTerminal(cols, rows int) (*ttyEnds, error) {
	if err := conptyProc.Find(); err != nil {
		return nil, fmt.Errorf("terminals need pseudo-consoles (Windows 10 1809 or later): %w", errors.ErrUnsupported)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("open a terminal: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("open a terminal: %w", err)
	}
	var console windows.Handle
	err = windows.CreatePseudoConsole(windows.Coord{X: int16(cols), Y: int16(rows)},
		windows.Handle(inR.Fd()), windows.Handle(outW.Fd()), 0, &console)
	// The console's server has its own copies of its ends: with ours
	// gone, the output ends when the console is closed.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("open a pseudo-console: %w", err)
	}
	return &ttyEnds{master: outR, input: inW, console: console}, nil
}

// slaveName is "": a pseudo-console has no device a path names.
func (e *ttyEnds) slaveName() string { return "" }

// closeHost closes the host's ends of a terminal whose command did not
// start (the console goes with the tree: releaseTree).
func (e *ttyEnds) closeHost() {
	e.master.Close()
	e.input.Close()
}

// startOnTerminal creates cmd's process on the pseudo-console, suspended,
// puts it in its job and resumes it. The console is the tree's from here
// on: killTree closes it, releaseTree at the latest.
func (p *Process) startOnTerminal(tty *ttyEnds, cmd *exec.Cmd) (func() error, error) {
	p.treeMu.Lock()
	p.console, p.terminal = tty.console, true
	p.treeMu.Unlock()
	if p.spec.Confine != nil {
		return nil, &confineError{errors.New("confining a command is not supported on this system")}
	}
	proc, err := createOnConsole(cmd, tty.console, p.job)
	if err != nil {
		return nil, err
	}
	cmd.Process = proc
	return func() error {
		ps, err := proc.Wait()
		if err != nil {
			return err
		}
		cmd.ProcessState = ps
		if !ps.Success() {
			return &exec.ExitError{ProcessState: ps}
		}
		return nil
	}, nil
}

// createOnConsole is CreateProcess for cmd on console, in job.
func createOnConsole(cmd *exec.Cmd, console, job windows.Handle) (*os.Process, error) {
	path := cmd.Path
	if !filepath.IsAbs(path) && cmd.Dir != "" {
		path = filepath.Join(cmd.Dir, path) // as os/exec takes it: relative to Dir
	}
	app, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	line, err := windows.UTF16PtrFromString(windows.ComposeCommandLine(cmd.Args))
	if err != nil {
		return nil, err
	}
	var dir *uint16
	if cmd.Dir != "" {
		if dir, err = windows.UTF16PtrFromString(cmd.Dir); err != nil {
			return nil, err
		}
	}
	env, err := envBlock(cmd.Env, os.Getenv("SYSTEMROOT"))
	if err != nil {
		return nil, err
	}
	attrs, err := windows.NewProcThreadAttributeList(1)
	if err != nil {
		return nil, err
	}
	defer attrs.Delete()
	// The attribute's value is the console handle itself, not a pointer
	// to it.
	if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE,
		*(*unsafe.Pointer)(unsafe.Pointer(&console)), unsafe.Sizeof(console)); err != nil {
		return nil, err
	}
	si := &windows.StartupInfoEx{ProcThreadAttributeList: attrs.List()}
	si.Cb = uint32(unsafe.Sizeof(*si))
	// Standard handles named and empty: the command gets the console's.
	// Without the flag, a host whose own standard handles are pipes (as
	// an MCP server's are) would pass those on instead.
	si.Flags = windows.STARTF_USESTDHANDLES
	var pi windows.ProcessInformation
	if err := windows.CreateProcess(app, line, nil, nil, false, terminalCreation, &env[0], dir, &si.StartupInfo, &pi); err != nil {
		return nil, err
	}
	defer windows.CloseHandle(pi.Thread)
	defer windows.CloseHandle(pi.Process) // after FindProcess has its own: the pid stays the command's
	fail := func(err error) (*os.Process, error) {
		_ = windows.TerminateProcess(pi.Process, jobKilledExitCode)
		return nil, err
	}
	if err := windows.AssignProcessToJobObject(job, pi.Process); err != nil {
		return fail(fmt.Errorf("put the command in its job object: %w", err))
	}
	proc, err := os.FindProcess(int(pi.ProcessId))
	if err != nil {
		return fail(err)
	}
	if _, err := windows.ResumeThread(pi.Thread); err != nil {
		proc.Release()
		return fail(fmt.Errorf("resume the command: %w", err))
	}
	return proc, nil
}

// resizeTerminal resizes the pseudo-console; a closed one has gone with
// its tree.
func (p *Process) resizeTerminal(_ *os.File, cols, rows int) error {
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	if p.console == 0 {
		return os.ErrClosed
	}
	return windows.ResizePseudoConsole(p.console, windows.Coord{X: int16(cols), Y: int16(rows)})
}

var errNoForeground = fmt.Errorf("a Windows console has no foreground process group: %w", errors.ErrUnsupported)

func foregroundGroup(*os.File) (int, error) { return 0, errNoForeground }

// signalProcess ends the tree's main process (pid) for SIGKILL, as the
// job's termination would; a group (pid < 0), another process and other
// signals have no Windows counterpart.
func (p *Process) signalProcess(pid int, sig syscall.Signal) error {
	if pid != p.Pid || pid <= 0 || sig != syscall.SIGKILL {
		return fmt.Errorf("%s to %d: %w", SignalName(sig), pid, errors.ErrUnsupported)
	}
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	p.treeMu.Lock()
	p.terminated = true // its exit code is the job's: it reads as SIGKILL
	p.treeMu.Unlock()
	return windows.TerminateProcess(h, jobKilledExitCode)
}

// terminalSignals are the signals a terminal's processes may be sent by
// name: Ctrl-C and the rest are typed.
var terminalSignals = map[string]syscall.Signal{
	"SIGKILL": syscall.SIGKILL,
}
