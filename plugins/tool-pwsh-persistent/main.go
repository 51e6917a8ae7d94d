// Command dsh-tool-pwsh-persistent is a persistent PowerShell tool: it
// registers one tool (`pwsh` unless its config names another) with
// ctx.tools and runs each command in a PowerShell session of the calling
// agent's own that lives on between calls, a ctx.terminals session of a
// pwsh-dialect backend (terminal-bash with shellDialect pwsh, or another
// registered under the name its config gives), through
// plugins/lib/persistentshell: the location, $env: variables, variables,
// functions and background jobs carry over, and the session shows in
// terminal_list. This is its PowerShell: what is typed for a command (see
// line.go), and the tool's texts.
package main

import (
	"encoding/json"
	"strconv"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/lib/persistentshell"
	"github.com/dshrun/dsh/sdk"
)

// config is tool-pwsh-persistent's config.
type config struct {
	ToolName string `json:"toolName" default:"pwsh" pattern:"^[A-Za-z0-9_-]{1,64}$" desc:"the tool's name (pwsh)"`
	// Backend is the ctx.terminals backend the sessions open with: one
	// whose shells speak pwsh.
	Backend string `json:"backend" default:"pwsh" desc:"the terminal backend the sessions open with, a pwsh-dialect one (pwsh)"`
	Cwd     string `json:"cwd" desc:"where a fresh session starts (the backend's folder)"`
	// MaxOutputChars is the model budget of one result.
	MaxOutputChars   int   `json:"maxOutputChars" minimum:"100" desc:"characters of output one result shows: its last lines (30000)"`
	DefaultTimeoutMs int64 `json:"defaultTimeoutMs" minimum:"1" desc:"a command's timeout when the call names none (120000)"`
	MaxTimeoutMs     int64 `json:"maxTimeoutMs" minimum:"1" maximum:"600000" desc:"the longest timeout a call may ask for (600000)"`
}

// pwsh is the PowerShell dialect of the persistent tool.
type pwsh struct{}

func (pwsh) Type(command string, n persistentshell.Nonces) persistentshell.Typed {
	return persistentshell.Typed{
		Line:    persistentshell.Line{Text: commandLine(command, n.Start), From: startMarker(n.Start), Until: doneMarker(n.Start) + ":"},
		Confirm: &persistentshell.Line{Text: confirmLine(n.Start, n.End), From: doneMarker(n.Start), Until: endMarker(n.End)},
	}
}

// Status reads the rest of an end's line: the done marker's says whether
// the session can be trusted with what is typed next (ok, or lostStatus),
// the end marker's is the command's status.
func (pwsh) Status(rest string) (int, bool) {
	if rest == "ok" {
		return 0, true
	}
	status, err := strconv.Atoi(rest)
	return status, err == nil
}

func (pwsh) Tool(cfg persistentshell.Config) *toolsv1.ToolSpec { return toolSpec(config(cfg)) }

func (pwsh) Shell() persistentshell.Shell {
	return persistentshell.Shell{
		Dialect: "pwsh",
		// PowerShell's own line reader takes Ctrl-C as a key, and so does
		// Read-Host: a key ends either; a signal ends neither.
		Interrupt:     "Ctrl-C",
		InterruptKeys: "\x03",
		// PowerShell reads the terminal (its console's cursor position)
		// before its first prompt.
		AwaitPrompt: true,
		CutShort:    true,
	}
}

func main() {
	sdk.Serve(persistentshell.New(persistentshell.Plugin{
		Name:         "tool-pwsh-persistent",
		Version:      "0.1.0",
		Summary:      "a persistent PowerShell tool: one session per agent on ctx.terminals, its state kept between calls",
		ConfigSchema: sdk.SchemaOf[config](),
		Decode: func(raw json.RawMessage) (persistentshell.Config, error) {
			cfg, err := sdk.DecodeConfig[config](raw)
			return persistentshell.Config(cfg), err
		},
		Dialect: pwsh{},
	}))
}
