package pluginproc

import (
	"strings"

	"github.com/hashicorp/go-hclog"
)

// quietStops is the logger go-plugin gets: the exit of a plugin the host
// stopped itself (its command's context cancelled) is no error, and
// logged at debug; every other line is as go-plugin logs it.
type quietStops struct{ hclog.Logger }

func (l quietStops) Error(msg string, args ...any) {
	if msg == "plugin process exited" && stoppedByHost(args) {
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Error(msg, args...)
}

// stoppedByHost reports whether key-value args carry the error of a
// cancelled command.
func stoppedByHost(args []any) bool {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "error" {
			v, _ := args[i+1].(string)
			return strings.Contains(v, "context canceled")
		}
	}
	return false
}

func (l quietStops) Named(name string) hclog.Logger { return quietStops{l.Logger.Named(name)} }
func (l quietStops) ResetNamed(name string) hclog.Logger {
	return quietStops{l.Logger.ResetNamed(name)}
}
func (l quietStops) With(args ...any) hclog.Logger { return quietStops{l.Logger.With(args...)} }
