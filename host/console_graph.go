package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/dshrun/dsh/host/hostlog"
	"github.com/dshrun/dsh/host/plan"
	"github.com/dshrun/dsh/internal/notify"
	"github.com/dshrun/dsh/registry"
)

// The composition as the console shows it: every entry with its state,
// what it provides and consumes, where the file has it and what last went
// wrong with it; and a signal on every change, which costs nothing while
// nobody follows it.

// EntryView is one entry of the composition for the console: its status,
// the sha256 of its binary (the pin, or the binary's own when unpinned),
// the keys its plugin injects, its place in the file and the last error
// its load, start or crash met (nil when none since its last change).
type EntryView struct {
	EntryStatus
	SHA256    string
	Consumes  []Dep
	File      string
	Line      int
	LastError *PosError
}

// Dep is a key an entry's plugin injects.
type Dep struct {
	Key      string `json:"key"`
	Optional bool   `json:"optional"`
}

// PosError is an error at a place in the composition file.
type PosError struct {
	Message string `json:"message"`
	File    string `json:"file"`
	Line    int    `json:"line"`
}

// entryViewJSON is EntryView on the wire: EntryStatus's keys, then the
// view's own; lists are never null.
type entryViewJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Binary    string    `json:"binary"`
	SHA256    string    `json:"sha256"`
	Disabled  bool      `json:"disabled"`
	State     string    `json:"state"`
	Reason    string    `json:"reason"`
	Pid       int       `json:"pid"`
	Restarts  int       `json:"restarts"`
	UptimeMs  int64     `json:"uptimeMs"`
	Version   string    `json:"version"`
	Provides  []string  `json:"provides"`
	Consumes  []Dep     `json:"consumes"`
	Tools     []string  `json:"tools"`
	File      string    `json:"file"`
	Line      int       `json:"line"`
	LastError *PosError `json:"lastError"`
}

// MarshalJSON is the console's shape of an entry (without it the
// embedded EntryStatus's would be used, and the view's own fields lost).
func (v EntryView) MarshalJSON() ([]byte, error) {
	orEmpty := func(v []string) []string {
		if v == nil {
			return []string{}
		}
		return v
	}
	consumes := v.Consumes
	if consumes == nil {
		consumes = []Dep{}
	}
	return json.Marshal(entryViewJSON{
		ID: v.ID, Name: v.Name, Binary: v.Binary, SHA256: v.SHA256, Disabled: v.Disabled,
		State: v.State, Reason: v.Reason, Pid: v.Pid, Restarts: v.Restarts,
		UptimeMs: v.Uptime.Milliseconds(), Version: v.Version,
		Provides: orEmpty(v.Provides), Consumes: consumes, Tools: orEmpty(v.Tools),
		File: v.File, Line: v.Line, LastError: v.LastError,
	})
}

// consoleState is what the host keeps for the console.
type consoleState struct {
	changes notify.Set
	// lookup interpolates a composition text as the file was at start.
	lookup func(string) (string, bool)

	mu       sync.Mutex
	lastErrs map[string]lastError // by entry id
	sums     map[string]binarySum // by binary path
}

// lastError is an entry's last error, and whether it came from the
// running process (a crash, a failed scope), which stays until the entry
// is loaded anew, or from a change refused, which a change made since
// makes old.
type lastError struct {
	pe      *PosError
	running bool
}

type binarySum struct {
	st  fileStamp
	sum string
}

// Graph describes every entry of the composition, in its order.
func (h *Host) Graph() []EntryView {
	entries := h.entryList()
	out := make([]EntryView, 0, len(entries))
	for _, en := range entries {
		v := EntryView{EntryStatus: en.status()}
		e, bin, desc := en.view()
		v.File, v.Line = e.Pos.File, e.Pos.Line
		v.SHA256 = strings.ToLower(e.SHA256)
		if v.SHA256 == "" && bin != "" {
			v.SHA256 = h.binarySum(bin)
		}
		if desc != nil {
			for _, in := range desc.Inject {
				v.Consumes = append(v.Consumes, Dep{Key: in.Key, Optional: in.Optional})
			}
		}
		h.console.mu.Lock()
		if le, ok := h.console.lastErrs[en.id]; ok {
			c := *le.pe
			v.LastError = &c
		}
		h.console.mu.Unlock()
		out = append(out, v)
	}
	return out
}

// Changes signals every change of what Graph shows but the uptimes: a
// state, a crash, a restart, a reload, an edit applied. Signals coalesce:
// a reader that is busy finds one waiting. stop ends the subscription.
func (h *Host) Changes() (changes <-chan struct{}, stop func()) {
	return h.console.changes.Subscribe()
}

// LogRing is the ring the host's and its plugins' log lines go to (nil
// when Options gave none).
func (h *Host) LogRing() *hostlog.Ring { return h.opts.LogRing }

// changed signals the console that something Graph shows changed.
func (h *Host) changed() { h.console.changes.Fire() }

// noteError records err, a change refused, as the last error of the
// entries it names.
func (h *Host) noteError(err error) {
	var le *LoadError
	var errs []error
	if errors.As(err, &le) {
		errs = le.Problems()
	} else {
		errs = plan.Flatten(err)
	}
	for _, e := range errs {
		var pe *EntryError
		if errors.As(e, &pe) && pe.ID != "" {
			h.setLastError(pe.ID, lastError{pe: &PosError{Message: pe.Err.Error(), File: pe.Pos.File, Line: pe.Pos.Line}})
		}
	}
}

// noteEntryError records msg, of en's running process, as its last
// error, at its place.
func (h *Host) noteEntryError(en *entry, msg string) {
	e, _, _ := en.view()
	h.setLastError(en.id, lastError{pe: &PosError{Message: msg, File: e.Pos.File, Line: e.Pos.Line}, running: true})
}

func (h *Host) setLastError(id string, le lastError) {
	h.console.mu.Lock()
	if h.console.lastErrs == nil {
		h.console.lastErrs = map[string]lastError{}
	}
	h.console.lastErrs[id] = le
	h.console.mu.Unlock()
	h.changed()
}

// clearLastError forgets an entry's last error: it was loaded anew.
func (h *Host) clearLastError(id string) {
	h.console.mu.Lock()
	delete(h.console.lastErrs, id)
	h.console.mu.Unlock()
}

// clearRefused forgets the errors of changes refused: a change went
// through since.
func (h *Host) clearRefused() {
	h.console.mu.Lock()
	defer h.console.mu.Unlock()
	for id, le := range h.console.lastErrs {
		if !le.running {
			delete(h.console.lastErrs, id)
		}
	}
}

// observeFailed keeps why a scope failed as its entry's last error.
func (h *Host) observeFailed(ev registry.Event) {
	if ev.To != registry.Failed {
		return
	}
	id, _, _ := strings.Cut(ev.Scope, "#") // a reload's scope is id#n
	if en := h.find(id); en != nil {
		h.noteEntryError(en, ev.Reason)
	}
}

// binarySum is the sha256 of bin, computed again only when its stamp
// changes.
func (h *Host) binarySum(bin string) string {
	st := stamp(bin)
	h.console.mu.Lock()
	if s, ok := h.console.sums[bin]; ok && s.st == st {
		h.console.mu.Unlock()
		return s.sum
	}
	h.console.mu.Unlock()
	f, err := os.Open(bin)
	if err != nil {
		return ""
	}
	defer f.Close()
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return ""
	}
	sum := hex.EncodeToString(hash.Sum(nil))
	h.console.mu.Lock()
	if h.console.sums == nil {
		h.console.sums = map[string]binarySum{}
	}
	h.console.sums[bin] = binarySum{st, sum}
	h.console.mu.Unlock()
	return sum
}
