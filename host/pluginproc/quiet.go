package pluginproc

import (
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// quietStops is the logger go-plugin gets. Its line on the plugin's exit
// is kept as the Process's ExitReason and logged at debug: the host says
// in its own words what the exit means (a crash, a stop it made);
// go-plugin's steps of a start that went as it should
// are at trace, which leaves "plugin started" (path, pid) at debug; the
// plugin's own lines are relayed under the entry's name (relayed).
type quietStops struct {
	hclog.Logger
	binary string // the base name of the plugin's binary: go-plugin names the plugin's lines with it
	note   *exitNote
}

// exitNote is go-plugin's word on how the process ended, once it said it.
type exitNote struct {
	once sync.Once
	said chan struct{}
	text string
}

// exited records the text of go-plugin's exit line (args as it logs them).
func (l quietStops) exited(args []any) {
	if l.note == nil {
		return
	}
	text := "exit status 0"
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "error" {
			text, _ = args[i+1].(string)
		}
	}
	l.note.once.Do(func() {
		l.note.text = text
		close(l.note.said)
	})
}

func (l quietStops) Info(msg string, args ...any) {
	if msg == exitLine {
		l.exited(args)
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Info(msg, args...)
}

// chatter are go-plugin's messages about a start or stop that went as it
// should, and the plugin's own announcement of its address.
var chatter = map[string]bool{
	"starting plugin":                  true,
	"waiting for RPC address":          true,
	"using plugin":                     true,
	"plugin address":                   true,
	"received EOF, stopping recv loop": true,
}

func (l quietStops) Debug(msg string, args ...any) {
	if chatter[msg] {
		l.Logger.Trace(msg, args...)
		return
	}
	l.Logger.Debug(msg, args...)
}

func (l quietStops) Error(msg string, args ...any) {
	if msg == exitLine {
		l.exited(args)
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Error(msg, args...)
}

// exitLine is go-plugin's message once it has reaped the plugin.
const exitLine = "plugin process exited"

// Named is go-plugin naming a logger: its stderr relay names one after
// the plugin's binary, which the entry's name already says.
func (l quietStops) Named(name string) hclog.Logger {
	if l.binary != "" && name == l.binary {
		return relayed{quietStops{Logger: l.Logger}}
	}
	return quietStops{l.Logger.Named(name), l.binary, l.note}
}
func (l quietStops) ResetNamed(name string) hclog.Logger {
	return quietStops{l.Logger.ResetNamed(name), l.binary, l.note}
}
func (l quietStops) With(args ...any) hclog.Logger {
	return quietStops{l.Logger.With(args...), l.binary, l.note}
}

// relayed logs the lines a plugin wrote to its stderr as go-plugin hands
// them over: with the plugin's time stamp and logger name added as keys
// (the host's line has its own), and the other keys in a map's order,
// which changes from line to line. They go without the two, the rest
// sorted by key.
type relayed struct{ quietStops }

func (l relayed) Log(level hclog.Level, msg string, args ...any) {
	l.quietStops.Log(level, msg, relayArgs(args)...)
}
func (l relayed) Trace(msg string, args ...any) { l.quietStops.Trace(msg, relayArgs(args)...) }
func (l relayed) Debug(msg string, args ...any) { l.quietStops.Debug(msg, relayArgs(args)...) }
func (l relayed) Info(msg string, args ...any)  { l.quietStops.Info(msg, relayArgs(args)...) }
func (l relayed) Warn(msg string, args ...any)  { l.quietStops.Warn(msg, relayArgs(args)...) }
func (l relayed) Error(msg string, args ...any) { l.quietStops.Error(msg, relayArgs(args)...) }

// relayArgs are a relayed line's pairs, sorted by key, without the ones
// go-plugin adds.
func relayArgs(args []any) []any {
	type kv struct {
		k string
		v any
	}
	var kvs []kv
	for i := 0; i+1 < len(args); i += 2 {
		k, ok := args[i].(string)
		if !ok || k == "timestamp" || k == "@module" {
			continue
		}
		kvs = append(kvs, kv{k, args[i+1]})
	}
	sort.SliceStable(kvs, func(a, b int) bool { return kvs[a].k < kvs[b].k })
	out := make([]any, 0, 2*len(kvs))
	for _, p := range kvs {
		out = append(out, p.k, p.v)
	}
	return out
}
