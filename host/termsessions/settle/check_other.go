//go:build !linux

package settle

import (
	"errors"
	"os"
	"runtime"
)

var errNotLinux = errors.New("waiting: telling why a terminal is quiet needs Linux (/proc), not " + runtime.GOOS)

// Check is Options{}.Check.
func Check(master *os.File, shellPid int) (Result, error) {
	return Options{}.Check(master, shellPid)
}

// Check returns an error: it reads Linux's /proc.
func (o Options) Check(master *os.File, shellPid int) (Result, error) {
	return Result{}, errNotLinux
}
