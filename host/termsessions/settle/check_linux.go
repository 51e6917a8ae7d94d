package settle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Check is Options{}.Check.
func Check(master *os.File, shellPid int) (Result, error) {
	return Options{}.Check(master, shellPid)
}

// Check tells why the terminal whose PTY master is master is quiet.
// shellPid is the process the terminal was started with: its session is
// where StoppedJobs are looked for (0 takes the foreground group's).
// An error means the question could not be asked (master is not a PTY
// master, /proc is not there); evidence that is missing or not conclusive
// is a Running result whose Detail says why.
func (o Options) Check(master *os.File, shellPid int) (Result, error) {
	gap := o.Gap
	if gap <= 0 {
		gap = DefaultGap
	}
	t, err := openTerminal(master)
	if err != nil {
		return Result{}, err
	}
	res := Result{Pgrp: t.pgrp}
	if t.pgrp <= 0 {
		res.Canonical, res.Echo = modes(master)
		res.Detail = fmt.Sprintf("%s has no foreground process group", t.path)
		return res, nil
	}
	procs, err := listProcs()
	if err != nil {
		return Result{}, err
	}
	session := 0
	shellBusy := false
	var group []proc
	for _, p := range procs {
		if p.pid == shellPid {
			session, shellBusy = p.session, p.state == 'R'
		}
		if p.pgrp == t.pgrp {
			group = append(group, p)
		}
	}
	if session == 0 && len(group) > 0 {
		session = group[0].session
	}
	for _, p := range procs {
		if session != 0 && p.session == session && p.pgrp != t.pgrp && stoppedState(p.state) {
			res.StoppedJobs = append(res.StoppedJobs, Process{p.pid, p.comm})
		}
	}
	slices.SortFunc(res.StoppedJobs, func(a, b Process) int { return a.Pid - b.Pid })
	tasks := listTasks(group)
	for i := range tasks {
		tasks[i].first = look(tasks[i].tid)
	}
	time.Sleep(gap)
	for i := range tasks {
		tasks[i].second = look(tasks[i].tid)
	}
	// The modes after the looks, not before: a program sets them up
	// before it waits (readline turns canonical mode off, then selects).
	res.Canonical, res.Echo = modes(master)
	decide(&res, t, tasks, gap)
	if shellBusy && !res.Busy {
		// The shell runs outside the foreground: between the fork of a
		// job and its exec, the job waits for the shell (job control's
		// handshake), which a loaded machine may take long to schedule.
		res.Busy = true
		res.Detail += fmt.Sprintf("; the shell (pid %d) is running (state R)", shellPid)
	}
	return res, nil
}

// terminal is what identifies the PTY's slave side.
type terminal struct {
	pgrp           int
	path           string // /dev/pts/N
	dev, ino, rdev uint64 // the slave's inode, and its device number
}

// openTerminal asks the master for the foreground group and the slave's
// number and inode.
func openTerminal(master *os.File) (*terminal, error) {
	rc, err := master.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("waiting: PTY master: %w", err)
	}
	t := &terminal{}
	var ioErr error
	// Control, not Fd: Fd would put the master in blocking mode under the
	// reader that owns it.
	err = rc.Control(func(fd uintptr) {
		ptn, err := unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
		if err != nil {
			ioErr = fmt.Errorf("waiting: %s is not a PTY master (TIOCGPTN): %w", master.Name(), err)
			return
		}
		t.path = fmt.Sprintf("/dev/pts/%d", ptn)
		if t.pgrp, err = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err != nil {
			ioErr = fmt.Errorf("waiting: foreground process group of %s (TIOCGPGRP): %w", t.path, err)
			return
		}
		// The slave's own inode, whatever /dev/pts this process sees: a
		// descriptor of it, opened without becoming anyone's controlling
		// terminal.
		peer, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.TIOCGPTPEER, uintptr(unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK))
		if errno != 0 {
			ioErr = fmt.Errorf("waiting: open the slave of %s (TIOCGPTPEER): %w", t.path, errno)
			return
		}
		var st unix.Stat_t
		err = unix.Fstat(int(peer), &st)
		_ = unix.Close(int(peer))
		if err != nil {
			ioErr = fmt.Errorf("waiting: stat %s: %w", t.path, err)
			return
		}
		t.dev, t.ino, t.rdev = st.Dev, st.Ino, st.Rdev
	})
	if err != nil {
		return nil, fmt.Errorf("waiting: PTY master: %w", err)
	}
	return t, ioErr
}

// modes returns the terminal's canonical and echo modes. A PTY master
// answers TCGETS with its slave's modes.
func modes(master *os.File) (canonical, echo bool) {
	rc, err := master.SyscallConn()
	if err != nil {
		return false, false
	}
	_ = rc.Control(func(fd uintptr) {
		if tio, err := unix.IoctlGetTermios(int(fd), unix.TCGETS); err == nil {
			canonical, echo = tio.Lflag&unix.ICANON != 0, tio.Lflag&unix.ECHO != 0
		}
	})
	return canonical, echo
}

// proc is one process as /proc/PID/stat has it.
type proc struct {
	pid, pgrp, session int
	state              byte
	ttyNr              uint64
	comm               string
}

func stoppedState(s byte) bool { return s == 'T' || s == 't' }

// listProcs reads every process's stat.
func listProcs() ([]proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("waiting: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("waiting: list /proc: %w", err)
	}
	procs := make([]proc, 0, len(names))
	buf := make([]byte, 1024)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, err := readStat(pid, buf); err == nil {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// readProc reads a small /proc file into buf. It is os.ReadFile without
// what a scan of every process does not need (a stat, a non-blocking mode,
// a new buffer): the scan is most of a Check's cost.
func readProc(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// readStat parses /proc/ID/stat, for a process or a thread; buf holds it
// (its 52 fields fit in 1 KiB whatever the command's name).
func readStat(id int, buf []byte) (proc, error) {
	b, err := readProc("/proc/"+strconv.Itoa(id)+"/stat", buf)
	if err != nil {
		return proc{}, err
	}
	// comm is in parentheses and may hold anything, parentheses too: the
	// fields start after the last one.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return proc{}, fmt.Errorf("waiting: /proc/%d/stat: no command name", id)
	}
	// state ppid pgrp session tty_nr: the first five fields.
	var f [5][]byte
	rest := b[end+1:]
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		j := bytes.IndexByte(rest, ' ')
		if j < 0 {
			return proc{}, fmt.Errorf("waiting: /proc/%d/stat: too few fields", id)
		}
		f[i], rest = rest[:j], rest[j:]
	}
	if len(f[0]) != 1 {
		return proc{}, fmt.Errorf("waiting: /proc/%d/stat: state %q", id, f[0])
	}
	p := proc{pid: id, state: f[0][0], comm: string(b[open+1 : end])}
	p.pgrp, _ = strconv.Atoi(string(f[2]))
	p.session, _ = strconv.Atoi(string(f[3]))
	nr, _ := strconv.ParseInt(string(f[4]), 10, 64)
	p.ttyNr = uint64(uint32(nr))
	return p, nil
}

// task is one thread of a foreground process, looked at twice.
type task struct {
	proc
	tid           int
	first, second glance
}

// glance is one look at a thread: its state, its system call, and how
// much it has run.
type glance struct {
	state   byte
	syscall string // /proc/TID/syscall, or "" when it could not be read
	// schedstat is /proc/TID/schedstat (time on a CPU, time waiting for
	// one, times run), "" without it: any change means the thread ran.
	schedstat string
	err       error
}

// listTasks returns the threads of the processes.
func listTasks(procs []proc) []task {
	var tasks []task
	for _, p := range procs {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.pid))
		if err != nil {
			continue // gone
		}
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				tasks = append(tasks, task{proc: p, tid: tid})
			}
		}
	}
	return tasks
}

func look(tid int) glance {
	g := glance{}
	if st, err := readStat(tid, make([]byte, 1024)); err == nil {
		g.state = st.state
	} else {
		g.err = err
		return g
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		g.err = err
		return g
	}
	g.syscall = strings.TrimSpace(string(b))
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/schedstat"); err == nil {
		g.schedstat = string(b)
	}
	return g
}

// what a thread was found doing
type activity int

const (
	gone activity = iota
	stopped
	running
	elsewhere   // blocked, not on the terminal
	readingTerm // blocked reading the terminal
)

// verdict is one thread's activity and how it was told.
type verdict struct {
	activity
	why string
	// others are the descriptors a wait on the terminal watches besides.
	others []string
}

// decide sets res from the threads' looks.
func decide(res *Result, t *terminal, tasks []task, gap time.Duration) {
	var best [readingTerm + 1]*task
	var verdicts [readingTerm + 1]verdict
	for i := range tasks {
		tk := &tasks[i]
		v := judge(t, tk, gap)
		// Keep the newest process of each kind: in a pipeline or a
		// command a shell started, that is the one the user asked for.
		if b := best[v.activity]; b == nil || tk.pid > b.pid {
			best[v.activity], verdicts[v.activity] = tk, v
		}
	}
	pick := func(a activity, r Reason) bool {
		tk := best[a]
		if tk == nil {
			return false
		}
		res.Reason, res.Process = r, Process{tk.pid, tk.comm}
		res.Detail = who(tk) + ": " + verdicts[a].why
		res.Others = verdicts[a].others
		return true
	}
	res.Busy = best[running] != nil
	switch {
	case pick(stopped, Stopped):
	case pick(running, Running):
	case pick(readingTerm, StdinRead):
		if res.Canonical && !res.Echo {
			res.Detail += "; echo is off (a password prompt?)"
		}
	case pick(elsewhere, Running):
	case pick(gone, Running):
	default:
		res.Detail = fmt.Sprintf("no live process in the foreground group %d", res.Pgrp)
	}
}

func who(tk *task) string {
	if tk.tid != tk.pid {
		return fmt.Sprintf("pid %d %s (thread %d)", tk.pid, tk.comm, tk.tid)
	}
	return fmt.Sprintf("pid %d %s", tk.pid, tk.comm)
}

// judge tells what one thread does from its two looks.
func judge(t *terminal, tk *task, gap time.Duration) verdict {
	a, b := tk.first, tk.second
	for _, g := range []glance{a, b} {
		switch {
		case g.err != nil && (errors.Is(g.err, os.ErrNotExist) || errors.Is(g.err, unix.ESRCH)):
			return verdict{activity: gone, why: "exited"}
		case g.state == 'Z' || g.state == 'X':
			return verdict{activity: gone, why: "exited (a zombie)"}
		case stoppedState(g.state):
			return verdict{activity: stopped, why: fmt.Sprintf("stopped (state %c)", g.state)}
		}
	}
	for _, g := range []glance{a, b} {
		switch {
		case g.state == 'R':
			return verdict{activity: running, why: "running (state R)"}
		case g.err != nil:
			return verdict{activity: elsewhere, why: fmt.Sprintf("not conclusive: %v (reading a thread's system call needs ptrace rights over it)", g.err)}
		case g.syscall == "running":
			return verdict{activity: running, why: "running (its system call reads \"running\")"}
		}
	}
	if a.syscall != b.syscall {
		before, after := callName(a.syscall), callName(b.syscall)
		if before == after {
			return verdict{activity: elsewhere, why: fmt.Sprintf("woke between two looks %v apart (in %s again, with other arguments)", gap, after)}
		}
		return verdict{activity: elsewhere, why: fmt.Sprintf("woke between two looks %v apart (%s, then %s)", gap, before, after)}
	}
	if a.schedstat != b.schedstat {
		// In the same call both times, but it ran in between: a loop
		// that polls with a short timeout, or one fed as it reads.
		return verdict{activity: elsewhere, why: fmt.Sprintf("ran between two looks %v apart, in %s both times", gap, callName(b.syscall))}
	}
	nr, args, ok := parseSyscall(b.syscall)
	if !ok {
		return verdict{activity: elsewhere, why: fmt.Sprintf("blocked outside a system call (state %c, %q)", b.state, b.syscall)}
	}
	sc, known := syscalls[nr]
	if !known {
		return verdict{activity: elsewhere, why: fmt.Sprintf("in system call %d", nr)}
	}
	switch sc.kind {
	case restartCall:
		// The kernel resumes a sleep, or a poll or select, that a stop or
		// a signal interrupted; which one it was is not in /proc.
		return verdict{activity: elsewhere, why: "in restart_syscall (a call resumed after a signal or a stop: which one is not known)"}
	case readCall:
		fd := int(int32(args[0]))
		on, name, err := t.isTerminal(tk, fd)
		switch {
		case err != nil:
			return verdict{activity: elsewhere, why: fmt.Sprintf("%s on fd %d, not conclusive: %v", sc.name, fd, err)}
		case on:
			return verdict{activity: readingTerm, why: fmt.Sprintf("%s on fd %d (%s)", sc.name, fd, name)}
		}
		return verdict{activity: elsewhere, why: fmt.Sprintf("%s on fd %d (%s), not the terminal", sc.name, fd, name)}
	case selectCall:
		return t.judgeSelect(tk, sc.name, args)
	case pollCall:
		return t.judgePoll(tk, sc.name, args)
	case epollCall:
		return t.judgeEpoll(tk, sc.name, int(int32(args[0])))
	}
	return verdict{activity: elsewhere, why: "in " + sc.name}
}

// callName names the system call of a /proc/TID/syscall line.
func callName(line string) string {
	nr, _, ok := parseSyscall(line)
	if !ok {
		return strconv.Quote(line)
	}
	if sc, known := syscalls[nr]; known {
		return sc.name
	}
	return fmt.Sprintf("system call %d", nr)
}

// parseSyscall reads "NR ARG1 … ARG6 SP PC" (the arguments in hex).
func parseSyscall(line string) (nr int, args [6]uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 7 {
		return 0, args, false
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil || nr < 0 {
		return 0, args, false
	}
	for i := range args {
		v, err := strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64)
		if err != nil {
			return 0, args, false
		}
		args[i] = v
	}
	return nr, args, true
}

// The controlling terminal's own device, /dev/tty, is char 5:0.
var devTTY = unix.Mkdev(5, 0)

// isTerminal reports whether a thread's descriptor is this terminal: its
// slave, by inode, or /dev/tty while the terminal is the process's
// controlling one. name is what the descriptor links to.
func (t *terminal) isTerminal(tk *task, fd int) (bool, string, error) {
	path := fmt.Sprintf("/proc/%d/fd/%d", tk.tid, fd)
	name, err := os.Readlink(path)
	if err != nil {
		return false, "", fmt.Errorf("resolve the descriptor: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false, name, fmt.Errorf("stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return false, name, nil
	}
	if st.Dev == t.dev && st.Ino == t.ino {
		return true, name, nil
	}
	if st.Rdev == devTTY && ttyDevice(tk.ttyNr) == t.rdev {
		return true, name + ", the controlling terminal " + t.path, nil
	}
	return false, name, nil
}

// ttyDevice decodes stat's tty_nr (the kernel's 32-bit encoding) as a
// device number of unix.Mkdev's kind.
func ttyDevice(nr uint64) uint64 {
	return unix.Mkdev(uint32(nr>>8)&0xfff, uint32(nr&0xff)|uint32(nr>>12)&0xfff00)
}

// waitSet is what a select, poll or epoll wait watches for reading: the
// terminal's descriptor if it is among them, and the others.
type waitSet struct {
	term   int // -1 when the terminal is not watched
	others []int
}

func (w *waitSet) add(t *terminal, tk *task, fd int) {
	if w.term < 0 {
		if on, _, err := t.isTerminal(tk, fd); err == nil && on {
			w.term = fd
			return
		}
	}
	w.others = append(w.others, fd)
}

// verdict says what the wait is: on the terminal (naming the other
// descriptors, which a program that relays a remote session also
// watches), or elsewhere.
func (w *waitSet) verdict(tk *task, onTerm, notOnTerm string) verdict {
	slices.Sort(w.others)
	if w.term < 0 {
		return verdict{activity: elsewhere, why: fmt.Sprintf("%s %v, none the terminal", notOnTerm, w.others)}
	}
	v := verdict{activity: readingTerm, why: fmt.Sprintf(onTerm, w.term)}
	for _, fd := range w.others {
		name, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", tk.tid, fd))
		if err != nil {
			name = "?"
		}
		v.others = append(v.others, fmt.Sprintf("fd %d (%s)", fd, name))
	}
	if n := len(v.others); n > 0 {
		shown := v.others[:min(n, 4)]
		noun := "descriptors"
		if n == 1 {
			noun = "descriptor"
		}
		v.why += fmt.Sprintf("; it also waits on %d other %s: %s", n, noun, strings.Join(shown, ", "))
		if n > len(shown) {
			v.why += ", …"
		}
	}
	return v
}

// maxFds bounds the descriptor sets read from a process's memory.
const maxFds = 1 << 16

// judgeSelect reads select's read set from the thread's memory: the call
// copied it into the kernel and leaves the user's copy alone until it
// returns. args: nfds, readfds, writefds, exceptfds, timeout.
func (t *terminal) judgeSelect(tk *task, name string, args [6]uint64) verdict {
	nfds, readfds := int(int32(args[0])), args[1]
	if readfds == 0 || nfds <= 0 {
		return verdict{activity: elsewhere, why: name + " without a read set"}
	}
	nfds = min(nfds, maxFds)
	set, err := readMem(tk.tid, readfds, (nfds+63)/64*8)
	if err != nil {
		return verdict{activity: elsewhere, why: fmt.Sprintf("%s, read set not conclusive: %v", name, err)}
	}
	w := waitSet{term: -1}
	for fd := range nfds {
		if set[fd/8]&(1<<(fd%8)) != 0 {
			w.add(t, tk, fd)
		}
	}
	return w.verdict(tk, name+" with the terminal (fd %d) in its read set", name+" on fds")
}

// judgePoll reads poll's array of struct pollfd {int fd; short events;
// short revents}. args: fds, nfds, timeout.
func (t *terminal) judgePoll(tk *task, name string, args [6]uint64) verdict {
	ptr, n := args[0], int(min(args[1], maxFds))
	if ptr == 0 || n == 0 {
		return verdict{activity: elsewhere, why: name + " on no descriptors"}
	}
	b, err := readMem(tk.tid, ptr, n*8)
	if err != nil {
		return verdict{activity: elsewhere, why: fmt.Sprintf("%s, descriptors not conclusive: %v", name, err)}
	}
	const readable = 0x1 | 0x2 | 0x40 // POLLIN, POLLPRI, POLLRDNORM
	w := waitSet{term: -1}
	for i := range n {
		fd := int(int32(binary.NativeEndian.Uint32(b[i*8:])))
		events := binary.NativeEndian.Uint16(b[i*8+4:])
		if fd >= 0 && events&readable != 0 {
			w.add(t, tk, fd)
		}
	}
	return w.verdict(tk, name+" with the terminal (fd %d) among its descriptors", name+" reading fds")
}

// judgeEpoll reads what the epoll instance watches from its fdinfo: one
// "tfd: FD events: HEX data: HEX pos:N ino:HEX sdev:HEX" line per file.
func (t *terminal) judgeEpoll(tk *task, name string, epfd int) verdict {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", tk.tid, epfd))
	if err != nil {
		return verdict{activity: elsewhere, why: fmt.Sprintf("%s on fd %d, not conclusive: %v", name, epfd, err)}
	}
	const readable = unix.EPOLLIN | unix.EPOLLPRI | unix.EPOLLRDNORM
	w := waitSet{term: -1}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(f[1])
		events, err2 := strconv.ParseUint(f[3], 16, 32)
		if err1 != nil || err2 != nil || events&readable == 0 {
			continue
		}
		if w.term < 0 && !sameInode(tk.tid, fd, f) {
			// The number was closed and reused: not what epoll watches.
			continue
		}
		w.add(t, tk, fd)
	}
	return w.verdict(tk, fmt.Sprintf("%s on fd %d, which watches the terminal (fd %%d)", name, epfd), fmt.Sprintf("%s on fd %d, watching fds", name, epfd))
}

// sameInode checks the descriptor still holds the file epoll registered
// (its number could have been closed and reused since).
func sameInode(tid, fd int, fields []string) bool {
	for _, f := range fields {
		if hex, ok := strings.CutPrefix(f, "ino:"); ok {
			ino, err := strconv.ParseUint(hex, 16, 64)
			var st unix.Stat_t
			if err != nil || unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", tid, fd), &st) != nil {
				return false
			}
			return st.Ino == ino
		}
	}
	return true // an older kernel without the field
}

// readMem reads n bytes at addr of a thread's memory; it takes ptrace
// rights over the process, as /proc/TID/syscall does.
func readMem(tid int, addr uint64, n int) ([]byte, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", tid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if addr > 1<<63-1 {
		return nil, fmt.Errorf("address %#x out of range", addr)
	}
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		return nil, fmt.Errorf("read %d bytes at %#x: %w", n, addr, err)
	}
	return b, nil
}
