package procs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// inFlight is what the master has to read (TIOCINQ on it) plus what the
// slave's programs have not read of their input (TIOCINQ on the slave,
// opened for the look without becoming anyone's controlling terminal).
func inFlight(master *os.File, slave string) (int, error) {
	var out int
	if err := control(master, func(fd int) (err error) {
		out, err = unix.IoctlGetInt(fd, unix.TIOCINQ)
		return err
	}); err != nil {
		return 0, fmt.Errorf("terminal output not yet read: %w", err)
	}
	fd, err := unix.Open(slave, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("terminal input not yet read: %w", err)
	}
	defer unix.Close(fd)
	in, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
	if err != nil {
		return 0, fmt.Errorf("terminal input not yet read: %w", err)
	}
	return out + in, nil
}
