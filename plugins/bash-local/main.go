// Command dsh-bash-local is the default POSIX executor: it provides
// ctx.shell by running each command as a fresh `bash -c` process through
// ctx.subprocess.
package main

import (
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/sdk"
)

func main() {
	sdk.Serve(&localexec.Plugin{
		Name:    "bash-local",
		Version: "0.1.0",
		Summary: "ctx.shell: fresh bash -c processes on this machine",
		Exec:    localexec.Bash(),
	})
}
