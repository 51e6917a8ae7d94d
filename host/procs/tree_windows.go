package procs

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a command's tree is a Job Object of its own, which the
// command is put in before it runs any code (it starts suspended), so
// every process it starts is in the job too, and the job ends them all at
// once (TerminateJobObject). The job kills its processes when its last
// handle is closed, and only the host holds one: a host that dies for any
// reason takes its commands along, the part the Linux watchdog plays. What
// is decided here (the limits, the creation flags, the stop steps, how an
// exit reads) is in winjob.go, tested on every system.

// The decisions use these values; the build fails if x/sys/windows says
// otherwise.
var (
	_ = [1]struct{}{}[jobLimitKillOnJobClose^windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE]
	_ = [1]struct{}{}[jobLimitDieOnUnhandledException^windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION]
	_ = [1]struct{}{}[createSuspended^windows.CREATE_SUSPENDED]
	_ = [1]struct{}{}[createNewProcessGroup^windows.CREATE_NEW_PROCESS_GROUP]
	_ = [1]struct{}{}[createUnicodeEnvironment^windows.CREATE_UNICODE_ENVIRONMENT]
	_ = [1]struct{}{}[extendedStartupInfoPresent^windows.EXTENDED_STARTUPINFO_PRESENT]
	_ = [1]struct{}{}[createNoWindow^windows.CREATE_NO_WINDOW]
	_ = [1]struct{}{}[unsafe.Sizeof(jobAccounting{})-48]
)

// trees is the Manager's side: whether the host has a console, which its
// commands then share (Ctrl-Break reaches only processes on the sender's
// console).
type trees struct {
	hostConsole bool
}

// procTree is a Process's side: its job, and a terminal's pseudo-console,
// which serves the tree (closing it is the tree's hangup and ends its
// output). treeMu keeps a stop from using a handle releaseTree closes.
type procTree struct {
	treeMu  sync.Mutex
	job     windows.Handle // 0 once released
	console windows.Handle // 0 when none, or once closed
	// terminal says the tree runs on a pseudo-console, closed or not.
	terminal bool
	// sent is the signal a polite stop stood for, and terminated says
	// the job was terminated: what the main process's exit code means.
	sent       syscall.Signal
	terminated bool
}

func (m *Manager) openTrees() {
	_, err := windows.GetConsoleCP()
	m.hostConsole = err == nil
	m.log.Debug("process trees are Job Objects", "host console", m.hostConsole)
}

// closeTrees has nothing to do: each job goes with its command
// (releaseTree), and Close has ended every command first.
func (m *Manager) closeTrees() {}

// Cgroups reports whether whole trees are tracked with cgroups: never here.
func (m *Manager) Cgroups() bool { return false }

// sysProcAttr makes the command's job, and has the command start suspended
// in a process group of its own (commandCreation).
func (p *Process) sysProcAttr() (*syscall.SysProcAttr, error) {
	job, err := newJob()
	if err != nil {
		return nil, fmt.Errorf("create the command's job object: %w", err)
	}
	p.job = job
	return &syscall.SysProcAttr{CreationFlags: commandCreation(p.m.hostConsole)}, nil
}

// newJob is a Job Object set to jobLimits. Its handle is not inheritable:
// a command holding it would keep its tree alive past the host.
func newJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, err
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = jobLimits
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return 0, err
	}
	return job, nil
}

// startTree starts cmd (suspended), puts it in its job and lets it run.
func (p *Process) startTree(cmd *exec.Cmd) (func() error, error) {
	wait, err := startLocked(cmd, p.spec.Confine, p.forkJoin())
	if err != nil {
		return nil, err
	}
	if err := adopt(p.job, uint32(cmd.Process.Pid)); err != nil {
		_ = cmd.Process.Kill()
		_ = wait()
		return nil, fmt.Errorf("put the command in its job object: %w", err)
	}
	return wait, nil
}

// adopt puts the suspended process pid in job, then resumes it. os/exec
// closes the main thread's handle CreateProcess gave it, so the thread is
// found in a Toolhelp32 thread snapshot (documented, unlike
// NtResumeProcess, which would need no thread). A process created
// suspended has that one thread until it runs. The pid is not reused
// meanwhile: os/exec holds the process's handle.
func adopt(job windows.Handle, pid uint32) error {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		return err
	}
	return resumeThreads(pid)
}

func resumeThreads(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("list its threads: %w", err)
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, oerr := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if oerr != nil {
			return fmt.Errorf("open its thread: %w", oerr)
		}
		_, rerr := windows.ResumeThread(th)
		_ = windows.CloseHandle(th)
		if rerr != nil {
			return fmt.Errorf("resume it: %w", rerr)
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return fmt.Errorf("list its threads: %w", err)
	}
	if resumed == 0 {
		return errors.New("its thread was not found")
	}
	return nil
}

// exitSignal reads how the main process ended (stoppedBy).
func (p *Process) exitSignal(ee *exec.ExitError) (syscall.Signal, bool) {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok {
		return 0, false
	}
	p.treeMu.Lock()
	sent, terminated := p.sent, p.terminated
	p.treeMu.Unlock()
	return stoppedBy(ws.ExitCode, sent, terminated)
}

// releaseTree closes the job (nothing is left in it by now) and a
// terminal's console if still open; stops afterwards do nothing.
func (p *Process) releaseTree() {
	p.treeMu.Lock()
	job, console := p.job, p.console
	p.job, p.console = 0, 0
	p.treeMu.Unlock()
	if job != 0 {
		_ = windows.CloseHandle(job)
	}
	if console != 0 {
		windows.ClosePseudoConsole(console)
	}
}

func (p *Process) treeSigkilled() {}

// signalTree does what sig stands for (stopSignal): the polite steps of
// the stop plan, or all of it.
func (p *Process) signalTree(sig syscall.Signal) {
	switch polite, kill := stopSignal(sig); {
	case kill:
		p.runStops(p.stopPlan(false), sig)
	case polite:
		p.runStops(beforeGrace(p.stopPlan(true)), sig)
	}
}

// killTree terminates the job and waits (2 s at most) until it is empty.
func (p *Process) killTree() { p.runStops(p.stopPlan(false), syscall.SIGKILL) }

func (p *Process) stopPlan(graceful bool) []stopStep {
	p.treeMu.Lock()
	terminal := p.terminal
	p.treeMu.Unlock()
	return stopPlan(graceful, terminal, p.m.hostConsole)
}

func (p *Process) runStops(steps []stopStep, sig syscall.Signal) {
	for _, s := range steps {
		switch s {
		case stepBreak:
			if p.finished() || p.Pid <= 0 {
				continue // a group id of 0 would be every process on the console, the host's too
			}
			p.noteSent(sig)
			if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(p.Pid)); err != nil {
				p.m.log.Debug("ctrl-break not sent; terminating the tree", "id", p.ID, "error", err)
				p.killTree()
				return
			}
		case stepCloseConsole:
			switch c := p.takeConsole(); {
			case c == 0:
			case sig == syscall.SIGKILL:
				windows.ClosePseudoConsole(c)
			default:
				p.noteSent(sig)
				// It returns once the console's server has gone, after
				// its programs: a polite stop does not wait for that.
				go windows.ClosePseudoConsole(c)
			}
		case stepTerminate:
			p.treeMu.Lock()
			if p.job != 0 {
				p.terminated = true
				_ = windows.TerminateJobObject(p.job, jobKilledExitCode)
			}
			p.treeMu.Unlock()
		case stepDrain:
			p.drain(2 * time.Second)
		}
	}
}

func (p *Process) noteSent(sig syscall.Signal) {
	p.treeMu.Lock()
	if p.sent == 0 && sig != syscall.SIGKILL {
		p.sent = sig
	}
	p.treeMu.Unlock()
}

// takeConsole is the terminal's console, now the caller's to close.
func (p *Process) takeConsole() windows.Handle {
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	c := p.console
	p.console = 0
	return c
}

// drain waits until the job has no active process, or limit has passed.
func (p *Process) drain(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		n, err := p.activeProcesses()
		if err != nil || n == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(delay)
	}
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which
// x/sys/windows has no type for.
type jobAccounting struct {
	TotalUserTime, TotalKernelTime                     int64
	ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime int64
	TotalPageFaultCount, TotalProcesses                uint32
	ActiveProcesses, TotalTerminatedProcesses          uint32
}

// activeProcesses counts the processes of the tree still running.
func (p *Process) activeProcesses() (uint32, error) {
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	if p.job == 0 {
		return 0, nil
	}
	var info jobAccounting
	err := windows.QueryInformationJobObject(p.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil)
	return info.ActiveProcesses, err
}

// signalName names the signals a stop on Windows stands for; Windows has
// no names of its own for them.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return ""
}
