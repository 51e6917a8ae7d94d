// Command dsh-bash-sandbox is the confining POSIX executor: it provides
// ctx.shell by running each command as a fresh `bash -c` process, like
// bash-local, confined through ctx.sandbox under the composition's policy
// (ctx.sandboxPolicy), starting in the policy's workspace unless its config
// names a cwd. Its results carry the sandbox facts: the mode, the
// runner, and the denials its errors show.
package main

import (
	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/lib/sandboxexec"
	"github.com/dshrun/dsh/sdk"
)

func main() {
	sdk.Serve(sandboxexec.NewPlugin("bash-sandbox", "0.1.0",
		"ctx.shell: fresh bash -c processes, confined by the composition's sandbox policy",
		localexec.Bash()))
}
