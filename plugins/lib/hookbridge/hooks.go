// Package hookbridge is what the hook bridges share (hooks-claude-code,
// hooks-codex): command hooks grouped under matchers, the matchers as both
// agents read them, hook files located to their lines, and the running of
// matching hooks through ctx.shell (in parallel, each command once, each
// within its timeout). What a hook's exit and output mean is each
// bridge's own.
package hookbridge

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/dshrun/dsh/plugins/shell"
)

// Hook is one command hook.
type Hook struct {
	Command string
	Timeout time.Duration
	Where   string // file:line of the hook
}

// Group is the hooks of one event under one matcher.
type Group struct {
	Event   string
	Matcher string
	Hooks   []Hook
	Where   string // file:line of the matcher (or of the group)
	match   func(string) bool
	pattern string // the matcher as a full-match RE2 pattern for ctx.tools
}

// Matches reports whether the group's matcher takes tool name.
func (g *Group) Matches(name string) bool { return g.match(name) }

// simpleMatcher is a matcher both agents read as names, not a regex.
var simpleMatcher = regexp.MustCompile(`^[A-Za-z0-9_|]+$`)

// CompileMatcher reads a matcher as Claude Code and Codex do: empty or
// "*" takes every tool; letters, digits, '_' and '|' are exact names,
// '|' between them; anything else is a regex that matches anywhere in the
// name. It returns the matcher as a full-match RE2 pattern too (for the
// interception, which ctx.tools matches against tool aliases).
func CompileMatcher(m string) (match func(string) bool, pattern string, err error) {
	switch {
	case m == "" || m == "*":
		return func(string) bool { return true }, "*", nil
	case simpleMatcher.MatchString(m):
		names := strings.Split(m, "|")
		return func(n string) bool {
			for _, x := range names {
				if x == n {
					return true
				}
			}
			return false
		}, m, nil
	}
	re, err := regexp.Compile(m)
	if err != nil {
		return nil, "", fmt.Errorf("matcher %q is not a regular expression dsh can read (RE2 syntax): %v", m, err)
	}
	return re.MatchString, ".*(?:" + m + ").*", nil
}

// NewGroup makes a group, its matcher compiled.
func NewGroup(event, matcher, where string, hooks []Hook) (Group, error) {
	match, pattern, err := CompileMatcher(matcher)
	if err != nil {
		return Group{}, fmt.Errorf("%s: %v", where, err)
	}
	return Group{Event: event, Matcher: matcher, Hooks: hooks, Where: where, match: match, pattern: pattern}, nil
}

// Set is a bridge's hooks, read once (a snapshot: changed by a reload of
// the bridge, never by a file edited meanwhile).
type Set struct {
	Groups []Group
}

// Matching are the hooks of event whose matchers take tool name, each
// command once (the first of identical ones), in file order.
func (s *Set) Matching(event, name string) []Hook {
	var out []Hook
	seen := map[string]bool{}
	for _, h := range s.MatchingAll(event, name) {
		if !seen[h.Command] {
			seen[h.Command] = true
			out = append(out, h)
		}
	}
	return out
}

// Patterns are the tool patterns of event's groups (for ctx.tools).
func (s *Set) Patterns(events ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, g := range s.Groups {
		for _, e := range events {
			if g.Event == e && !seen[g.pattern] {
				seen[g.pattern] = true
				out = append(out, g.pattern)
			}
		}
	}
	return out
}

// Longest is the longest timeout among event's hooks (0 for none).
func (s *Set) Longest(events ...string) time.Duration {
	var d time.Duration
	for _, g := range s.Groups {
		for _, e := range events {
			if g.Event != e {
				continue
			}
			for _, h := range g.Hooks {
				d = max(d, h.Timeout)
			}
		}
	}
	return d
}

// Ran is how one hook ran.
type Ran struct {
	Hook
	ExitCode       int
	Signal         string
	Stdout, Stderr []byte
	// StdoutCut: stdout was more than could be read whole; Stdout is its
	// end only.
	StdoutCut bool
	TimedOut  bool
	// Err: it could not be run (the executor refused or failed).
	Err error
}

// Failed says why a hook that did not exit 0 or 2 (or did not run) did not
// decide anything, for logs and the user.
func (r Ran) Failed() string {
	switch {
	case r.Err != nil:
		return fmt.Sprintf("hook %s (%s) could not run: %v", r.Command, r.Where, r.Err)
	case r.TimedOut:
		return fmt.Sprintf("hook %s (%s) timed out after %v", r.Command, r.Where, r.Timeout)
	case r.Signal != "":
		return fmt.Sprintf("hook %s (%s) was killed by %s", r.Command, r.Where, r.Signal)
	}
	msg := fmt.Sprintf("hook %s (%s) exited with code %d", r.Command, r.Where, r.ExitCode)
	if e := strings.TrimSpace(string(r.Stderr)); e != "" {
		msg += ": " + firstLines(e, 5)
	}
	return msg
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

// Runner runs hooks through ctx.shell: each a command of the calling
// agent's (the call the bridge serves), in Dir, with Env over the
// executor's environment and the payload on stdin.
type Runner struct {
	Shell *shell.Client
	Dir   string
	Env   map[string]string
}

// Run runs hooks at once and returns how each ran, in their order.
func (r *Runner) Run(ctx context.Context, owner string, hooks []Hook, payload []byte) []Ran {
	out, _ := r.RunCompleted(ctx, owner, hooks, payload)
	return out
}

func (r *Runner) run(ctx context.Context, owner string, h Hook, payload []byte) Ran {
	ran := Ran{Hook: h}
	res, err := r.Shell.Exec(ctx, &shell.ExecRequest{
		Command:   h.Command,
		Workdir:   r.Dir,
		TimeoutMs: h.Timeout.Milliseconds(),
		Stdin:     payload,
		HasStdin:  true,
		Env:       r.Env,
		Owner:     owner,
	})
	if err != nil {
		ran.Err = err
		return ran
	}
	if res.ExitCode != nil {
		ran.ExitCode = int(*res.ExitCode)
	} else {
		ran.ExitCode = -1
	}
	ran.Signal, ran.TimedOut = res.Signal, res.TimedOut
	ran.Stdout, ran.StdoutCut = whole(res.Stdout)
	// stderr becomes words (a reason, feedback, a message): valid UTF-8,
	// and bounded.
	stderr, _ := whole(res.Stderr)
	if len(stderr) > maxStderr {
		stderr = append(stderr[:maxStderr:maxStderr], "\n[… cut]"...)
	}
	ran.Stderr = bytes.ToValidUTF8(stderr, []byte("\uFFFD"))
	return ran
}

// The bounds of what a hook's output is read of.
const (
	maxStdout = 16 << 20
	maxStderr = 16 << 10
)

// whole is all a stream printed: what the executor kept, or its spill
// file when it kept only the end and the file has it all. cut reports that
// the start is missing (so the output cannot be read as a whole).
func whole(c *shell.Collected) (data []byte, cut bool) {
	if !c.GetTruncated() {
		return c.GetData(), false
	}
	if c.GetSpillPath() != "" && c.GetSpillComplete() && c.GetTotal() <= maxStdout {
		if b, err := os.ReadFile(c.GetSpillPath()); err == nil && int64(len(b)) == c.GetTotal() {
			return b, false
		}
	}
	return c.GetData(), true
}

// Locator finds where values of a JSON document are: the line of each
// value by its path (keys and indexes joined by '/', e.g.
// "hooks/PreToolUse/0/matcher").
type Locator struct {
	file  string
	lines map[string]int
}

// Locate reads the positions of raw's values; raw must be valid JSON.
func Locate(file string, raw []byte) *Locator {
	l := &Locator{file: file, lines: map[string]int{}}
	dec := json.NewDecoder(bytes.NewReader(raw))
	lineAt := func(off int64) int { return 1 + bytes.Count(raw[:min(int(off), len(raw))], []byte{'\n'}) }
	type frame struct {
		array bool
		index int
		key   string
		want  bool // an object awaiting its next key
	}
	var stack []*frame
	path := func() string {
		var parts []string
		for _, f := range stack {
			if f.array {
				parts = append(parts, fmt.Sprint(f.index))
			} else {
				parts = append(parts, f.key)
			}
		}
		return strings.Join(parts, "/")
	}
	advance := func() {
		if len(stack) == 0 {
			return
		}
		if t := stack[len(stack)-1]; t.array {
			t.index++
		} else {
			t.want = true
		}
	}
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return l
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].want {
			if k, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].want = k, false
				continue
			}
		}
		if tok == json.Delim('}') || tok == json.Delim(']') {
			stack = stack[:len(stack)-1]
			advance()
			continue
		}
		// A value starts (after the separator the offset may sit before).
		start := off
		for int(start) < len(raw) && strings.IndexByte(" \t\r\n:,", raw[start]) >= 0 {
			start++
		}
		if len(stack) > 0 {
			l.lines[path()] = lineAt(start)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{want: true})
		case json.Delim('['):
			stack = append(stack, &frame{array: true})
		default:
			advance()
		}
	}
}

// At is "file:line" of the value at path (the file alone when unknown).
func (l *Locator) At(path string) string {
	if n, ok := l.lines[path]; ok {
		return fmt.Sprintf("%s:%d", l.file, n)
	}
	return l.file
}

// SyntaxError is a JSON error of file as "file:line: …".
func SyntaxError(file string, raw []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(raw[:min(int(se.Offset), len(raw))], []byte{'\n'})
		return fmt.Errorf("%s:%d: not valid JSON: %v", file, line, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		line := 1 + bytes.Count(raw[:min(int(te.Offset), len(raw))], []byte{'\n'})
		return fmt.Errorf("%s:%d: %s should be %s, not %s", file, line, te.Field, te.Type, te.Value)
	}
	return fmt.Errorf("%s: %v", file, err)
}

// IDs stands in for the host's ids in what hooks are given: an owner (an
// agent's session) and a call become ids of their own, stable for this
// process, from which neither can be told (a hook is a command, and a
// command must not learn its session's id).
type IDs struct{ key [32]byte }

// NewIDs makes the ids of one process.
func NewIDs() *IDs {
	ids := &IDs{}
	_, _ = rand.Read(ids.key[:])
	return ids
}

func (ids *IDs) of(kind, s string) string {
	m := hmac.New(sha256.New, ids.key[:])
	m.Write([]byte(kind + "\x00" + s))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Session is the id hooks see for owner.
func (ids *IDs) Session(owner string) string { return ids.of("session", owner) }

// ToolUse is the id hooks see for a call.
func (ids *IDs) ToolUse(call string) string { return "toolu_dsh_" + ids.of("call", call) }

// BashAliases names the dsh tools a bridge's hooks know as Bash: each of
// names (dsh's bash, and whatever else runs shell commands under another
// name, such as a persistent bash tool beside tool-bash).
func BashAliases(names []string) map[string]string {
	if len(names) == 0 {
		names = []string{"bash"}
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = "Bash"
	}
	return m
}
