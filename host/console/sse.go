package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// A stream's write that does not get through in this long (the page
// stopped reading) ends the stream.
const writeBound = 30 * time.Second

// Snapshots of one kind are sent at most this often.
const coalesce = 100 * time.Millisecond

// stream is one open server-sent event stream.
type stream struct {
	ctx context.Context
	mu  sync.Mutex
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// send writes one event; after a failed write it does nothing and returns
// the failure.
func (s *stream) send(event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("event: ")
	buf.WriteString(event)
	buf.WriteString("\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	return s.write(buf.Bytes())
}

func (s *stream) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeBound))
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	s.err = s.rc.Flush()
	return s.err
}

// openStream starts an event stream on w, or answers why not. The stream's
// context ends when the page goes, the console closes or a write fails;
// end must be called when the handler is done.
func (c *Console) openStream(w http.ResponseWriter, r *http.Request) (s *stream, end func(), ok bool) {
	select {
	case <-c.done:
		writeError(w, http.StatusServiceUnavailable, "the host is stopping")
		return nil, nil, false
	default:
	}
	select {
	case c.streams <- struct{}{}:
	default:
		writeError(w, http.StatusServiceUnavailable, "too many console streams open: close some console tabs")
		return nil, nil, false
	}
	c.wg.Add(1)
	ctx, cancel := context.WithCancel(r.Context())
	s = &stream{ctx: ctx, w: w, rc: http.NewResponseController(w)}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		t := time.NewTicker(c.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.done:
				cancel()
				return
			case <-t.C:
				if s.write([]byte(": keepalive\n\n")) != nil {
					cancel()
					return
				}
			}
		}
	}()
	if s.write([]byte(": open\n\n")) != nil {
		cancel()
	}
	end = func() {
		cancel()
		<-beat
		<-c.streams
		c.wg.Done()
	}
	return s, end, true
}

// events streams graph, agents and approvals snapshots as they change and
// log lines as they come. The subscriptions exist only while it runs.
func (c *Console) events(w http.ResponseWriter, r *http.Request, _ caller) {
	s, end, ok := c.openStream(w, r)
	if !ok {
		return
	}
	defer end()
	graphCh, stopGraph := c.src.Changes()
	defer stopGraph()
	agentsCh, stopAgents := c.src.AgentChanges()
	defer stopAgents()
	apprCh, stopAppr := c.src.ApprovalChanges()
	defer stopAppr()
	logCh, stopLogs := c.src.SubscribeLogs()
	defer stopLogs()

	kinds := []*snapshot{
		{name: "graph", view: func() any { return c.graphView() }},
		{name: "agents", view: func() any { return c.agentsView() }},
		{name: "approvals", view: func() any { return c.approvalsView() }},
	}
	for _, k := range kinds {
		k.pending = true
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	// flush sends every snapshot that changed and may go now, and arms the
	// timer for the earliest that must wait.
	flush := func() error {
		now := time.Now()
		var next time.Time
		for _, k := range kinds {
			if !k.pending {
				continue
			}
			if due := k.sent.Add(coalesce); now.Before(due) {
				if next.IsZero() || due.Before(next) {
					next = due
				}
				continue
			}
			if err := k.send(s, now); err != nil {
				return err
			}
		}
		if !next.IsZero() {
			timer.Reset(next.Sub(now))
		}
		return nil
	}
	for {
		var err error
		select {
		case <-s.ctx.Done():
			return
		case _, ok := <-graphCh:
			if !ok {
				graphCh = nil
			}
			kinds[0].pending = true
			err = flush()
		case _, ok := <-agentsCh:
			if !ok {
				agentsCh = nil
			}
			kinds[1].pending = true
			err = flush()
		case _, ok := <-apprCh:
			if !ok {
				apprCh = nil
			}
			kinds[2].pending = true
			err = flush()
		case <-timer.C:
			err = flush()
		case line, ok := <-logCh:
			if !ok {
				logCh = nil
				continue
			}
			err = s.send("log", line)
		}
		if err != nil {
			return
		}
	}
}

// snapshot is one kind of whole-state event on an events stream.
type snapshot struct {
	name    string
	view    func() any
	pending bool
	sent    time.Time
	last    []byte
}

// send sends the snapshot unless it is what was sent last.
func (k *snapshot) send(s *stream, now time.Time) error {
	k.pending = false
	k.sent = now
	b, err := json.Marshal(k.view())
	if err != nil {
		return err
	}
	if bytes.Equal(b, k.last) {
		return nil
	}
	k.last = b
	return s.send(k.name, json.RawMessage(b))
}

// jobOutput streams a job's output from its start, then its end.
func (c *Console) jobOutput(w http.ResponseWriter, r *http.Request, _ caller) {
	s, end, ok := c.openStream(w, r)
	if !ok {
		return
	}
	defer end()
	var carry []byte
	job, err := c.src.WatchJobOutput(s.ctx, r.PathValue("owner"), r.PathValue("id"), func(chunk []byte) {
		text := append(carry, chunk...)
		// A character split between chunks waits for its rest.
		cut := len(text)
		for i := 1; i <= utf8.UTFMax-1 && i <= len(text); i++ {
			if utf8.RuneStart(text[len(text)-i]) {
				if !utf8.FullRune(text[len(text)-i:]) {
					cut = len(text) - i
				}
				break
			}
		}
		carry = append([]byte(nil), text[cut:]...)
		if cut > 0 {
			_ = s.send("output", map[string]string{"text": string(text[:cut])})
		}
	})
	if len(carry) > 0 {
		_ = s.send("output", map[string]string{"text": string(carry)})
	}
	if s.ctx.Err() != nil {
		return
	}
	if err != nil {
		_ = s.send("end", map[string]string{"error": err.Error()})
		return
	}
	_ = s.send("end", map[string]any{"state": job.State, "exitCode": job.ExitCode})
}

// terminalStream streams a terminal's screen, then its live bytes.
func (c *Console) terminalStream(w http.ResponseWriter, r *http.Request, _ caller) {
	s, end, ok := c.openStream(w, r)
	if !ok {
		return
	}
	defer end()
	err := c.src.WatchTerminal(s.ctx, r.PathValue("owner"), r.PathValue("id"), func(chunk []byte) {
		_ = s.send("output", map[string]string{"b64": base64.StdEncoding.EncodeToString(chunk)})
	})
	if s.ctx.Err() != nil {
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		_ = s.send("end", map[string]string{"error": err.Error()})
		return
	}
	_ = s.send("end", map[string]any{})
}
