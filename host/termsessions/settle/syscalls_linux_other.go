//go:build linux && !amd64 && !arm64

package settle

// syscalls is empty on the architectures whose numbers are not known
// here: every thread is then Running, its detail naming the number.
var syscalls = map[int]syscallInfo{}
