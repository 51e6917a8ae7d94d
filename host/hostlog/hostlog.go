// Package hostlog gives every line the host logs the same shape, whoever
// wrote it (the host, or a plugin whose lines the host relays):
//
//	TIME [LEVEL] dsh.ENTRY: message: key=value ...
//
// one time stamp, the entry (or host part) as the logger's name, then the
// keys that say who and what the line is about, always in the same order
// (Lead), then the rest in the order they were given. A key whose value
// is empty is left out; a duration reads as one ("1.5s"), in JSON too.
//
// It also keeps the last lines, the host's and each plugin's, in a Ring
// the console reads back and follows.
package hostlog

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// Lead are the keys that open a line's key-value pairs, in this order,
// when it has them: the composition entry, the plugin, the agent
// (owner), the tool, the job or terminal session, the command.
var Lead = []string{"entry", "plugin", "owner", "tool", "job", "session", "command"}

// New is hclog.New with the host's line shape.
func New(opts *hclog.LoggerOptions) hclog.Logger { return Wrap(hclog.New(opts)) }

// Wrap gives l's lines the host's shape.
func Wrap(l hclog.Logger) hclog.Logger {
	if w, ok := l.(logger); ok {
		return w
	}
	return logger{Logger: l}
}

// logger keeps its own implied arguments (With) so that they are ordered
// with the line's own.
type logger struct {
	hclog.Logger
	implied []any
}

func (l logger) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, l.tidy(args)...)
}
func (l logger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l logger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l logger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l logger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l logger) ImpliedArgs() []any { return append([]any(nil), l.implied...) }

func (l logger) With(args ...any) hclog.Logger {
	return logger{Logger: l.Logger, implied: append(append([]any(nil), l.implied...), args...)}
}

func (l logger) Named(name string) hclog.Logger {
	return logger{Logger: l.Logger.Named(name), implied: l.implied}
}

func (l logger) ResetNamed(name string) hclog.Logger {
	return logger{Logger: l.Logger.ResetNamed(name), implied: l.implied}
}

// tidy is the line's pairs (the implied ones first) in the host's order,
// without the empty ones.
func (l logger) tidy(args []any) []any {
	if len(l.implied) > 0 {
		args = append(append([]any(nil), l.implied...), args...)
	}
	return Tidy(args)
}

// Tidy orders key-value pairs as the host logs them: the Lead keys first,
// in Lead's order, then the rest as given; a pair whose value is an empty
// string or nil is dropped, and a time.Duration becomes its text. A
// trailing key without a value is kept as hclog shows it.
func Tidy(args []any) []any {
	out := make([]any, 0, len(args))
	lead := make([]any, 2*len(Lead))
	var odd []any
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			odd = args[i:]
			break
		}
		k, v := args[i], args[i+1]
		switch x := v.(type) {
		case nil:
			continue
		case string:
			if x == "" {
				continue
			}
		case time.Duration:
			v = x.String()
		}
		if ks, ok := k.(string); ok {
			if n := leadIndex(ks); n >= 0 && lead[2*n] == nil {
				lead[2*n], lead[2*n+1] = k, v
				continue
			}
		}
		out = append(out, k, v)
	}
	head := make([]any, 0, len(args))
	for i := 0; i < len(lead); i += 2 {
		if lead[i] != nil {
			head = append(head, lead[i], lead[i+1])
		}
	}
	return append(append(head, out...), odd...)
}

func leadIndex(k string) int {
	for i, l := range Lead {
		if l == k {
			return i
		}
	}
	return -1
}
