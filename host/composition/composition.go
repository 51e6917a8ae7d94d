package composition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Host timeouts used when the host section leaves them out.
const (
	defaultStartTimeout = 10 * time.Second
	defaultStopTimeout  = 5 * time.Second
)

// Composition is a composition file, read, interpolated and checked.
type Composition struct {
	File string // absolute path of the file
	Dir  string // its directory; path entries are relative to it
	Host HostSettings
	// Sandbox is the sandbox policy; nil when the file has no sandbox
	// section (no executor may sandbox then).
	Sandbox *Sandbox
	// Approval is how ctx.approval decides; nil when the file has no
	// approval section (every request is denied then).
	Approval *Approval
	// Clients is how MCP clients' owners end and which tokens they may
	// use; nil when the file has no clients section (OwnersConnection).
	Clients  *Clients
	Settings map[string]map[string]any // namespace -> settings; never nil
	Plugins  []Entry                   // in file order, disabled ones included

	settingsTaint *taint
	settingsPlace *place // where the settings values are written
}

// HostSettings is the host section.
type HostSettings struct {
	StartTimeout time.Duration // bound on a plugin's handshake
	StopTimeout  time.Duration // bound on each plugin stop
	// CallTimeout bounds every call the host forwards to a plugin; 0 means
	// the shell's maxTimeoutMs plus its grace plus 10s.
	CallTimeout time.Duration
	// PingInterval and PingTimeout pace the pulse: the host asks each
	// plugin for its health every PingInterval, each ask bounded by
	// PingTimeout; 0 means 1s and 2s.
	PingInterval, PingTimeout time.Duration
	// RestartWait bounds how long a call waits for a provider that is
	// restarting after a crash; 0 means as long as a restart may take (the
	// longest backoff short of a crash loop, StartTimeout and the apply's
	// bound).
	RestartWait time.Duration
	Scrub       Scrub // what of the host's environment commands never see
	Spill       Spill // the disk budgets of spill files (spill.go)
}

// Scrub is host.scrub: additions to the built-in credential rule
// (package credential), for the scrub of the host's environment and the
// masking of `dsh config` alike.
type Scrub struct {
	// Extra lists more name substrings (case-insensitive) that mark a
	// credential, beside the built-in words and segments.
	Extra []string
	// Keep lists exact variable names passed on (and printed) even though
	// they look like credentials.
	Keep []string
}

// Entry is one element of plugins.
type Entry struct {
	ID        string
	Name      string // short name ("shell-env"), "" when Path is used
	Path      string // as written, "" when Name is used
	SHA256    string // lowercase hex, or ""
	Config    map[string]any
	Disabled  bool
	Pos       Pos // where the entry starts
	ConfigPos Pos // where config: is, or Pos when there is none

	taint *taint // which values came from secret-looking variables
	place *place // where its values are written
}

// BinaryName returns the file name of the entry's binary: "dsh-<name>" for a
// name entry, the base name of the path for a path entry, "" for neither.
func (e Entry) BinaryName() string {
	switch {
	case e.Name != "":
		return "dsh-" + e.Name
	case e.Path != "":
		return filepath.Base(filepath.FromSlash(e.Path))
	}
	return ""
}

// Pos is a place in a composition file.
type Pos struct {
	File         string
	Line, Column int // 1-based; 0 when unknown
}

// String returns "file:line:column" ("file:line" when the column is not
// known), the file relative to the working directory when it lies below
// it.
func (p Pos) String() string {
	f := displayPath(p.File)
	if f == "" {
		f = "<composition>"
	}
	switch {
	case p.Line <= 0:
		return f
	case p.Column <= 0:
		return fmt.Sprintf("%s:%d", f, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", f, p.Line, p.Column)
}

func displayPath(f string) string {
	if !filepath.IsAbs(f) {
		return f
	}
	wd, err := os.Getwd()
	if err != nil {
		return f
	}
	rel, err := filepath.Rel(wd, f)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return f
	}
	return rel
}

// Error is a problem with a composition, at a place in its file. Load and
// Parse return one *Error, or several joined with errors.Join (ordered by
// line); Resolve and ValidateConfig do the same.
type Error struct {
	Pos Pos
	ID  string // id of the plugin entry concerned, "" when none
	Msg string

	err error // underlying error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.String())
	b.WriteString(": ")
	if e.ID != "" {
		fmt.Fprintf(&b, "plugin %q: ", e.ID)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error (an I/O error, for instance), or nil.
func (e *Error) Unwrap() error { return e.err }

// joinErrors orders errs by place and joins them; nil when there are none.
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Pos, errs[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// Load reads the composition file at path, interpolates it with lookup
// (usually os.LookupEnv; nil means os.LookupEnv) and checks it statically.
// Every problem found is returned, each with its file and line.
func Load(path string, lookup func(string) (string, bool)) (*Composition, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{Pos: Pos{File: path}, Msg: err.Error(), err: err}
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, &Error{Pos: Pos{File: abs}, Msg: "cannot read the composition: " + msg, err: err}
	}
	return parse(abs, abs, data, lookup)
}

// Parse is Load on data; file names the file in positions (and, made
// absolute, gives Composition.File and Dir).
func Parse(file string, data []byte, lookup func(string) (string, bool)) (*Composition, error) {
	abs := file
	if a, err := filepath.Abs(file); err == nil && file != "" {
		abs = a
	}
	return parse(file, abs, data, lookup)
}
