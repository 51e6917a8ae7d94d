// Package termsessions is the host's ctx.terminals: the registry of persistent
// terminal sessions. It owns session ids (unguessable handles it makes),
// the owner of each session (an agent; every access names it, and another
// owner's session is not there), the backends published by name (a
// registration is an effect of the registering plugin's scope, taken over
// by another process of the same entry), the cap on sessions per owner,
// one send at a time per session, and cleanup it waits for: a session's
// close, its owner's release and the host's stop end its process tree and
// return once it is gone; and, for the console of the person who runs the
// host, every owner's sessions, a watch of a session's screen and output
// that consumes nothing, and typing into it (watch.go).
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
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions/settle"
	"github.com/dshrun/dsh/internal/notify"
)

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
	// Handles reports whether owner's session ids are to be wholly
	// unguessable handles (see jobtable.Config.Handles). Nil: none.
	Handles func(owner string) bool
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

	changes notify.Set // a session opened, ended or went (Changes)
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

var (
	errDisposing = terminals.Errorf(terminals.ErrServiceDisposing, "the host is shutting down: terminal sessions are being closed")
)

func errNotLive(owner string) error {
	return terminals.Errorf(terminals.ErrOwnerNotLive, fmt.Sprintf("owner %s is gone (its session ended): its terminals were closed and no more are opened for it", owner))
}
