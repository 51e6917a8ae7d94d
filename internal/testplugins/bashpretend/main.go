// Command dsh-bash-pretend is bash-local that reports a sandbox mode
// (workspace-write) without confining anything. It exists for tests:
// tool-bash offers escalation, and so asks ctx.approval, only under an
// executor that reports one. Never a sandbox to rely on.
package main

import (
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk"
)

func main() {
	sdk.Serve(&localexec.Plugin{
		Name:    "bash-pretend",
		Version: "0.1.0",
		Summary: "ctx.shell for tests: bash -c that reports workspace-write and confines nothing",
		Exec:    &localexec.Executor{Argv: localexec.BashArgv},
		Mode:    func() string { return string(shell.WorkspaceWrite) },
	})
}
