// Package termsessions is the host's ctx.terminals: the registry of persistent
// terminal sessions. It owns session ids (unguessable handles it makes),
// the owner of each session (an agent; every access names it, and another
// owner's session is not there), the backends published by name (a
// registration is an effect of the registering plugin's scope, taken over
// by another process of the same entry), the cap on sessions per owner,
// one send at a time per session, and cleanup it waits for: a session's
// close, its owner's release and the host's stop end its process tree and
// return once it is gone.
//
// A session's terminal is ctx.subprocess's (host/procs), started
// by the session's backend plugin through SpawnTerminal while acting for
// the session's owner, then claimed here: the registry is its one reader.
// The backend is reached for what depends on the shell (starting it, and
// how typed text becomes input); the rest (output, the prompt, signals,
// size, the end) is the terminal's, so a session lives on across its
// backend's reloads and crashes and works with its successor.
//
// It holds no status codes (core/terminals' adapters give them) and no
// words for the model (the tools own those).
package termsessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions/screen"
	"github.com/dshrun/dsh/host/termsessions/settle"
	"github.com/dshrun/dsh/plugins/termbackend"
	"github.com/dshrun/dsh/sdk"
)

// Slot is where a backend plugin entry serves: the process in it may be
// replaced (a restart in place) while the slot stays, and a new scope of
// the entry (a reload) has a slot of its own. Values are compared to tell
// one slot from another.
type Slot interface {
	// Live reports whether the slot's scope still serves.
	Live() bool
	// Reach is a connection to the slot's current process on which every
	// call acts for owner, under call: a call id of owner's, made for it,
	// that reaches the plugin (so what the plugin spawns meanwhile is
	// owner's). end forgets the call.
	Reach(owner string) (conn grpc.ClientConnInterface, call string, end func())
}

// Caller is the plugin that registers a backend, as the host knows it.
type Caller interface {
	// ID is the plugin's entry id; Label names it in messages.
	ID() string
	Label() string
	// Serving is the slot the calling process serves in; ok is false for
	// a caller that serves nothing.
	Serving() (slot Slot, ok bool)
	// AddEffect adds dispose to the caller's scope, to run when it goes.
	AddEffect(label string, dispose func(context.Context) error) error
}

// Screen is what may watch a session's terminal in the host: a terminal
// emulator fed with its output (Terminal.Observe) that answers the
// program's queries through Terminal.Input, told of each resize and closed
// with the session (a *screen.Screen of host/termsessions/screen is
// one).
type Screen interface {
	Resize(cols, rows int)
	Close() error
}

// Viewer is a Screen a model can look at: a *screen.Screen's Read (the
// viewport, then the unread scrollback within budget characters).
type Viewer interface {
	Read(budget int) screen.Read
}

// AttachScreen attaches a screen.Screen to session id's terminal: fed
// with its output, answering its queries through the terminal's input.
// When the emulator fails on what the program printed (the screen is then
// reset, and the model told), log says so at warn.
func AttachScreen(id string, t *procs.Terminal, log hclog.Logger) Screen {
	cols, rows := t.Size()
	sc := screen.New(cols, rows, t.Input())
	sc.OnReset(logReset(log, id))
	t.Observe(sc)
	return sc
}

// logReset logs a reset of session id's screen. The stack is where the
// emulator failed: what a report of its fault needs.
func logReset(log hclog.Logger, id string) func(screen.Failure) {
	return func(f screen.Failure) {
		log.Warn("a terminal's screen was reset: its emulator failed", "session", id, "during", f.Op, "panic", fmt.Sprint(f.Panic), "stack", string(f.Stack))
	}
}

// Config configures a Manager.
type Config struct {
	// Sub is the host's ctx.subprocess, where the sessions' terminals are.
	Sub *procs.Manager
	// MaxPerOwner caps the sessions of one owner; 0 means 128.
	MaxPerOwner int
	// Attach is called once for each session as it opens, before anything
	// reads its terminal; the Screen it returns (nil for none) follows the
	// session. Nil means AttachScreen, logging to Logger: a screen.Screen
	// on every session.
	Attach func(id string, t *procs.Terminal) Screen
	// IdleAfter is how long a send's output must be quiet, with no read
	// of the terminal seen and no process of the foreground seen running,
	// to settle as inferred_idle; 0 means 1.5 s.
	IdleAfter time.Duration
	// Check tells whether a session's foreground waits to read its
	// terminal; nil means settle.Check.
	Check  func(master *os.File, shellPid int) (settle.Result, error)
	Logger hclog.Logger
	// SandboxSettle undoes what a confined session's commands created
	// that no runner can stop (ctx.sandbox's Settle of the watch the
	// backend started the shell under, Started.settle); with keep the
	// watch goes on under next. Nil: nothing is settled.
	SandboxSettle func(ctx context.Context, token string, keep bool) (next string, undone []*sandbox.Undone, err error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Session is one terminal session.
type Session struct {
	ID, Owner, Name string
	Backend         string // the name it was opened with
	Dialect         string
	Cwd             string
	Opened          time.Time

	prompt []byte // what the shell prints as its prompt (the dialect's)
	term   *procs.Terminal
	screen Screen
	open   bool // started and claimed; false while Open runs

	readMu  sync.Mutex
	tail    []byte   // the end of the output read so far
	sending bool     // a Send is in flight; Manager.mu
	running bool     // and it is a run (Settle with a capture); Manager.mu
	run     *capture // the run's capture while it goes on; Manager.mu

	watchMu sync.Mutex
	watch   string // the sandbox's watch of the shell; "" for none, or once settled for good
}

// Terminal is the session's terminal (nil while it opens): its master and
// its shell's pid are there for what inspects it in the host.
func (s *Session) Terminal() *procs.Terminal { return s.term }

// Info is a session as callers see it.
type Info struct {
	ID, Name, Backend, Dialect, Cwd string
	Cols, Rows, Pid                 int
	Opened                          time.Time
	// Exited once the shell ended, with its exit code or the signal that
	// ended it.
	Exited   bool
	ExitCode int
	Signal   string
}

// Output is one consuming read of a session.
type Output struct {
	Info
	Data    []byte
	Dropped int64
	// AtPrompt: the output so far ends at the shell's prompt.
	AtPrompt bool
	// Screen is the look at the screen after the read (HasScreen false
	// for a session with no Viewer).
	Screen    screen.Read
	HasScreen bool
}

// OpenRequest is what Open is asked.
type OpenRequest struct {
	Backend, Name, Cwd string
	Cols, Rows         int
}

// backend is a registered backend.
type backend struct {
	name, dialect string
	plugin, label string // the registering entry
	slot          Slot
}

// Manager holds the sessions and the backends. Safe for concurrent use.
type Manager struct {
	cfg Config
	log hclog.Logger

	mu       sync.Mutex
	next     int
	sessions map[string]*Session
	backends map[string]*backend
	released map[string]bool // owners whose release ran: never live again
	closed   bool
}

// New makes a Manager.
func New(cfg Config) *Manager {
	if cfg.MaxPerOwner <= 0 {
		cfg.MaxPerOwner = terminals.MaxPerOwner
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Attach == nil {
		log := cfg.Logger
		cfg.Attach = func(id string, t *procs.Terminal) Screen { return AttachScreen(id, t, log) }
	}
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	if cfg.Check == nil {
		cfg.Check = settle.Check
	}
	return &Manager{cfg: cfg, log: cfg.Logger, sessions: map[string]*Session{}, backends: map[string]*backend{}, released: map[string]bool{}}
}

// The bounds of what a request may name.
var (
	backendName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	sessionName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// Timeouts of the host's own waits.
const (
	// cleanupTimeout bounds the close of what a failed open left.
	cleanupTimeout = 10 * time.Second
	// tailBytes is how much of a session's output end is kept to
	// recognise its prompt.
	tailBytes = 4 << 10
	// settleQuiet and settleMax bound the wait between a signal and the
	// text sent with it.
	settleQuiet = 100 * time.Millisecond
	settleMax   = 2 * time.Second
	// DefaultIdleAfter is Config.IdleAfter's default.
	DefaultIdleAfter = 1500 * time.Millisecond
	// firstLook is how long output must be quiet before a send's wait
	// looks whether the foreground reads the terminal (a look is two
	// passes over /proc a few milliseconds apart, about 0.3 ms of CPU); a
	// program that prints is not waiting for input. Each look that finds
	// no read doubles the time to the next, up to lookEvery, so a quiet
	// command costs little however long it runs; new output starts over.
	firstLook = 20 * time.Millisecond
	lookEvery = 160 * time.Millisecond
	// pollEvery is how often a send's wait watches the output counter.
	pollEvery = 10 * time.Millisecond
)

var (
	errDisposing = terminals.Errorf(terminals.ErrServiceDisposing, "the host is shutting down: terminal sessions are being closed")
)

func errNotLive(owner string) error {
	return terminals.Errorf(terminals.ErrOwnerNotLive, fmt.Sprintf("owner %s is gone (its session ended): its terminals were closed and no more are opened for it", owner))
}

// RegisterBackend publishes c as backend name. Another process of the
// same plugin entry takes the name over: a later process of the same slot
// (a restart: the scope's effect that removes it is there already) or the
// new scope of a reload; should that scope go while the one it took over
// from still serves, the name goes back to that one.
func (m *Manager) RegisterBackend(c Caller, name, dialect string) error {
	if !backendName.MatchString(name) {
		return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("backend name %q: use 1 to 64 letters, digits, '.', '_' or '-'", name))
	}
	slot, ok := c.Serving()
	if !ok {
		return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("plugin %s serves nothing the host can call, so it cannot be a terminal backend", c.Label()))
	}
	b := &backend{name: name, dialect: dialect, plugin: c.ID(), label: c.Label(), slot: slot}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errDisposing
	}
	prev := m.backends[name]
	if prev != nil && prev.plugin != b.plugin {
		m.mu.Unlock()
		return terminals.Errorf(terminals.ErrDuplicateBackend, fmt.Sprintf("terminal backend %q is registered by plugin %s; plugin %s cannot register it (give one of them another name)", name, prev.label, b.label))
	}
	m.backends[name] = b
	renewed := prev != nil && prev.slot == slot
	m.mu.Unlock()
	if renewed {
		return nil
	}
	drop := func() { m.dropBackend(name, slot, prev) }
	if err := c.AddEffect("terminal backend "+name, func(context.Context) error {
		drop()
		return nil
	}); err != nil {
		drop()
		return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("terminal backend %q: plugin %s: %v", name, b.label, err))
	}
	return nil
}

// dropBackend removes the registration of name made in slot, or gives
// the name back to prev when prev's slot still serves.
func (m *Manager) dropBackend(name string, slot Slot, prev *backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.backends[name]
	if !ok || cur.slot != slot {
		return
	}
	if prev != nil && prev.slot.Live() {
		m.backends[name] = prev
		return
	}
	delete(m.backends, name)
}

// Backends lists the registered backend names, sorted.
func (m *Manager) Backends() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.backendNamesLocked()
}

func (m *Manager) backendNamesLocked() []string {
	names := make([]string, 0, len(m.backends))
	for n := range m.backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// pickLocked is the backend an Open names: by name, or the only one.
func (m *Manager) pickLocked(name string) (*backend, error) {
	names := m.backendNamesLocked()
	if name == "" {
		switch len(names) {
		case 1:
			return m.backends[names[0]], nil
		case 0:
			return nil, terminals.Errorf(terminals.ErrNoBackend, "no terminal backend is registered (compose one, such as terminal-bash)")
		}
		return nil, terminals.Errorf(terminals.ErrNoBackend, fmt.Sprintf("several terminal backends are registered (%s): name one", strings.Join(names, ", ")))
	}
	if b, ok := m.backends[name]; ok {
		return b, nil
	}
	have := "none is"
	if len(names) > 0 {
		have = strings.Join(names, ", ") + " are"
	}
	return nil, terminals.Errorf(terminals.ErrNoBackend, fmt.Sprintf("no terminal backend %q is registered (%s)", name, have))
}

// checkSize refuses a size out of range; with zeroOK, 0 means the
// default.
func checkSize(cols, rows int, zeroOK bool) error {
	ok := func(n int) bool { return n >= 1 && n <= procs.MaxTerminalSide || zeroOK && n == 0 }
	if ok(cols) && ok(rows) {
		return nil
	}
	return terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("a terminal of %d columns by %d rows: each must be 1 to %d", cols, rows, procs.MaxTerminalSide))
}

// Open starts a session for owner through a backend and holds its
// terminal.
func (m *Manager) Open(ctx context.Context, owner string, req OpenRequest) (Info, error) {
	if err := checkSize(req.Cols, req.Rows, true); err != nil {
		return Info{}, err
	}
	if req.Name != "" && !sessionName.MatchString(req.Name) {
		return Info{}, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("session name %q: use 1 to 64 letters, digits, '.', '_' or '-'", req.Name))
	}
	if req.Cwd != "" {
		if !filepath.IsAbs(req.Cwd) {
			return Info{}, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("working directory %q is not an absolute path", req.Cwd))
		}
		if fi, err := os.Stat(req.Cwd); err != nil || !fi.IsDir() {
			return Info{}, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("working directory %s does not exist or is not a directory", req.Cwd))
		}
	}
	s, b, err := m.reserve(owner, req)
	if err != nil {
		return Info{}, err
	}
	t, st, err := m.start(ctx, s, b, req)
	// The screen is there before anything can reach the session.
	var screen Screen
	if err == nil && m.cfg.Attach != nil {
		screen = m.cfg.Attach(s.ID, t)
	}
	m.mu.Lock()
	if err == nil {
		switch {
		case m.closed:
			err = errDisposing
		case m.released[owner] || m.sessions[s.ID] != s:
			err = errNotLive(owner)
		default:
			s.term, s.screen, s.open, s.watch = t, screen, true, st.GetSettle()
			s.Dialect, s.prompt, s.Cwd = st.GetDialect().GetName(), st.GetDialect().GetPrompt(), st.Cwd
			if s.Cwd == "" {
				s.Cwd = req.Cwd
			}
		}
	}
	if err != nil {
		if m.sessions[s.ID] == s {
			delete(m.sessions, s.ID)
		}
		m.mu.Unlock()
		if screen != nil {
			_ = screen.Close()
		}
		if t != nil {
			// Started for an owner that went meanwhile, or a closing host.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = t.Close(cctx)
			cancel()
			m.cfg.Sub.Forget(t.ID())
			m.settleWatch(ctx, s, st.GetSettle(), false)
		}
		return Info{}, err
	}
	m.mu.Unlock()
	m.log.Debug("terminal opened", "session", s.ID, "owner", owner, "backend", b.name, "plugin", b.plugin, "pid", t.Pid())
	return m.info(s), nil
}

// reserve checks what Open may do for owner and holds a place for the
// session among owner's, so that concurrent opens keep to the cap and to
// unique names.
func (m *Manager) reserve(owner string, req OpenRequest) (*Session, *backend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, errDisposing
	}
	if m.released[owner] {
		return nil, nil, errNotLive(owner)
	}
	b, err := m.pickLocked(req.Backend)
	if err != nil {
		return nil, nil, err
	}
	held := 0
	for _, s := range m.sessions {
		if s.Owner != owner {
			continue
		}
		held++
		if req.Name != "" && s.Name == req.Name {
			return nil, nil, terminals.Errorf(terminals.ErrDuplicateName, fmt.Sprintf("a terminal session named %q is open already (%s): close it or choose another name", req.Name, s.ID))
		}
	}
	if held >= m.cfg.MaxPerOwner {
		return nil, nil, terminals.Errorf(terminals.ErrTooMany, fmt.Sprintf("%d terminal sessions are open, the most one owner may hold: close one first", held))
	}
	m.next++
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	s := &Session{
		ID:      "t" + strconv.Itoa(m.next) + "-" + hex.EncodeToString(rnd[:]),
		Owner:   owner,
		Name:    req.Name,
		Backend: b.name,
		Opened:  m.cfg.Now(),
	}
	m.sessions[s.ID] = s
	return s, b, nil
}

// start asks the backend to start the session and claims the terminal it
// spawned. Whatever a failed start left (a terminal spawned under its
// call that nobody claimed) is closed.
func (m *Manager) start(ctx context.Context, s *Session, b *backend, req OpenRequest) (*procs.Terminal, *termbackend.Started, error) {
	t, st, err := m.start1(ctx, s, b, req)
	if err != nil && errors.Is(err, sdk.ErrProviderGone) && ctx.Err() == nil {
		// The backend's process was gone (a crash its supervisor had not
		// seen yet; what it left is closed): its successor starts it.
		m.mu.Lock()
		b = m.backends[s.Backend]
		m.mu.Unlock()
		if b != nil {
			t, st, err = m.start1(ctx, s, b, req)
		}
	}
	return t, st, err
}

func (m *Manager) start1(ctx context.Context, s *Session, b *backend, req OpenRequest) (*procs.Terminal, *termbackend.Started, error) {
	conn, call, end := b.slot.Reach(s.Owner)
	defer end()
	var st *termbackend.Started
	fail := func(err error) (*procs.Terminal, *termbackend.Started, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := m.cfg.Sub.CloseUnclaimed(cctx, s.Owner, call); cerr != nil {
			m.log.Warn("what a failed terminal open left is still running", "session", s.ID, "backend", b.name, "error", cerr)
		}
		m.settleWatch(ctx, s, st.GetSettle(), false)
		return nil, nil, err
	}
	st, err := termbackend.NewClient(conn).Start(ctx, &termbackend.StartRequest{Session: s.ID, Cwd: req.Cwd, Cols: uint32(req.Cols), Rows: uint32(req.Rows)})
	if err != nil {
		return fail(fmt.Errorf("open a terminal with backend %q (plugin %s): %w", b.name, b.label, err))
	}
	t, err := m.cfg.Sub.Terminal(s.Owner, st.ProcessId)
	if err != nil {
		return fail(fmt.Errorf("open a terminal with backend %q (plugin %s): the backend answered with process %q, which is no terminal of the session's owner: %v", b.name, b.label, st.ProcessId, err))
	}
	if !t.Claim() {
		// Another session holds it: not this one's to close.
		m.settleWatch(ctx, s, st.GetSettle(), false)
		return nil, nil, fmt.Errorf("open a terminal with backend %q (plugin %s): the backend answered with terminal %s, which another session holds", b.name, b.label, st.ProcessId)
	}
	return t, st, nil
}

// get is owner's open session id. Another owner's session is answered as
// no session at all: that tells nothing of it (its id, that it exists).
func (m *Manager) get(owner, id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.getLocked(owner, id)
}

func (m *Manager) getLocked(owner, id string) (*Session, error) {
	if m.closed {
		return nil, errDisposing
	}
	if m.released[owner] {
		return nil, errNotLive(owner)
	}
	s, ok := m.sessions[id]
	if ok && s.Owner != owner {
		m.log.Warn("a request named another owner's terminal session", "session", id, "owner", owner)
	}
	if !ok || s.Owner != owner || !s.open {
		return nil, terminals.Errorf(terminals.ErrNoSession, fmt.Sprintf("no terminal session %q (closed sessions are forgotten)", id))
	}
	return s, nil
}

// modelSignal is a signal the model may send, or why not.
func modelSignal(name string) (syscall.Signal, error) {
	if !slices.Contains(terminals.Signals, name) {
		return 0, terminals.Errorf(terminals.ErrInvalid, fmt.Sprintf("signal %q: one of %s", name, strings.Join(terminals.Signals, ", ")))
	}
	sig, err := procs.TerminalSignal(name)
	if err != nil {
		return 0, terminals.Errorf(terminals.ErrInvalid, err.Error())
	}
	return sig, nil
}

// errShellKill refuses a SIGKILL that would end the shell: Close does,
// and waits until every process of the session is gone.
func errShellKill(id string) error {
	return terminals.Errorf(terminals.ErrShellKill, fmt.Sprintf("SIGKILL for the shell of session %s is refused: close the session to end it (close waits until every process of it is gone)", id))
}

// interrupts reports whether sig is one a terminal's keys send (Ctrl-C,
// Ctrl-Z), which discard the input typed and not read yet.
func interrupts(name string) bool { return name == "SIGINT" || name == "SIGTSTP" }

// signal delivers sig to the session's foreground process group or its
// shell; SIGINT and SIGTSTP for the foreground discard the unread input
// first.
func (m *Manager) signal(s *Session, name string, shell bool) (bool, error) {
	sig, err := modelSignal(name)
	if err != nil {
		return false, err
	}
	if sig == syscall.SIGKILL {
		if shell {
			return false, errShellKill(s.ID)
		}
		// At its prompt the shell is the foreground: the same refusal.
		if fg, err := s.term.Foreground(); err == nil && fg == s.term.Pid() {
			return false, errShellKill(s.ID)
		}
	}
	var ok bool
	if interrupts(name) && !shell {
		// As its keys do in a terminal: what was typed ahead of the
		// program goes with it.
		_, ok, err = s.term.Interrupt(sig)
	} else {
		_, ok, err = s.term.Signal(sig, shell)
	}
	if err != nil {
		return false, fmt.Errorf("terminal session %s: %w", s.ID, err)
	}
	return ok, nil
}

// SendRequest is what Settle is asked: Send's text, submit and signal,
// then a wait of up to Wait (at most terminals.MaxWait; 0 for none) for
// the session to settle, and the screen within Budget characters (0
// means terminals.DefaultBudget).
type SendRequest struct {
	Text, Signal string
	Submit       bool
	Wait         time.Duration
	Budget       int
	// Capture makes the send a run: the answer is the command's output
	// between the capture's markers (and no screen), Wait may be up to
	// terminals.MaxRunWait, and quiet output does not settle it.
	Capture *Capture
}

// Sent is a settled send.
type Sent struct {
	Info
	// Wait is why the wait ended (a terminals.Wait* reason; empty without
	// a wait), Detail what it saw.
	Wait, Detail string
	// Screen is the session's screen as the wait ended; HasScreen is false
	// for a session with no Viewer.
	Screen    screen.Read
	HasScreen bool
	// Captured is what a run found.
	Captured *Captured
}

// Settle is Send, then a wait for the session to settle.
func (m *Manager) Settle(ctx context.Context, owner, id string, req SendRequest) (Sent, error) {
	if req.Capture != nil {
		return m.run(ctx, owner, id, req)
	}
	// The send holds the session through its wait too: what another send
	// typed meanwhile would settle this one's wait on its output.
	s, b, release, err := m.acquire(owner, id, false)
	if err != nil {
		return Sent{}, err
	}
	defer release()
	in, err := m.typeInto(ctx, s, b, req.Text, req.Submit, req.Signal)
	if err != nil {
		return Sent{}, err
	}
	out := Sent{Info: in}
	if req.Wait > 0 {
		out.Wait, out.Detail = m.settleSend(ctx, s, min(req.Wait, terminals.MaxWait))
		out.Info = m.info(s)
	}
	m.settleSandbox(ctx, s, true)
	out.Screen, out.HasScreen = m.look(s, req.Budget)
	return out, nil
}

// settleSend waits up to wait, after typing, until the shell exits, the
// foreground is seen blocked reading the terminal, or the output has been
// quiet for the idle bound with no such read seen and no process of the
// foreground seen running meanwhile. A read is looked for only once output
// has been quiet a moment, then at growing intervals (see lookout), never
// in a hot loop.
//
// A foreground seen running (state R: on a CPU or waiting for one) counts
// as activity, as output does: a program that computes before it prints
// or reads (an interpreter loading its modules before its first prompt,
// slow on a loaded machine) is not idle however long it is quiet, so the
// wait goes on to its read, its exit or the send's wait.
func (m *Manager) settleSend(ctx context.Context, s *Session, wait time.Duration) (reason, detail string) {
	t := s.term
	start := time.Now()
	deadline := start.Add(wait)
	last, quietSince := t.Printed(), start
	busyAt := start // the last look that found the foreground running
	var looks lookout
	lastDetail := ""
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if st, code, sig := t.State(); st != procs.Running {
			if sig != "" {
				return terminals.WaitSessionExit, "the shell was ended by " + sig
			}
			return terminals.WaitSessionExit, fmt.Sprintf("the shell exited with code %d", code)
		}
		now := time.Now()
		if n := t.Printed(); n != last {
			last, quietSince = n, now
			looks.reset()
		}
		quiet := now.Sub(quietSince)
		if looks.due(now, quietSince) {
			res, err := m.cfg.Check(t.Master(), t.Pid())
			switch {
			case err != nil:
				lastDetail = err.Error()
			case res.Reason == settle.StdinRead && drained(t) && t.Printed() == last:
				return terminals.WaitStdinRead, res.Detail
			case res.Reason == settle.Stopped && drained(t) && t.Printed() == last:
				// Nothing moves until it is continued: waiting longer shows
				// nothing new (once what it printed is in).
				return terminals.WaitInferredIdle, res.Detail
			default:
				lastDetail = res.Detail
				if res.Busy {
					busyAt = now
				}
			}
		}
		if quiet >= m.cfg.IdleAfter && now.Sub(busyAt) >= m.cfg.IdleAfter {
			d := fmt.Sprintf("no output for %s", m.cfg.IdleAfter.Round(time.Millisecond))
			if lastDetail != "" {
				d += "; " + lastDetail
			}
			return terminals.WaitInferredIdle, d
		}
		if !now.Before(deadline) {
			d := fmt.Sprintf("still running after %s", wait.Round(time.Millisecond))
			if lastDetail != "" {
				d += "; " + lastDetail
			}
			return terminals.WaitTimeout, d
		}
		select {
		case <-ctx.Done():
			return terminals.WaitTimeout, "the request ended: " + ctx.Err().Error()
		case <-t.Done():
		case <-tick.C:
		}
	}
}

// drained reports whether nothing is on its way through t (see
// Terminal.InFlight); when that cannot be told, the look decides alone.
// Printed is compared after it, not before: output read meanwhile is
// then counted there.
func drained(t *procs.Terminal) bool {
	n, err := t.InFlight()
	return err != nil || n == 0
}

// lookout schedules a wait's looks at the foreground: the first once
// output has been quiet firstLook, each next one twice as long after the
// previous, up to lookEvery; new output starts over.
type lookout struct {
	last time.Time     // the previous look; zero for none since output
	gap  time.Duration // from it to the next
}

func (l *lookout) reset() { *l = lookout{} }

// due reports whether a look is due at now, output quiet since
// quietSince, and if so counts it as made.
func (l *lookout) due(now, quietSince time.Time) bool {
	if l.last.IsZero() {
		if now.Sub(quietSince) < firstLook {
			return false
		}
		l.last, l.gap = now, firstLook
		return true
	}
	if now.Sub(l.last) < l.gap {
		return false
	}
	l.last, l.gap = now, min(2*l.gap, lookEvery)
	return true
}

// next is how long from now until the next look could be due.
func (l *lookout) next(now, quietSince time.Time) time.Duration {
	if l.last.IsZero() {
		return max(firstLook-now.Sub(quietSince), time.Millisecond)
	}
	return max(l.gap-now.Sub(l.last), time.Millisecond)
}

// look is the session's screen within budget characters, if it has one.
func (m *Manager) look(s *Session, budget int) (screen.Read, bool) {
	v, ok := s.screen.(Viewer)
	if !ok {
		return screen.Read{}, false
	}
	if budget <= 0 {
		budget = terminals.DefaultBudget
	}
	return v.Read(budget), true
}

// Send signals the foreground first (when asked), then types text through
// the session's backend, submitting it when asked. One send at a time.
func (m *Manager) Send(ctx context.Context, owner, id, text string, submit bool, signal string) (Info, error) {
	in, _, err := m.send(ctx, owner, id, text, submit, signal)
	return in, err
}

func (m *Manager) send(ctx context.Context, owner, id, text string, submit bool, signal string) (Info, *Session, error) {
	s, b, release, err := m.acquire(owner, id, false)
	if err != nil {
		return Info{}, nil, err
	}
	defer release()
	in, err := m.typeInto(ctx, s, b, text, submit, signal)
	return in, s, err
}

// acquire holds owner's session id for one send (with run, a run: reads
// are refused too) and returns its backend as registered now.
func (m *Manager) acquire(owner, id string, run bool) (*Session, *backend, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.getLocked(owner, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.sending {
		return nil, nil, nil, errSendActive(s)
	}
	s.sending, s.running = true, run
	release := func() {
		m.mu.Lock()
		s.sending, s.running = false, false
		m.mu.Unlock()
	}
	return s, m.backends[s.Backend], release, nil
}

func errSendActive(s *Session) error {
	if s.running {
		return terminals.Errorf(terminals.ErrSendActive, fmt.Sprintf("a command runs in terminal session %s (the persistent shell of a tool): wait for it to end", s.ID))
	}
	return terminals.Errorf(terminals.ErrSendActive, fmt.Sprintf("a send to terminal session %s is in flight: wait for it (or signal the session)", s.ID))
}

// typeInto signals the foreground first (when asked), then types text
// into the held session s through backend b.
func (m *Manager) typeInto(ctx context.Context, s *Session, b *backend, text string, submit bool, signal string) (Info, error) {
	if signal != "" {
		if _, err := m.signal(s, signal, false); err != nil {
			return Info{}, err
		}
		if text != "" || submit {
			settleShell(ctx, s.term)
		}
	}
	if text == "" && !submit {
		return m.info(s), nil
	}
	if st, _, _ := s.term.State(); st != procs.Running {
		return m.info(s), nil // nothing to type into
	}
	if b == nil {
		return Info{}, terminals.Errorf(terminals.ErrNoBackend, fmt.Sprintf("terminal backend %q, which session %s was opened with, is not registered now: close the session", s.Backend, s.ID))
	}
	call, err := m.type1(ctx, s, b, text, submit)
	if err != nil && errors.Is(err, sdk.ErrProviderGone) && !s.term.WroteFor(call) && ctx.Err() == nil {
		// The backend's process was gone before it typed anything (a
		// crash its supervisor had not seen yet): its successor types.
		m.mu.Lock()
		b = m.backends[s.Backend]
		m.mu.Unlock()
		if b != nil {
			_, err = m.type1(ctx, s, b, text, submit)
		}
	}
	if err != nil {
		return Info{}, err
	}
	return m.info(s), nil
}

// type1 asks backend b once to type text into the session, and returns
// the call it acted under.
func (m *Manager) type1(ctx context.Context, s *Session, b *backend, text string, submit bool) (string, error) {
	conn, call, end := b.slot.Reach(s.Owner)
	defer end()
	if _, err := termbackend.NewClient(conn).Send(ctx, &termbackend.SendRequest{ProcessId: s.term.ID(), Text: text, Submit: submit}); err != nil {
		return call, fmt.Errorf("send to terminal session %s through backend %q (plugin %s): %w", s.ID, b.name, b.label, err)
	}
	return call, nil
}

// settleShell waits, after a signal and before typing, until the shell has
// the terminal again (the foreground group is its own) and the terminal
// has printed nothing for a moment: input typed while a job dies, or
// while the line editor recovers from the signal, is lost. It gives up
// after a bound, or when ctx ends or the shell exits.
func settleShell(ctx context.Context, t *procs.Terminal) {
	deadline := time.Now().Add(settleMax)
	last, quietSince := t.Printed(), time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if st, _, _ := t.State(); st != procs.Running {
			return
		}
		if n := t.Printed(); n != last {
			last, quietSince = n, time.Now()
		}
		if fg, err := t.Foreground(); err == nil && fg == t.Pid() && time.Since(quietSince) >= settleQuiet {
			return
		}
		select {
		case <-ctx.Done():
		case <-t.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Read consumes the session's new output, waiting up to wait for some.
func (m *Manager) Read(ctx context.Context, owner, id string, wait time.Duration) (Output, error) {
	return m.ReadScreen(ctx, owner, id, wait, 0)
}

// ReadScreen is Read, then a look at the session's screen within budget
// characters (0 means terminals.DefaultBudget): the viewport and the
// unread scrollback, with what was left out counted.
func (m *Manager) ReadScreen(ctx context.Context, owner, id string, wait time.Duration, budget int) (Output, error) {
	m.mu.Lock()
	s, err := m.getLocked(owner, id)
	if err == nil && s.running {
		err = errSendActive(s)
	}
	m.mu.Unlock()
	if err != nil {
		return Output{}, err
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	r := s.term.Read(ctx, wait)
	s.tail = append(s.tail, r.Data...)
	if over := len(s.tail) - tailBytes; over > 0 {
		s.tail = append([]byte(nil), s.tail[over:]...)
	}
	out := Output{Info: m.info(s), Data: r.Data, Dropped: r.Dropped}
	out.AtPrompt = !out.Exited && AtPrompt(s.tail, s.prompt)
	out.Screen, out.HasScreen = m.look(s, budget)
	return out, nil
}

// AtPrompt reports whether output ends at prompt: the prompt's bytes, then
// nothing but terminal control sequences (a line editor's own, such as
// bracketed paste or an erase to the end of the line).
func AtPrompt(output, prompt []byte) bool {
	if len(prompt) == 0 {
		return false
	}
	i := lastIndex(output, prompt)
	if i < 0 {
		return false
	}
	return onlyControls(output[i+len(prompt):])
}

func lastIndex(b, sub []byte) int {
	return strings.LastIndex(string(b), string(sub))
}

// onlyControls reports whether b is nothing but CSI and OSC sequences.
func onlyControls(b []byte) bool {
	for len(b) > 0 {
		if b[0] != 0x1b || len(b) < 2 {
			return false
		}
		switch b[1] {
		case '[': // CSI: parameters, intermediates, one final byte
			j := 2
			for j < len(b) && (b[j] < 0x40 || b[j] > 0x7e) {
				j++
			}
			if j == len(b) {
				return false
			}
			b = b[j+1:]
		case ']': // OSC: up to BEL or ST
			j := 2
			for j < len(b) && b[j] != 0x07 && !(b[j] == 0x1b && j+1 < len(b) && b[j+1] == '\\') {
				j++
			}
			switch {
			case j == len(b):
				return false
			case b[j] == 0x07:
				b = b[j+1:]
			default:
				b = b[j+2:]
			}
		default:
			return false
		}
	}
	return true
}

// Signal sends signal to the session's foreground process group, or with
// shell to its shell.
func (m *Manager) Signal(owner, id, signal string, shell bool) (bool, Info, error) {
	s, err := m.get(owner, id)
	if err != nil {
		return false, Info{}, err
	}
	ok, err := m.signal(s, signal, shell)
	if err != nil {
		return false, Info{}, err
	}
	return ok, m.info(s), nil
}

// Resize sets the session's terminal size.
func (m *Manager) Resize(owner, id string, cols, rows int) (Info, error) {
	if err := checkSize(cols, rows, false); err != nil {
		return Info{}, err
	}
	s, err := m.get(owner, id)
	if err != nil {
		return Info{}, err
	}
	if err := s.term.Resize(cols, rows); err != nil {
		return Info{}, err
	}
	if s.screen != nil {
		s.screen.Resize(cols, rows)
	}
	return m.info(s), nil
}

// CloseSession ends the session: its whole process tree is gone when it
// returns (within ctx), and the session is forgotten.
func (m *Manager) CloseSession(ctx context.Context, owner, id string) (Info, error) {
	m.mu.Lock()
	s, err := m.getLocked(owner, id)
	if err == nil {
		delete(m.sessions, id)
	}
	m.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	if err := m.end(ctx, s); err != nil {
		return Info{}, err
	}
	return m.info(s), nil
}

// end closes a session's terminal and waits for its tree, then settles
// the sandbox's watch of it for good.
func (m *Manager) end(ctx context.Context, s *Session) error {
	err := s.term.Close(ctx)
	if s.screen != nil {
		_ = s.screen.Close()
	}
	m.cfg.Sub.Forget(s.term.ID())
	m.settleSandbox(ctx, s, false)
	if err != nil {
		return fmt.Errorf("close terminal session %s: %w", s.ID, err)
	}
	m.log.Debug("terminal closed", "session", s.ID, "owner", s.Owner)
	return nil
}

// List is owner's open sessions, oldest first.
func (m *Manager) List(owner string) ([]Info, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errDisposing
	}
	if m.released[owner] {
		m.mu.Unlock()
		return nil, errNotLive(owner)
	}
	var mine []*Session
	for _, s := range m.sessions {
		if s.Owner == owner && s.open {
			mine = append(mine, s)
		}
	}
	m.mu.Unlock()
	sort.Slice(mine, func(a, b int) bool {
		return mine[a].Opened.Before(mine[b].Opened) || mine[a].Opened.Equal(mine[b].Opened) && mine[a].ID < mine[b].ID
	})
	out := make([]Info, 0, len(mine))
	for _, s := range mine {
		out = append(out, m.info(s))
	}
	return out, nil
}

// ReleaseOwner ends every session of owner (its session with the agent
// ended) and waits, within ctx, until their trees are gone. The owner is
// not live from then on: nothing more is opened for it.
func (m *Manager) ReleaseOwner(ctx context.Context, owner string) error {
	m.mu.Lock()
	m.released[owner] = true
	var gone []*Session
	for id, s := range m.sessions {
		if s.Owner == owner {
			delete(m.sessions, id)
			if s.open {
				gone = append(gone, s)
			}
		}
	}
	m.mu.Unlock()
	return m.endAll(ctx, gone)
}

// Close ends every session and waits, within ctx, until their trees are
// gone; every request is refused from then on.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	var gone []*Session
	for id, s := range m.sessions {
		delete(m.sessions, id)
		if s.open {
			gone = append(gone, s)
		}
	}
	clear(m.backends)
	m.mu.Unlock()
	return m.endAll(ctx, gone)
}

func (m *Manager) endAll(ctx context.Context, ss []*Session) error {
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { errs[i] = m.end(ctx, s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// info is s as callers see it.
func (m *Manager) info(s *Session) Info {
	in := Info{ID: s.ID, Name: s.Name, Backend: s.Backend, Dialect: s.Dialect, Cwd: s.Cwd, Opened: s.Opened}
	if s.term != nil {
		in.Cols, in.Rows = s.term.Size()
		in.Pid = s.term.Pid()
		st, code, sig := s.term.State()
		if st != procs.Running {
			in.Exited, in.ExitCode, in.Signal = true, code, sig
		}
	}
	return in
}
