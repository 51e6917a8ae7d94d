package hookbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/plugins/shell"
)

// The events the bridges carry: dsh sees tool calls, not prompts, turns or
// sessions.
const (
	PreToolUse  = "PreToolUse"
	PostToolUse = "PostToolUse"
)

// ProjectDir is a bridge's project folder: dir made absolute, the working
// directory when dir is "".
func ProjectDir(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("no project folder: %w", err)
		}
		dir = wd
	}
	return filepath.Abs(dir)
}

// Cwd is the folder the command of call c runs in, which its hooks are
// told (the payload's cwd): a Bash call's workdir resolved by the composed
// executor, as the call itself will be, and for a call without one, or of
// another tool, the folder the executor starts commands in. When the
// executor cannot be asked, an absolute workdir as given, else Dir.
func (r *Runner) Cwd(ctx context.Context, c *tools.InterceptedCall) string {
	var a struct {
		Workdir string `json:"workdir"`
	}
	if c.Alias == "Bash" {
		_ = json.Unmarshal(c.Arguments, &a)
	}
	spec, err := r.Shell.Resolve(ctx, &shell.ExecRequest{Command: "true", Workdir: a.Workdir, Owner: c.Owner})
	switch {
	case err == nil:
		return spec.Workdir
	case filepath.IsAbs(a.Workdir):
		return filepath.Clean(a.Workdir)
	}
	return r.Dir
}

// Interception is what a bridge asks of ctx.tools: the calls the hooks of
// all cover (bashTools seen as Bash, the others as mcp__dsh__<tool>),
// before them when a PreToolUse hook exists, after them when a PostToolUse
// one does, and a bound of the longest hook of waited (the ones the call
// waits for) plus 10 s.
func Interception(all, waited *Set, bashTools []string) *tools.Interception {
	return &tools.Interception{
		Patterns:    all.Patterns(PreToolUse, PostToolUse),
		Aliases:     BashAliases(bashTools),
		AliasPrefix: "mcp__dsh__",
		Before:      len(all.Patterns(PreToolUse)) > 0,
		After:       len(all.Patterns(PostToolUse)) > 0,
		TimeoutMs:   (waited.Longest(PreToolUse, PostToolUse) + 10*time.Second).Milliseconds(),
	}
}
