package procs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// discardInput flushes the terminal's input queue (tcflush TCIFLUSH on
// the slave, opened for it without becoming anyone's controlling
// terminal): what was typed and not read yet, as the line discipline
// drops it when an interrupt key signals, unless the terminal's modes say
// not to (NOFLSH). The master's own queue is the programs' output, so the
// flush is the slave's.
func discardInput(slave string) error {
	fd, err := unix.Open(slave, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("discard the terminal's unread input: %w", err)
	}
	defer unix.Close(fd)
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("discard the terminal's unread input: %w", err)
	}
	if tio.Lflag&unix.NOFLSH != 0 {
		return nil
	}
	if err := unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH); err != nil {
		return fmt.Errorf("discard the terminal's unread input: %w", err)
	}
	return nil
}
