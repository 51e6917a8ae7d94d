package settle

// callKind is how a system call is checked for a wait on the terminal.
type callKind int

const (
	otherCall   callKind = iota
	readCall             // the descriptor is the first argument
	selectCall           // nfds, readfds, writefds, exceptfds, …
	pollCall             // struct pollfd *fds, nfds, …
	epollCall            // the epoll descriptor is the first argument
	restartCall          // restart_syscall: resumes an interrupted call
)

type syscallInfo struct {
	name string
	kind callKind
}
