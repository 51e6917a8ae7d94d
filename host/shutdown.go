package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dshrun/dsh/plugins/shell"
)

// Stopping on a signal. The front end stops taking calls through the host
// (CallTool refuses them in a plain sentence), StopCalls stops the calls in
// flight (their command trees are killed, so each tool still answers with
// what its command printed, and a call that does not end by itself is
// cancelled), and Shutdown kills every command left (terminals, jobs)
// before the plugins stop in dependency order. ShutdownBound is what the
// whole may take.

// Texts the model reads when the host stops under a call.
const (
	// StoppedText heads the answer of a call the host stopped.
	StoppedText = "The host is shutting down; the command was stopped."
	// RefusedText answers a call that arrives while the host stops.
	RefusedText = "The host is shutting down; nothing was started."
)

// errStopping is the cause given to the contexts of the calls StopCalls
// cancels.
var errStopping = errors.New("the host is shutting down")

// flights are the tool calls in flight, for StopCalls.
type flights struct {
	mu       sync.Mutex
	stopping bool
	m        map[*flight]struct{}
	idle     chan struct{} // closed when m empties after stopping; nil before
}

// flight is one tool call in flight.
type flight struct {
	cancel  context.CancelCauseFunc
	mu      sync.Mutex
	call    string // the host-stamped call id, once the call has one
	owner   string // whom the call serves
	stopped bool   // StopCalls stopped it
}

// add registers a call; ok is false once the host stops (the call must be
// refused).
func (fs *flights) add(ctx context.Context) (context.Context, *flight, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.stopping {
		return ctx, nil, false
	}
	ctx, cancel := context.WithCancelCause(ctx)
	f := &flight{cancel: cancel}
	if fs.m == nil {
		fs.m = map[*flight]struct{}{}
	}
	fs.m[f] = struct{}{}
	return ctx, f, true
}

func (fs *flights) done(f *flight) {
	f.cancel(nil)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.m, f)
	if fs.idle != nil && len(fs.m) == 0 {
		select {
		case <-fs.idle:
		default:
			close(fs.idle)
		}
	}
}

// stop refuses calls from now on and returns those in flight, each marked
// stopped, and a channel closed once none is left.
func (fs *flights) stop() ([]*flight, <-chan struct{}) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.stopping {
		fs.stopping = true
		fs.idle = make(chan struct{})
		if len(fs.m) == 0 {
			close(fs.idle)
		}
	}
	out := make([]*flight, 0, len(fs.m))
	for f := range fs.m {
		f.mu.Lock()
		f.stopped = true
		f.mu.Unlock()
		out = append(out, f)
	}
	return out, fs.idle
}

func (fs *flights) isStopping() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.stopping
}

func (f *flight) setCall(id, owner string) {
	f.mu.Lock()
	f.call, f.owner = id, owner
	f.mu.Unlock()
}

func (f *flight) state() (call string, stopped bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.call, f.stopped
}

// refused is the answer to a call that arrives while the host stops.
func refused() *ToolResult { return &ToolResult{Text: RefusedText, IsError: true} }

// stoppedAnswer is the answer of a call StopCalls stopped: the plain
// sentence, then what the tool said of its stopped command, if it could
// answer.
func stoppedAnswer(res *ToolResult) *ToolResult {
	if res == nil {
		return &ToolResult{Text: StoppedText, IsError: true}
	}
	out := *res
	out.IsError = true
	out.Text = StoppedText
	if res.Text != "" {
		out.Text += "\n\n" + res.Text
	}
	return &out
}

// StopCalls stops taking tool calls (CallTool answers RefusedText from now
// on) and stops the calls in flight: their command trees are killed
// (SIGTERM, then SIGKILL after the grace) and the programs in front of
// their owners' terminals get SIGTERM, so each tool answers with what its
// command printed, headed by StoppedText. A call still running after
// the kill grace plus half the stop timeout is cancelled and answered with
// StoppedText alone. Once ctx is done (a second signal) the trees get
// SIGKILL at once, and a call that has not answered 2 s later is
// cancelled. It returns once no call is in flight, or when the cancelled
// calls had a moment to return.
func (h *Host) StopCalls(ctx context.Context) {
	fl, idle := h.flights.stop()
	if len(fl) == 0 {
		return
	}
	hard := ctx.Err() != nil
	owners := map[string]bool{}
	for _, f := range fl {
		if call, _ := f.state(); call != "" {
			h.sub.KillCall(call, hard)
			f.mu.Lock()
			owners[f.owner] = true
			f.mu.Unlock()
		}
	}
	h.interruptTerminals(owners)
	// The trees are SIGKILLed at the grace; their tools then answer in
	// moments, given half the plugins' stop timeout at most.
	wait := time.NewTimer(h.killGrace() + h.stopTimeout()/2)
	defer wait.Stop()
	select {
	case <-idle:
		return
	case <-wait.C:
	case <-ctx.Done():
		for _, f := range fl {
			if call, _ := f.state(); call != "" {
				h.sub.KillCall(call, true)
			}
		}
		// SIGKILL ends the trees at once, and the tools answer with
		// what their commands printed.
		soon := time.NewTimer(2 * time.Second)
		defer soon.Stop()
		select {
		case <-idle:
			return
		case <-soon.C:
		}
	}
	for _, f := range fl {
		f.cancel(errStopping)
	}
	// A cancelled call returns as soon as its plugin call does.
	last := time.NewTimer(time.Second)
	defer last.Stop()
	select {
	case <-idle:
	case <-last.C:
		h.log.Warn("calls still in flight after they were cancelled; stopping the plugins under them")
	}
}

// interruptTerminals sends SIGTERM to the program in front of each
// terminal of owners: a command a call runs in a terminal (the persistent
// bash tool's) is not the call's process, and its tool answers once it
// ends. The terminals themselves go with the rest, after the answers.
func (h *Host) interruptTerminals(owners map[string]bool) {
	for owner := range owners {
		infos, err := h.terms.List(owner)
		if err != nil {
			continue
		}
		for _, in := range infos {
			if _, _, err := h.terms.Signal(owner, in.ID, "SIGTERM", false); err != nil {
				h.log.Debug("terminal not interrupted", "terminal", in.ID, "error", err)
			}
		}
	}
}

// Shutdown ends a host that StopCalls stopped: every command left dies
// (terminals, then jobs and every other process), then the plugins stop in
// dependency order and the runtime directory goes, all bounded by ctx (a
// plugin that has not stopped by then is killed).
func (h *Host) Shutdown(ctx context.Context) error {
	h.flights.stop()
	errs := []error{h.terms.Close(ctx), h.sub.KillAll(ctx)}
	errs = append(errs, h.Close(ctx))
	return errors.Join(errs...)
}

// ShutdownBound is the longest a stop on a signal takes (StopCalls, then
// Shutdown): the composition's stopTimeout plus the kill grace of its
// commands.
func (h *Host) ShutdownBound() time.Duration { return h.stopTimeout() + h.killGrace() }

// killGrace is the longest time between SIGTERM and SIGKILL of a command:
// the largest graceMs among the executors loaded, or ctx.shell's default
// when none is.
func (h *Host) killGrace() time.Duration {
	return h.executorsLongest(func(l *shell.Limits) int64 { return l.GraceMs })
}
