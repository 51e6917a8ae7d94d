// Command dsh-pwsh-local is the PowerShell executor: it provides ctx.shell
// by running each command as a fresh pwsh process through ctx.subprocess,
// the command given as -EncodedCommand (localexec.Pwsh). Its config is the
// shared `shell` settings and program, the PowerShell to run.
package main

import (
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/sdk"
)

func main() {
	sdk.Serve(&localexec.Plugin{
		Name:    "pwsh-local",
		Version: "0.1.0",
		Summary: "ctx.shell: fresh pwsh processes on this machine",
		Exec:    localexec.Pwsh(),
	})
}
