package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/dshrun/dsh/plugins/lib/localexec"
	"github.com/dshrun/dsh/plugins/lib/pwshargs"
	"github.com/dshrun/dsh/plugins/shell"
)

// pwshRun: `$null` through the pwsh-local executor plugin (Exec) against
// a direct spawn from Go of the command line it runs (the same script as
// -EncodedCommand), interleaved one for one: what dsh adds to a pwsh,
// whose own start is most of either. Where pwsh is not installed the row
// says so.
func pwshRun(dir string, n int) {
	fmt.Println("foreground run of `$null` in PowerShell (pwsh-local)")
	if _, err := exec.LookPath("pwsh"); err != nil {
		fmt.Printf("  skipped: pwsh is not installed (%s)\n\n", localexec.PwshInstall)
		return
	}
	ctx := context.Background()
	h, sh := startExecutor(ctx, dir, "pwsh-local")
	defer h.Close(ctx)
	argv := pwshargs.Argv("pwsh", pwshargs.Script("$null"))
	var exec1, direct []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		check(exec.Command(argv[0], argv[1:]...).Run())
		direct = append(direct, time.Since(t))

		t = time.Now()
		res, err := sh.Exec(ctx, &shell.ExecRequest{Command: "$null"})
		check(err)
		exec1 = append(exec1, time.Since(t))
		if res.ExitCode == nil || *res.ExitCode != 0 {
			fail(fmt.Sprintf("$null did not exit 0: %s", res.Stderr.GetData()))
		}
	}
	row("pwsh-local Exec", exec1)
	row("direct pwsh -EncodedCommand", direct)
	fmt.Printf("  pwsh-local over direct (median): %+.2f ms, %.2fx\n\n",
		float64(median(exec1)-median(direct))/float64(time.Millisecond), float64(median(exec1))/float64(median(direct)))
}
