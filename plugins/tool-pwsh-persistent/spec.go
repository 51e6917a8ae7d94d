package main

import (
	"fmt"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/lib/persistentshell"
	"github.com/dshrun/dsh/sdk/modeltext"
)

// toolSpec is the tool: the persistent tools' schema, for PowerShell.
func toolSpec(cfg config) *toolsv1.ToolSpec {
	return persistentshell.ToolSpec(persistentshell.Config(cfg), "Run a command in a persistent PowerShell session", "The PowerShell command to run.", description(cfg))
}

func description(cfg config) string {
	return fmt.Sprintf(`Run a PowerShell command in your persistent PowerShell 7 session and return its output.

- The session lives on between calls: the location (Set-Location, cd), $env: variables, variables, functions, aliases, modules and background jobs (Start-Job) carry over. Commands run one at a time.
- It runs on a terminal: output, errors and native programs' output come together, in order, as plain text. A command that waits for input (Read-Host, a program reading the console) gets none from this tool: the call returns what it printed so far (or, when its wait is not seen, runs to its timeout), and the next command interrupts it first (Ctrl-C). Give commands their input (parameters, a pipe) instead; interactive programs belong in a terminal (terminal_open).
- A command is stopped after `+"`timeoutMs`"+` (default %d ms, at most %d ms): the session is then closed with everything it ran, and the next command starts in a fresh one (as after `+"`exit`"+`).
- You see at most %s characters: the last lines. `+"`[output truncated: … omitted …]`"+` says what was left out; colours and other terminal codes are removed.
- How it ended is the last line: nothing when its last statement succeeded, else `+"`[exit code: N]`"+` (N is $LASTEXITCODE when a native program or a script's `+"`exit N`"+` set it, else 1: a failed cmdlet, a terminating error), or a bracketed line saying why there is no end yet.
- A command that runs in a fresh session says so on its first line.
- The session is one of your terminals (terminal_list shows it, named %s).`,
		cfg.DefaultTimeoutMs, cfg.MaxTimeoutMs, modeltext.Thousands(int64(cfg.MaxOutputChars)), "persistent-"+cfg.ToolName)
}
