package host

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/windows"
)

// fileOwner has no uid to give on Windows, where a directory's owner is a
// SID: the ownership check is skipped (the ACL of the user's temp folder
// keeps others out).
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

// processAlive reports whether pid runs: it can be opened (or exists but is
// another user's) and has no exit code yet.
func processAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return errors.Is(err, windows.ERROR_ACCESS_DENIED)
	}
	defer windows.CloseHandle(h)
	var code uint32
	return windows.GetExitCodeProcess(h, &code) == nil && code == stillActive
}

// stillActive is the exit code GetExitCodeProcess gives a running process
// (STILL_ACTIVE).
const stillActive = 259
