// Command dsh-tool-bash-persistent is a persistent bash tool: it registers
// one tool (`bash` unless its config names another) with ctx.tools and runs
// each command in a shell of the calling agent's own that lives on between
// calls, a ctx.terminals session (so the working directory, variables and
// functions carry over, and the shell shows in terminal_list), through
// plugins/lib/persistentshell. This is its bash: each command is typed in
// a line that frames it with a start and an end marker, each with a fresh
// nonce, written by a program nothing the shell defines can reach (see
// typedLine).
package main

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/lib/persistentshell"
	"github.com/dshrun/dsh/sdk"
)

// config is tool-bash-persistent's config.
type config struct {
	ToolName string `json:"toolName" default:"bash" pattern:"^[A-Za-z0-9_-]{1,64}$" desc:"the tool's name (bash); another name lets it sit beside tool-bash"`
	// Backend is the ctx.terminals backend the shells open with.
	Backend string `json:"backend" desc:"the terminal backend the shells open with (the only one registered)"`
	Cwd     string `json:"cwd" desc:"where a fresh shell starts (the backend's folder)"`
	// MaxOutputChars is the model budget of one result.
	MaxOutputChars   int   `json:"maxOutputChars" minimum:"100" desc:"characters of output one result shows: its last lines (30000)"`
	DefaultTimeoutMs int64 `json:"defaultTimeoutMs" minimum:"1" desc:"a command's timeout when the call names none (120000)"`
	MaxTimeoutMs     int64 `json:"maxTimeoutMs" minimum:"1" maximum:"600000" desc:"the longest timeout a call may ask for (600000)"`
}

// bash is the bash dialect of the persistent tool.
type bash struct{}

func (bash) Type(command string, n persistentshell.Nonces) persistentshell.Typed {
	return persistentshell.Typed{Line: persistentshell.Line{
		Text:  typedLine(command, n.Start, n.End),
		From:  startMarker(n.Start),
		Until: endMarker(n.End),
	}}
}

// Status reads the end marker's rest: the status eval left, or lostStatus.
func (bash) Status(rest string) (int, bool) {
	if rest == lostStatus {
		return 0, false
	}
	status, _ := strconv.Atoi(strings.TrimSpace(rest))
	return status, true
}

func (bash) Tool(cfg persistentshell.Config) *toolsv1.ToolSpec { return toolSpec(config(cfg)) }

// Shell: a bash-dialect session (a session of a pwsh backend is closed
// and the call names the backend to use, rather than bash lines typed to
// PowerShell).
func (bash) Shell() persistentshell.Shell {
	return persistentshell.Shell{Dialect: "bash", Interrupt: "SIGINT"}
}

// The markers around a command's output, with the call's nonces.
func startMarker(nonce string) string { return "__DSH_PERSISTENT_BASH_START_" + nonce + "__" }
func endMarker(nonce string) string   { return "__DSH_PERSISTENT_BASH_END_" + nonce + ":" }

// lostStatus is what the end marker carries in place of a status when the
// command was not run by the shell's own eval (a function or a disabled
// builtin stood in its way).
const lostStatus = "lost"

// typedLine is what is typed for command: one line (however many the
// command has) whose words no alias, function or disabled builtin of the
// shell can take over, or only so that the call fails rather than lies:
//
//   - POSIXLY_CORRECT=1 (an assignment: nothing to look up) puts bash in
//     posix mode, where eval, set, unset and exec, special builtins, are
//     found before any function; a readonly POSIXLY_CORRECT aborts the line
//     before the command, and no end marker comes. HISTSIZE=0 keeps the
//     line from the history (and empties it).
//   - The start marker is bash's own message for an unset variable
//     (${v?word}) in a subshell, with no command to look up; the quotes
//     that split it in the typed line are gone from the message. It need
//     not be secret: it only says where the output starts.
//   - eval runs, as its first words, the leaving of posix mode and the
//     emptying of __dsh_lost, then the command itself in the shell (so cd
//     and exports stay). An eval that is not the builtin (disabled)
//     leaves __dsh_lost as it was, and the end marker carries it in
//     place of a status.
//   - The end marker is printed from a subshell, which takes no DEBUG
//     trap (and drops the one functrace or extdebug hands it), in posix
//     mode again, where no function printf is left and PATH is empty: the
//     builtin printf prints it, or nothing does (a disabled printf is not
//     replaced by a program, whose command line would show the nonce). It
//     goes to the terminal the shell reads from, whatever the command
//     redirected. A readonly status variable, or a disabled unset, cuts
//     the subshell short, and no end marker comes.
//   - The line ends by putting verbose mode and the history off again,
//     and the shell's stderr back on the terminal (the line editor echoes
//     what is typed, and prints the prompt, there): the next line, and its
//     nonce, is shown nowhere but on the terminal. A command's stdout
//     redirection (exec >file) stays.
//
// The end nonce is typed only in the end marker's printf, after the
// command: the command finds it in no variable, function, history,
// environment or command line. The markers are assembled from pieces (by
// quote removal, by printf), so the echoed line holds neither.
func typedLine(command, startNonce, endNonce string) string {
	return ` POSIXLY_CORRECT=1;HISTSIZE=0;__dsh_lost=` + lostStatus + `;` +
		`\unset __dsh_start;("${__dsh_start?__DSH_PERSISTENT''_BASH_START_` + startNonce + `__}") 2>&0||__dsh_start=;` +
		`\eval ` + ansiQuote("\\unset POSIXLY_CORRECT;__dsh_lost=\n"+command) +
		`;(__dsh_status=$?;POSIXLY_CORRECT=1;\trap - DEBUG RETURN;\set +vx;\unset -f printf;PATH=;` +
		`\printf '\n%s_%s_%s:%s\n' __DSH_PERSISTENT_BASH END ` + endNonce + ` "${__dsh_lost:-$__dsh_status}") >&0 2>/dev/null` +
		`;POSIXLY_CORRECT=1;\set +v;\exec 2>&0;HISTSIZE=0;\unset POSIXLY_CORRECT`
}

// ansiQuote is s as a bash $'...' string: letters, digits and a few safe
// marks as they are, every other byte as \xHH.
func ansiQuote(s string) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 3)
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte(" ,./:=@_+-%", c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func main() {
	sdk.Serve(persistentshell.New(persistentshell.Plugin{
		Name:         "tool-bash-persistent",
		Version:      "0.1.0",
		Summary:      "a persistent bash tool: one shell per agent on ctx.terminals, its state kept between calls",
		ConfigSchema: sdk.SchemaOf[config](),
		Decode: func(raw json.RawMessage) (persistentshell.Config, error) {
			cfg, err := sdk.DecodeConfig[config](raw)
			return persistentshell.Config(cfg), err
		},
		Dialect: bash{},
	}))
}
