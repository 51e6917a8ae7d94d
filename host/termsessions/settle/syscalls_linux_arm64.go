package settle

// syscalls are the arm64 (generic table) system calls a wait on the
// terminal can be in, and a few others, named in details. arm64 has no
// select, poll or epoll_wait: its C libraries use pselect6, ppoll and
// epoll_pwait.
var syscalls = map[int]syscallInfo{
	63:  {"read", readCall},
	67:  {"pread64", readCall},
	65:  {"readv", readCall},
	69:  {"preadv", readCall},
	286: {"preadv2", readCall},
	72:  {"pselect6", selectCall},
	73:  {"ppoll", pollCall},
	22:  {"epoll_pwait", epollCall},
	441: {"epoll_pwait2", epollCall},
	128: {"restart_syscall", restartCall},
	101: {"nanosleep", otherCall},
	115: {"clock_nanosleep", otherCall},
	260: {"wait4", otherCall},
	95:  {"waitid", otherCall},
	98:  {"futex", otherCall},
	133: {"rt_sigsuspend", otherCall},
	64:  {"write", otherCall},
	202: {"accept", otherCall},
	242: {"accept4", otherCall},
	207: {"recvfrom", otherCall},
	212: {"recvmsg", otherCall},
	426: {"io_uring_enter", otherCall},
}
