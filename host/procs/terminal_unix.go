//go:build unix

package procs

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ttyEnds is a new terminal: the master the host keeps (its output is
// read and its input written there: input is master) and the slave a
// command gets.
type ttyEnds struct{ master, input, slave *os.File }

// openTerminal opens a pseudo-terminal of the given size: the master the
// host keeps, pollable (so reads wait in the poller, not on a thread of
// their own, and Close ends them), and the slave a command gets.
func openTerminal(cols, rows int) (*ttyEnds, error) {
	master, slave, err := openPty(cols, rows)
	if err != nil {
		return nil, err
	}
	return &ttyEnds{master: master, input: master, slave: slave}, nil
}

func openPty(cols, rows int) (master, slave *os.File, err error) {
	m, s, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open a terminal: %w", err)
	}
	// pty.Open reached the master through Fd, which made it blocking:
	// its descriptor is duplicated (close-on-exec, so no other command
	// inherits it) and made non-blocking again.
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("open a terminal: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := setTerminalSize(master, cols, rows); err != nil {
		master.Close()
		s.Close()
		return nil, nil, fmt.Errorf("size a new terminal: %w", err)
	}
	return master, s, nil
}

// slaveName is the slave's path.
func (e *ttyEnds) slaveName() string { return e.slave.Name() }

// closeHost closes the host's end of a terminal whose command did not
// start.
func (e *ttyEnds) closeHost() { e.master.Close() }

// startOnTerminal starts cmd on the terminal's slave, its controlling
// terminal, from a locked thread as every command (startLocked).
func (p *Process) startOnTerminal(tty *ttyEnds, cmd *exec.Cmd) (func() error, error) {
	controllingTerminal(cmd.SysProcAttr)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty.slave, tty.slave, tty.slave
	waitFn, err := startLocked(cmd, p.spec.Confine, p.forkJoin())
	// The child has its copy; with ours gone the master reads its end
	// once the last holder in the tree lets go.
	tty.slave.Close()
	return waitFn, err
}

// controllingTerminal makes the terminal the command's controlling
// terminal: it is stdin (fd 0 in the child) of a new session's leader.
func controllingTerminal(attr *syscall.SysProcAttr) { attr.Setctty, attr.Ctty = true, 0 }

// control runs f on f's descriptor without taking it out of the poller.
func control(file *os.File, f func(fd int) error) error {
	rc, err := file.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// resizeTerminal sets the terminal's size on its master.
func (p *Process) resizeTerminal(master *os.File, cols, rows int) error {
	return setTerminalSize(master, cols, rows)
}

func setTerminalSize(master *os.File, cols, rows int) error {
	return control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
}

// foregroundGroup is tcgetpgrp of the terminal: the master answers for
// its slave.
func foregroundGroup(master *os.File) (int, error) {
	pgrp := 0
	err := control(master, func(fd int) error {
		var err error
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read the foreground process group: %w", err)
	}
	if pgrp <= 0 {
		return 0, fmt.Errorf("the terminal has no foreground process group (%d)", pgrp)
	}
	return pgrp, nil
}

// signalProcess signals pid (a process group when negative).
func (p *Process) signalProcess(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// terminalSignals are the signals a terminal's processes may be sent by
// name.
var terminalSignals = map[string]syscall.Signal{
	"SIGINT":   syscall.SIGINT,
	"SIGTERM":  syscall.SIGTERM,
	"SIGKILL":  syscall.SIGKILL,
	"SIGTSTP":  syscall.SIGTSTP,
	"SIGHUP":   syscall.SIGHUP,
	"SIGQUIT":  syscall.SIGQUIT,
	"SIGCONT":  syscall.SIGCONT,
	"SIGWINCH": syscall.SIGWINCH,
	"SIGUSR1":  syscall.SIGUSR1,
	"SIGUSR2":  syscall.SIGUSR2,
}
