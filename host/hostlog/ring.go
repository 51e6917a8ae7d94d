package hostlog

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Line is one logged line as the ring keeps it: Entry is the composition
// entry whose plugin wrote it, "" for the host's own lines; Level is
// hclog's word for it (trace, debug, info, warn, error).
type Line struct {
	Time    time.Time         `json:"time"`
	Level   string            `json:"level"`
	Entry   string            `json:"entry"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields"`
}

// MarshalJSON writes fields as {} when the line has none.
func (l Line) MarshalJSON() ([]byte, error) {
	type plain Line
	if l.Fields == nil {
		l.Fields = map[string]string{}
	}
	return json.Marshal(plain(l))
}

// DefaultRingSize is how many lines a ring keeps unless told otherwise.
const DefaultRingSize = 5000

// subBuffer is how many lines a subscriber may fall behind before lines
// are dropped for it.
const subBuffer = 256

// Ring keeps the last lines the host and its plugins logged, for the
// console to read back and follow. Logging into it never waits for a
// reader: a subscriber that falls behind loses lines.
type Ring struct {
	mu    sync.Mutex
	size  int
	lines []Line // grows to size, then circular
	next  int    // where the next line goes once full
	subs  map[*sub]struct{}
}

type sub struct{ ch chan Line }

// NewRing keeps the last size lines (DefaultRingSize when size <= 0).
func NewRing(size int) *Ring {
	if size <= 0 {
		size = DefaultRingSize
	}
	return &Ring{size: size, subs: map[*sub]struct{}{}}
}

func (r *Ring) add(l Line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < r.size {
		r.lines = append(r.lines, l)
	} else {
		r.lines[r.next] = l
		r.next = (r.next + 1) % len(r.lines)
	}
	for s := range r.subs {
		select {
		case s.ch <- l:
		default: // it fell behind: this line is lost to it
		}
	}
}

// Recent is the newest n lines (all kept when n <= 0), oldest first, of
// entry (AllEntries: every line; "" the host's own) at level or above
// ("" any level).
func (r *Ring) Recent(entry, level string, n int) []Line {
	min := hclog.NoLevel
	if level != "" {
		min = hclog.LevelFromString(level)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Line
	count := len(r.lines)
	for i := count - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		l := r.lines[(r.next+i)%count]
		if entry != AllEntries && l.Entry != entry {
			continue
		}
		if min != hclog.NoLevel && hclog.LevelFromString(l.Level) < min {
			continue
		}
		out = append(out, l)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// AllEntries asks Recent for the lines of every entry and of the host.
const AllEntries = "*"

// Subscribe follows the lines logged from now on until stop is called. A
// subscriber that does not keep up loses lines rather than holding up
// whoever logs.
func (r *Ring) Subscribe() (lines <-chan Line, stop func()) {
	s := &sub{ch: make(chan Line, subBuffer)}
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.subs, s)
			r.mu.Unlock()
		})
	}
}

// Host is l whose lines also go to r as the host's own (entry "").
func (r *Ring) Host(l hclog.Logger) hclog.Logger { return r.tee(l, false) }

// Plugins is l whose lines also go to r as those of an entry: the name
// the host gives l for a plugin's lines (Named(entry id)) is the entry.
func (r *Ring) Plugins(l hclog.Logger) hclog.Logger { return r.tee(l, true) }

// tee puts the ring under the host's line shape, so that a line is tidied
// once and the ring sees it as it is written.
func (r *Ring) tee(l hclog.Logger, byName bool) hclog.Logger {
	w, ok := l.(logger)
	if !ok {
		w = logger{Logger: l}
	}
	w.Logger = tee{Logger: w.Logger, ring: r, byName: byName}
	return w
}

// tee copies every line its logger lets through into the ring.
type tee struct {
	hclog.Logger
	ring   *Ring
	entry  string
	byName bool // the next Named names the entry
}

func (t tee) Log(level hclog.Level, msg string, args ...any) {
	t.Logger.Log(level, msg, args...)
	if level < t.Logger.GetLevel() {
		return
	}
	t.ring.add(Line{Time: time.Now(), Level: levelWord(level), Entry: t.entry, Message: msg, Fields: fields(t.Logger.ImpliedArgs(), args)})
}
func (t tee) Trace(msg string, args ...any) { t.Log(hclog.Trace, msg, args...) }
func (t tee) Debug(msg string, args ...any) { t.Log(hclog.Debug, msg, args...) }
func (t tee) Info(msg string, args ...any)  { t.Log(hclog.Info, msg, args...) }
func (t tee) Warn(msg string, args ...any)  { t.Log(hclog.Warn, msg, args...) }
func (t tee) Error(msg string, args ...any) { t.Log(hclog.Error, msg, args...) }

func (t tee) With(args ...any) hclog.Logger {
	t.Logger = t.Logger.With(args...)
	return t
}

func (t tee) Named(name string) hclog.Logger {
	t.Logger = t.Logger.Named(name)
	if t.byName {
		t.entry, t.byName = name, false
	}
	return t
}

func (t tee) ResetNamed(name string) hclog.Logger {
	t.Logger = t.Logger.ResetNamed(name)
	return t
}

func levelWord(l hclog.Level) string {
	switch l {
	case hclog.Trace:
		return "trace"
	case hclog.Debug:
		return "debug"
	case hclog.Warn:
		return "warn"
	case hclog.Error:
		return "error"
	}
	return "info"
}

// fields are a line's key-value pairs as text; a key without a value
// (hclog's odd trailing argument) reads as hclog shows it.
func fields(implied, args []any) map[string]string {
	if len(implied)+len(args) == 0 {
		return nil
	}
	m := make(map[string]string, (len(implied)+len(args)+1)/2)
	for _, kv := range [][]any{implied, args} {
		for i := 0; i < len(kv); i += 2 {
			k := fmt.Sprint(kv[i])
			if i+1 == len(kv) {
				m[hclog.MissingKey] = k
				break
			}
			m[k] = text(kv[i+1])
		}
	}
	return m
}

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	case []string:
		return "[" + strings.Join(x, " ") + "]"
	}
	return fmt.Sprint(v)
}
