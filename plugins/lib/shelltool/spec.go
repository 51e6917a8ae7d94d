package shelltool

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/shell"
	"github.com/dshrun/dsh/sdk/modeltext"
)

// maxNetworkHosts is the most hosts one call may ask for.
const maxNetworkHosts = 16

// modesByAccess are the sandbox modes, least access first.
var modesByAccess = []shell.SandboxMode{shell.ReadOnly, shell.WorkspaceWrite, shell.DangerFullAccess}

// escalationTargets are the modes a call may ask for under an executor
// whose mode is mode: those with more access.
func escalationTargets(mode shell.SandboxMode) []string {
	var out []string
	more := false
	for _, m := range modesByAccess {
		if more {
			out = append(out, string(m))
		}
		more = more || m == mode
	}
	return out
}

// Place is where commands run, as the tool's description names it: a
// model that knows the folders writes there, not where the sandbox
// refuses it.
type Place struct {
	Start     string   // where a command starts: the executor's default working directory
	Workspace string   // the sandbox's workspace; "" under an executor that does not sandbox
	More      []string // the other folders a workspace-write command may write in
	// Network is set when the sandbox gives commands the whole network:
	// no host needs asking for. Otherwise they reach only the hosts its
	// proxy's rules allow, and network_hosts asks for more.
	Network bool
}

// PlaceOf is where commands run: start, and the folders of policy (nil
// under an executor that does not sandbox).
func PlaceOf(start string, policy *sandbox.Policy) Place {
	at := Place{Start: start}
	if policy != nil {
		at.Workspace = policy.WorkspaceRoot
		at.More = slices.Concat(policy.WritableRoots, policy.CacheRoots)
		at.Network = policy.Network
	}
	return at
}

// sandboxLine is the description's line about the sandbox of mode.
func sandboxLine(mode shell.SandboxMode, at Place) string {
	var where string
	switch {
	case at.Workspace == "":
	case mode == shell.WorkspaceWrite:
		where = fmt.Sprintf(": they may write only in the workspace, `%s`%s, and in /tmp", at.Workspace, andIn(at.More))
	case mode == shell.ReadOnly:
		where = fmt.Sprintf(" and may not write files (with `sandbox_permissions: %s` a command may write in the workspace, `%s`)", shell.WorkspaceWrite, at.Workspace)
	}
	return fmt.Sprintf("\n- Commands run in a %s sandbox%s. A denied file access is reported as `[sandbox: file access denied under %s mode]`, after the line that says how the command ended; to run one command with more access, repeat it with `sandbox_permissions` and a `justification`.", mode, where, mode)
}

// networkLine is the description's line about the sandbox's network.
const networkLine = "\n- Commands reach only the network hosts the sandbox allows. A refused host is reported as `[sandbox: network access to HOST denied]`; to reach one, repeat the command with `network_hosts` (the hosts it needs, e.g. `[\"registry.npmjs.org\"]`) and a `justification`."

// andIn names more folders after the workspace: ", in `a` and `b`".
func andIn(folders []string) string {
	if len(folders) == 0 {
		return ""
	}
	quoted := make([]string, len(folders))
	for i, f := range folders {
		quoted[i] = "`" + f + "`"
	}
	if len(quoted) == 1 {
		return ", in " + quoted[0]
	}
	return ", in " + strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
}

// Specs are the four tools s registers: the executor's sandbox mode and
// defaults and the budget of a result go into what the model reads. The
// sandbox fields appear only when the composed executor confines (a mode
// with less than full access).
func (s Shell) Specs(mode shell.SandboxMode, at Place, defaultTimeoutMs, maxTimeoutMs int64, maxChars int) []*toolsv1.ToolSpec {
	props := map[string]any{
		"command":     map[string]any{"type": "string", "minLength": 1, "description": s.Command},
		"description": map[string]any{"type": "string", "description": "What the command does, in five to ten words."},
		"timeoutMs": map[string]any{"type": "integer", "minimum": 1,
			"description": fmt.Sprintf("Timeout in milliseconds (default %d, at most %d).", defaultTimeoutMs, maxTimeoutMs)},
		"workdir":           map[string]any{"type": "string", "description": "Working directory for this command (instead of " + s.ChangeDir + ")."},
		"run_in_background": map[string]any{"type": "boolean", "description": "Start the command as a background job and return its id at once."},
	}
	desc := s.description(at.Start, defaultTimeoutMs, maxTimeoutMs, maxChars)
	if targets := escalationTargets(mode); len(targets) > 0 {
		props["sandbox_permissions"] = map[string]any{"type": "string", "enum": targets,
			"description": fmt.Sprintf("Run this one command with more access than the sandbox's %s mode; needs a justification and approval.", mode)}
		props["justification"] = map[string]any{"type": "string", "description": "Why the command needs more access."}
		desc += sandboxLine(mode, at)
		if !at.Network {
			props["network_hosts"] = map[string]any{"type": "array", "minItems": 1, "maxItems": maxNetworkHosts,
				"items":       map[string]any{"type": "string", "minLength": 1},
				"description": "Hosts (example.com or example.com:8080) this one command needs to reach that the sandbox refuses; needs a justification and approval."}
			desc += networkLine
		}
	}
	run := map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             []string{"command", "description"},
		"additionalProperties": false,
	}
	job := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"job_id": map[string]any{"type": "string", "description": "The id `" + s.Tool + "` returned, e.g. j1."}},
		"required":             []string{"job_id"},
		"additionalProperties": false,
	}
	none := map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
	return []*toolsv1.ToolSpec{
		{Name: s.Tool, Title: s.Title, Description: desc, InputSchema: mustJSON(run)},
		{Name: "job_output", Title: "Read a background job's new output", InputSchema: mustJSON(job),
			Description: "Return what a background job printed since the last read (never the same output twice), and whether it is still running. The final read of a finished job ends with its exit marker and forgets the job."},
		{Name: "job_kill", Title: "Stop a background job", InputSchema: mustJSON(job),
			Description: "Stop a background job and every process it started (SIGTERM, then SIGKILL). Its remaining output stays readable with job_output."},
		{Name: "job_list", Title: "List your background jobs", InputSchema: mustJSON(none), Description: jobListDescription},
	}
}

// jobListDescription says what job_list lists and when to use it.
const jobListDescription = "List your background jobs, oldest first: each one's id and command, whether it is still running or how it ended (exit code, signal, a limit it reached), when it started and how long it ran, and how many bytes of output job_output would return next. Use it when you have lost track of a job id (earlier messages were dropped, or the client restarted), and before you finish, to see what still runs and stop what is no longer needed with job_kill. A finished job is listed until job_output has returned its end; then it is forgotten and no longer listed."

// description is the tool's description: its shell's introduction, then
// how every shell tool bounds, shows and ends a command.
func (s Shell) description(start string, defaultTimeoutMs, maxTimeoutMs int64, maxChars int) string {
	session := s.Session
	if start != "" {
		session += " that starts in `" + start + "`"
	}
	return s.Intro(session) + fmt.Sprintf(`
- A command is killed with every process it started after `+"`timeoutMs`"+` (default %d ms, at most %d ms).
- You see stdout, then stderr after a `+"`[stderr]`"+` line: at most %s characters of the two, their last lines. `+"`[output truncated: … omitted; full output: <file>]`"+` names a file with all of it: read that (%s) instead of running the command again. Colours and other terminal codes are removed; binary output is not shown.
- How it ended is the last line: nothing for exit code 0, else `+"`[exit code: N]`"+`, or `+"`[timed out after <ms>ms]`"+` and `+"`[killed by signal: SIGTERM]`"+`.
- `+"`run_in_background: true`"+` starts a job and returns its id at once, with no timeout: read its new output with job_output, stop it with job_kill, list jobs with job_list; you are told when it finishes. Use it for servers, watchers and anything long.`, defaultTimeoutMs, maxTimeoutMs, modeltext.Thousands(int64(maxChars)), s.ReadSpill)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
