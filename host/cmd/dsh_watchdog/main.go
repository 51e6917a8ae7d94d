// Command dsh_watchdog is the host's watchdog (host/watchdog): the dsh
// host starts it from the dsh binary's folder, as
// `dsh_watchdog __watchdog CGROUP-DIR`, with the read end of a pipe as
// stdin; when the host dies the pipe closes and it kills the host's
// cgroup. It is not meant to be run by hand.
package main

import (
	"os"

	"github.com/dshrun/dsh/host/watchdog"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != watchdog.Arg {
		os.Stderr.WriteString("usage: " + watchdog.Binary + " " + watchdog.Arg + " CGROUP-DIR (started by the dsh host)\n")
		os.Exit(2)
	}
	if err := watchdog.Run(os.Args[2]); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
