// Command dsh-tool-bash is the model-facing bash tool: it registers `bash`,
// `job_output`, `job_kill` and `job_list` with ctx.tools, runs commands through
// ctx.shell (whichever executor is composed), hands background processes to
// ctx.jobs, and gives each execution one trusted DSH_* snapshot from
// ctx.shellEnv. The tool is shelltool's; what it says of bash is here.
package main

import (
	"github.com/dshrun/dsh/plugins/lib/shelltool"
	"github.com/dshrun/dsh/sdk"
)

var bash = shelltool.Shell{
	Plugin:     "tool-bash",
	Version:    "0.1.0",
	Summary:    "the model-facing bash tool, with background jobs",
	Tool:       "bash",
	Title:      "Run a bash command",
	Command:    "The bash command to run.",
	ChangeDir:  "cd",
	Session:    "a fresh shell",
	Intro:      intro,
	ReadSpill:  "grep, sed -n, tail",
	ReadBinary: "pipe it through xxd or od to read it",
}

// intro opens the bash description: each call runs in session.
func intro(session string) string {
	return `Run a bash command and return its output.

- Each call runs in ` + session + `: the working directory, variables and functions do not carry over. Pass ` + "`workdir`" + ` instead of using cd.
- No terminal and stdin is closed: anything that prompts fails instead of waiting.`
}

func main() { sdk.Serve(shelltool.New(bash)) }
