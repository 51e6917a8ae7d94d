package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/dshrun/dsh/plugins/lib/hookbridge"
)

// The events Codex reads from a hooks file (its HookEventsToml and
// HookEventName at the commit the semantics follow).
var codexEvents = []string{
	"PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact",
	"SessionStart", "UserPromptSubmit", "SubagentStart", "SubagentStop", "Stop",
}

// events is the hooks table of a hooks.json (its "hooks" key) or of a
// config.toml (its [hooks] table); other keys ("state", the trust state)
// are ignored as Codex's UI's own.
type events struct {
	PreToolUse        []group `json:"PreToolUse" toml:"PreToolUse"`
	PermissionRequest []group `json:"PermissionRequest" toml:"PermissionRequest"`
	PostToolUse       []group `json:"PostToolUse" toml:"PostToolUse"`
	PreCompact        []group `json:"PreCompact" toml:"PreCompact"`
	PostCompact       []group `json:"PostCompact" toml:"PostCompact"`
	SessionStart      []group `json:"SessionStart" toml:"SessionStart"`
	UserPromptSubmit  []group `json:"UserPromptSubmit" toml:"UserPromptSubmit"`
	SubagentStart     []group `json:"SubagentStart" toml:"SubagentStart"`
	SubagentStop      []group `json:"SubagentStop" toml:"SubagentStop"`
	Stop              []group `json:"Stop" toml:"Stop"`
}

func (e *events) of(name string) []group {
	switch name {
	case "PreToolUse":
		return e.PreToolUse
	case "PermissionRequest":
		return e.PermissionRequest
	case "PostToolUse":
		return e.PostToolUse
	case "PreCompact":
		return e.PreCompact
	case "PostCompact":
		return e.PostCompact
	case "SessionStart":
		return e.SessionStart
	case "UserPromptSubmit":
		return e.UserPromptSubmit
	case "SubagentStart":
		return e.SubagentStart
	case "SubagentStop":
		return e.SubagentStop
	case "Stop":
		return e.Stop
	}
	return nil
}

type group struct {
	Matcher *string   `json:"matcher" toml:"matcher"`
	Hooks   []handler `json:"hooks" toml:"hooks"`
}

// handler is Codex's HookHandlerConfig: a "type"-tagged command, prompt
// or agent hook; timeout in whole seconds.
type handler struct {
	Type           *string `json:"type" toml:"type"`
	Command        *string `json:"command" toml:"command"`
	CommandWindows *string `json:"command_windows" toml:"command_windows"`
	Timeout        *uint64 `json:"timeout" toml:"timeout"`
	TimeoutSec     *uint64 `json:"timeoutSec" toml:"timeoutSec"`
	Async          bool    `json:"async" toml:"async"`
	StatusMessage  *string `json:"statusMessage" toml:"statusMessage"`
}

// Codex's timeouts: 600 s when none is given, at least 1 s. dsh's host
// gives one Before or After at most 600 s, so a hook gets at most maxHook
// (the rest is the bridge's margin).
const (
	defaultTimeout = 600
	maxHook        = 590 * time.Second
)

// loaded is what the hooks files say: the hooks that decide (sync) and
// those Codex runs in the background without waiting (async).
type loaded struct {
	sync, async *hookbridge.Set
	notes       []string
}

// hooksFiles are the files read, in Codex's order: the user layer
// (codexHome) before the project's, hooks.json before config.toml in each.
func hooksFiles(cfg config) []string {
	if len(cfg.HooksFiles) > 0 {
		out := make([]string, 0, len(cfg.HooksFiles))
		for _, f := range cfg.HooksFiles {
			if !filepath.IsAbs(f) {
				f = filepath.Join(cfg.ProjectDir, f)
			}
			out = append(out, f)
		}
		return out
	}
	var out []string
	for _, dir := range []string{cfg.CodexHome, filepath.Join(cfg.ProjectDir, ".codex")} {
		if dir == "" {
			continue
		}
		for _, f := range []string{filepath.Join(dir, "hooks.json"), filepath.Join(dir, "config.toml")} {
			// A project at the home folder: its .codex is the user's, read once.
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// locator is where a hooks table's values are, by path ("hooks/PreToolUse/0/hooks/1").
type locator interface{ At(path string) string }

// load reads the files (a missing one is no hooks), concatenating their
// hooks, and checks each, naming the file and line of what is wrong.
func load(cfg config) (*loaded, error) {
	l := &loaded{sync: &hookbridge.Set{}, async: &hookbridge.Set{}}
	var jsonAt string // the hooks.json of the folder being read, for Codex's warning
	for _, file := range hooksFiles(cfg) {
		raw, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read hooks: %w", err)
		}
		var ev *events
		var at locator
		if strings.HasSuffix(file, ".toml") {
			ev, at, err = readTOML(file, raw)
		} else {
			ev, at, err = readJSON(file, raw)
		}
		if err != nil {
			return nil, fmt.Errorf("read hooks: %w", err)
		}
		if ev == nil {
			continue
		}
		n, err := l.add(file, ev, at)
		if err != nil {
			return nil, fmt.Errorf("read hooks: %w", err)
		}
		if n > 0 && strings.HasSuffix(file, ".toml") && jsonAt != "" && filepath.Dir(jsonAt) == filepath.Dir(file) {
			l.notes = append(l.notes, fmt.Sprintf("%s and %s both have hooks: both run (as in Codex, which prefers a single representation per folder)", jsonAt, file))
		}
		if n > 0 && !strings.HasSuffix(file, ".toml") {
			jsonAt = file
		}
	}
	return l, nil
}

// readJSON reads a hooks.json: {"hooks": {"<Event>": [groups]}}.
func readJSON(file string, raw []byte) (*events, locator, error) {
	var f struct {
		Hooks *events `json:"hooks"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, nil, hookbridge.SyntaxError(file, raw, err)
	}
	if f.Hooks == nil {
		return nil, nil, nil
	}
	var keys struct {
		Hooks map[string]json.RawMessage `json:"hooks"`
	}
	_ = json.Unmarshal(raw, &keys)
	if err := caseOf(file, keys.Hooks); err != nil {
		return nil, nil, err
	}
	return f.Hooks, hookbridge.Locate(file, raw), nil
}

// readTOML reads the [hooks] table of a config.toml (the rest of the
// file is Codex's other settings).
func readTOML(file string, raw []byte) (*events, locator, error) {
	var f struct {
		Hooks *events `toml:"hooks"`
	}
	if err := toml.Unmarshal(raw, &f); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, _ := de.Position()
			return nil, nil, fmt.Errorf("%s:%d: not valid TOML: %v", file, row, de)
		}
		return nil, nil, fmt.Errorf("%s: not valid TOML: %v", file, err)
	}
	if f.Hooks == nil {
		return nil, nil, nil
	}
	var keys struct {
		Hooks map[string]any `toml:"hooks"`
	}
	_ = toml.Unmarshal(raw, &keys)
	if err := caseOf(file, keys.Hooks); err != nil {
		return nil, nil, err
	}
	return f.Hooks, locateTOML(file, raw), nil
}

// caseOf refuses an event named in another case: Codex reads event names
// exactly (and would ignore it), Go's decoders would not.
func caseOf[V any](file string, m map[string]V) error {
	for k := range m {
		for _, e := range codexEvents {
			if k != e && strings.EqualFold(k, e) {
				return fmt.Errorf("%s: hooks event %q: Codex reads it only as %q", file, k, e)
			}
		}
	}
	return nil
}

// add checks and adds a file's hooks; n is how many it has.
func (l *loaded) add(file string, ev *events, at locator) (n int, err error) {
	for _, event := range codexEvents {
		groups := ev.of(event)
		if len(groups) == 0 {
			continue
		}
		switch event {
		case hookbridge.PreToolUse, hookbridge.PostToolUse:
		case "PermissionRequest":
			l.notes = append(l.notes, fmt.Sprintf("%s: PermissionRequest hooks are not run: Codex runs them only where it would ask for approval, and dsh's approvals (ctx.approval) are not seen by this bridge", at.At("hooks/"+event)))
			n += len(groups)
			continue
		default:
			l.notes = append(l.notes, fmt.Sprintf("%s: %s hooks are not run: dsh sees tool calls, not Codex's prompts, turns, sessions, subagents or compactions", at.At("hooks/"+event), event))
			n += len(groups)
			continue
		}
		for gi, g := range groups {
			gpath := fmt.Sprintf("hooks/%s/%d", event, gi)
			var sync, async []hookbridge.Hook
			for hi, h := range g.Hooks {
				hpath := fmt.Sprintf("%s/hooks/%d", gpath, hi)
				where := at.At(hpath)
				if h.Type == nil {
					return 0, fmt.Errorf("%s: a hook with no \"type\" (Codex's are \"command\", \"prompt\" or \"agent\")", where)
				}
				switch *h.Type {
				case "command":
				case "prompt", "agent":
					l.notes = append(l.notes, fmt.Sprintf("%s: a %s hook is skipped: Codex does not run %s hooks yet, nor does dsh", where, *h.Type, *h.Type))
					continue
				default:
					return 0, fmt.Errorf("%s: a hook of type %q: Codex's types are \"command\", \"prompt\" and \"agent\", and dsh will not start with a hook it cannot read", where, *h.Type)
				}
				if h.Command == nil {
					return 0, fmt.Errorf("%s: a command hook with no \"command\"", where)
				}
				command := *h.Command
				if runtime.GOOS == "windows" && h.CommandWindows != nil {
					command = *h.CommandWindows
				}
				if strings.TrimSpace(command) == "" {
					l.notes = append(l.notes, where+": a command hook with an empty command is skipped (as Codex skips it)")
					continue
				}
				secs := uint64(defaultTimeout)
				if h.Timeout != nil {
					secs = *h.Timeout
				} else if h.TimeoutSec != nil {
					secs = *h.TimeoutSec
				}
				timeout := maxHook
				if secs < uint64(maxHook/time.Second) {
					timeout = time.Duration(max(secs, 1)) * time.Second
				}
				hk := hookbridge.Hook{Command: command, Timeout: timeout, Where: where}
				if h.Async {
					async = append(async, hk)
				} else {
					sync = append(sync, hk)
				}
				n++
			}
			matcher, mwhere := "", at.At(gpath)
			if g.Matcher != nil {
				matcher, mwhere = *g.Matcher, at.At(gpath+"/matcher")
			}
			for _, x := range []struct {
				set *hookbridge.Set
				hs  []hookbridge.Hook
			}{{l.sync, sync}, {l.async, async}} {
				if len(x.hs) == 0 {
					continue
				}
				grp, err := hookbridge.NewGroup(event, matcher, mwhere, x.hs)
				if err != nil {
					return 0, err
				}
				x.set.Groups = append(x.set.Groups, grp)
			}
			if len(sync)+len(async) == 0 {
				// A group with nothing to run still has its matcher checked.
				if _, _, err := hookbridge.CompileMatcher(matcher); err != nil {
					return 0, fmt.Errorf("%s: %v", mwhere, err)
				}
			}
		}
	}
	return n, nil
}

// tomlLocator is where the values of a TOML document are, by path
// (keys and array indexes joined by '/', as hookbridge.Locator's).
type tomlLocator struct {
	file  string
	lines map[string]int
}

func (l *tomlLocator) At(path string) string {
	if n, ok := l.lines[path]; ok {
		return fmt.Sprintf("%s:%d", l.file, n)
	}
	return l.file
}

// locateTOML reads the positions of raw's keys, tables and array
// elements; raw must be valid TOML.
func locateTOML(file string, raw []byte) *tomlLocator {
	l := &tomlLocator{file: file, lines: map[string]int{}}
	var p unstable.Parser
	p.Reset(raw)
	counts := map[string]int{} // arrays of tables, by path: how many so far
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		return a + "/" + b
	}
	var lineOf func(n *unstable.Node) int
	lineOf = func(n *unstable.Node) int {
		if n.Raw.Length > 0 {
			return p.Shape(n.Raw).Start.Line
		}
		for c := n.Children(); c.Next(); {
			if ln := lineOf(c.Node()); ln > 0 {
				return ln
			}
		}
		return 0
	}
	set := func(path string, ln int) {
		if _, ok := l.lines[path]; !ok && ln > 0 {
			l.lines[path] = ln
		}
	}
	keys := func(n *unstable.Node) (parts []string, line int) {
		for it := n.Key(); it.Next(); {
			k := it.Node()
			if line == 0 {
				line = lineOf(k)
			}
			parts = append(parts, string(k.Data))
		}
		return parts, line
	}
	// resolve is a header's path: a key naming an array of tables means
	// its last element.
	resolve := func(parts []string) string {
		path := ""
		for _, k := range parts {
			path = join(path, k)
			if c, ok := counts[path]; ok {
				path = join(path, strconv.Itoa(c-1))
			}
		}
		return path
	}
	var keyval func(kv *unstable.Node, base string)
	var value func(v *unstable.Node, path string)
	keyval = func(kv *unstable.Node, base string) {
		parts, ln := keys(kv)
		path := base
		for _, k := range parts {
			path = join(path, k)
			set(path, ln)
		}
		value(kv.Value(), path)
	}
	value = func(v *unstable.Node, path string) {
		switch v.Kind {
		case unstable.InlineTable:
			for c := v.Children(); c.Next(); {
				if c.Node().Kind == unstable.KeyValue {
					keyval(c.Node(), path)
				}
			}
		case unstable.Array:
			i := 0
			for c := v.Children(); c.Next(); {
				e := c.Node()
				if e.Kind == unstable.Comment {
					continue
				}
				ep := join(path, strconv.Itoa(i))
				set(ep, lineOf(e))
				value(e, ep)
				i++
			}
		}
	}
	prefix := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			parts, ln := keys(e)
			prefix = resolve(parts)
			set(prefix, ln)
		case unstable.ArrayTable:
			parts, ln := keys(e)
			arr := join(resolve(parts[:len(parts)-1]), parts[len(parts)-1])
			i := counts[arr]
			counts[arr] = i + 1
			prefix = join(arr, strconv.Itoa(i))
			set(arr, ln)
			set(prefix, ln)
		case unstable.KeyValue:
			keyval(e, prefix)
		}
	}
	return l
}
