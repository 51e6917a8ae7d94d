package mcpserver

import (
	"context"
	"sync"
)

// Stopping on a signal: the host refuses new calls and stops those in
// flight (host.StopCalls); the server waits until each stopped call has
// been answered, and keeps its sessions open meanwhile, so a call that
// arrives during the stop is refused in a plain sentence instead of
// meeting a closed stream. The sessions end last (CloseSessions).

// handlers counts the tool handlers running.
type handlers struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0
}

func (hs *handlers) begin() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.n == 0 {
		hs.idle = make(chan struct{})
	}
	hs.n++
}

func (hs *handlers) end() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.n--
	if hs.n == 0 {
		close(hs.idle)
	}
}

// wait returns once no handler runs, or when ctx is done.
func (hs *handlers) wait(ctx context.Context) {
	hs.mu.Lock()
	idle := hs.idle
	n := hs.n
	hs.mu.Unlock()
	if n == 0 {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// StopCalls stops the host's calls (host.StopCalls: new ones are refused,
// those in flight are stopped and answered) and returns once every tool
// handler has handed its answer to its session, or when ctx is done.
func (s *Server) StopCalls(ctx context.Context) {
	s.stopping.Store(true)
	s.h.StopCalls(ctx)
	s.running.wait(ctx)
}

// CloseSessions ends every session: an HTTP client's open streams close,
// so the HTTP server can shut down without waiting on them.
func (s *Server) CloseSessions() {
	for ss := range s.srv.Sessions() {
		_ = ss.Close()
	}
}
