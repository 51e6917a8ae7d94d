package main

import (
	"fmt"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/lib/persistentshell"
	"github.com/dshrun/dsh/sdk/modeltext"
)

// toolSpec is the tool: the persistent tools' schema, for bash (a
// background command is `cmd &` in the shell).
func toolSpec(cfg config) *toolsv1.ToolSpec {
	return persistentshell.ToolSpec(persistentshell.Config(cfg), "Run a command in a persistent bash shell", "The bash command to run.", description(cfg))
}

func description(cfg config) string {
	return fmt.Sprintf(`Run a bash command in your persistent shell and return its output.

- The shell lives on between calls: the working directory (cd), exported and shell variables, functions and aliases carry over. Commands run one at a time.
- It runs on a terminal: stdout and stderr come together, in order. A command that waits for input returns what it printed so far; the next command interrupts it first. Give commands their input (a pipe, a here-document, a flag) instead.
- A command is stopped after `+"`timeoutMs`"+` (default %d ms, at most %d ms): the shell is then closed with everything it ran, and the next command starts in a fresh one (as after `+"`exit`"+`).
- You see at most %s characters: the last lines. `+"`[output truncated: … omitted …]`"+` says what was left out; colours and other terminal codes are removed.
- How it ended is the last line: nothing for exit code 0, else `+"`[exit code: N]`"+`, or a bracketed line saying why there is no end yet.
- A command that runs in a fresh shell says so on its first line.
- The shell is one of your terminals (terminal_list shows it, named %s).`,
		cfg.DefaultTimeoutMs, cfg.MaxTimeoutMs, modeltext.Thousands(int64(cfg.MaxOutputChars)), "persistent-"+cfg.ToolName)
}
