// Command dsh-pwsh-sandbox is the confining PowerShell executor: it
// provides ctx.shell by running each command as a fresh pwsh process, like
// pwsh-local, confined through ctx.sandbox under the composition's policy
// (ctx.sandboxPolicy) as bash-sandbox confines bash: the same runners, the
// same sandbox facts, and nothing run where the sandbox cannot confine.
package main

import (
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/lib/sandboxexec"
	"github.com/dshrun/dsh/sdk"
)

func main() {
	sdk.Serve(sandboxexec.NewPlugin("pwsh-sandbox", "0.1.0",
		"ctx.shell: fresh pwsh processes, confined by the composition's sandbox policy",
		localexec.Pwsh()))
}
