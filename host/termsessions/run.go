package termsessions

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions/settle"
)

// Capture frames the output of one command typed into a session: it comes
// after the first line holding From and ends before Until, whose line's
// end settles the run. MaxBytes (0 means 64 KiB) bounds the output kept:
// its first and last halves.
type Capture struct {
	From, Until string
	MaxBytes    int
	// CloseOnCancel closes the session when ctx ends before the run.
	CloseOnCancel bool
	// Call is the tool call the run serves, if any: LatestLine finds the
	// run by it.
	Call string
}

// Captured is what a run found (see terminals.Captured).
type Captured struct {
	Data           []byte
	Omitted        int64
	Started, Ended bool
	Rest           string
	AtPrompt       bool
	Dropped        int64
}

// DefaultCaptureBytes is Capture.MaxBytes's default.
const DefaultCaptureBytes = 64 << 10

// compactSlack is how far a capture's output may grow past its bound
// before its middle is cut out: cutting on every read would copy the tail
// each time.
const compactSlack = 256 << 10

// run is Settle with a capture: the session is held (other sends and
// reads answer SEND_ACTIVE) from before its pending output is dropped
// until the run settles.
func (m *Manager) run(ctx context.Context, owner, id string, req SendRequest) (Sent, error) {
	c := *req.Capture
	if c.From == "" || c.Until == "" || bytes.ContainsAny([]byte(c.From+c.Until), "\r\n") {
		return Sent{}, terminals.Errorf(terminals.ErrInvalid, "a capture names the marker it starts after and the one it ends before, each within one line")
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultCaptureBytes
	}
	s, b, release, err := m.acquire(owner, id, true)
	if err != nil {
		return Sent{}, err
	}
	mine := false // this run took s out of the sessions (under m.mu)
	defer func() {
		release()
		if c.CloseOnCancel && ctx.Err() != nil {
			// Its caller is gone mid-run: the command goes with the shell.
			m.forget(s, &mine)
			m.mu.Lock()
			took := mine
			m.mu.Unlock()
			if !took {
				return // closed meanwhile by its owner's going or the host's
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if err := m.end(cctx, s); err != nil {
				m.log.Warn("a run's caller went away, and its session could not be closed", "session", id, "owner", owner, "error", err)
			}
		}
	}()
	if c.CloseOnCancel {
		// The session is nobody's the moment its caller goes, not once this
		// run has unwound: the caller's next call (a fresh shell) must not
		// find it, still held, and be told it is busy.
		defer context.AfterFunc(ctx, func() { m.forget(s, &mine) })()
	}
	// What the terminal printed before the command is not its output.
	m.consume(s, s.term.Read(ctx, 0).Data)
	if _, err := m.typeInto(ctx, s, b, req.Text, req.Submit, req.Signal); err != nil {
		return Sent{}, err
	}
	out := Sent{Info: m.info(s)}
	got := newCapture(c)
	m.mu.Lock()
	s.run = got
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		s.run = nil
		m.mu.Unlock()
	}()
	out.Wait, out.Detail = m.settleRun(ctx, s, got, min(req.Wait, terminals.MaxRunWait))
	m.settleSandbox(ctx, s, true)
	out.Info = m.info(s)
	r := got.result()
	s.readMu.Lock()
	r.AtPrompt = !out.Exited && AtPrompt(s.tail, s.prompt)
	s.readMu.Unlock()
	out.Captured = &r
	return out, nil
}

// forget takes s out of the sessions if it is still there, and then sets
// *took, under m.mu: the one that took it out ends it.
func (m *Manager) forget(s *Session, took *bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.ID] == s {
		delete(m.sessions, s.ID)
		*took = true
	}
}

// consume keeps the end of data, output read from s, for its prompt.
func (m *Manager) consume(s *Session, data []byte) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	s.tail = append(s.tail, data...)
	if over := len(s.tail) - tailBytes; over > 0 {
		s.tail = append([]byte(nil), s.tail[over:]...)
	}
}

// settleRun reads the session's output into got until until's line has
// arrived, the shell exits, the foreground is seen reading the terminal
// (what it reads is not the command's end: a prompt of its own, or a
// program waiting for input), the foreground is seen stopped
// (inferred_idle: nothing moves until it is continued), wait runs out or
// ctx ends. Quiet output alone settles nothing: a command may be quiet
// for long.
func (m *Manager) settleRun(ctx context.Context, s *Session, got *capture, wait time.Duration) (reason, detail string) {
	t := s.term
	typed := time.Now()
	deadline := typed.Add(wait)
	quietSince := typed
	var looks lookout
	lastDetail := ""
	var read int64 // what the terminal had printed at the last read
	for {
		left := time.Until(deadline)
		if left <= 0 {
			d := fmt.Sprintf("still running after %s", wait.Round(time.Millisecond))
			if lastDetail != "" {
				d += "; " + lastDetail
			}
			return terminals.WaitTimeout, d
		}
		r := t.Read(ctx, min(left, looks.next(time.Now(), quietSince)))
		read = r.Total
		got.dropped += r.Dropped
		if len(r.Data) > 0 {
			m.consume(s, r.Data)
			got.feed(r.Data)
			quietSince = time.Now()
			looks.reset()
			if got.ended {
				return terminals.WaitMarker, "the command's end marker was printed"
			}
		}
		if r.Status != procs.Running {
			if r.Signal != "" {
				return terminals.WaitSessionExit, "the shell was ended by " + r.Signal
			}
			return terminals.WaitSessionExit, fmt.Sprintf("the shell exited with code %d", r.ExitCode)
		}
		if ctx.Err() != nil {
			return terminals.WaitTimeout, "the request ended: " + ctx.Err().Error()
		}
		if looks.due(time.Now(), quietSince) {
			res, err := m.cfg.Check(t.Master(), t.Pid())
			// What the look saw settles the run only once every byte
			// printed before it is in got: none on its way (drained), none
			// added since the last read.
			all := err == nil && drained(t) && t.Printed() == read
			switch {
			case err != nil:
				lastDetail = err.Error()
			case !all:
				lastDetail = res.Detail
			case res.Reason == settle.StdinRead:
				if !got.started && time.Since(typed) < graceFor(res, t.Pid()) {
					// The shell may be at its old prompt still, the line
					// typed but not yet taken: the start marker says.
					lastDetail = res.Detail
					break
				}
				return terminals.WaitStdinRead, res.Detail
			case res.Reason == settle.Stopped:
				return terminals.WaitInferredIdle, res.Detail
			default:
				lastDetail = res.Detail
			}
		}
	}
}

// LatestLine is the last line of output, as it stands, of the run made
// for call (Capture.Call) that goes on now: the command's, after its
// start marker and before its end marker; nil when there is none. Raw:
// the caller cleans it.
func (m *Manager) LatestLine(call string) []byte {
	if call == "" {
		return nil
	}
	var c *capture
	m.mu.Lock()
	for _, s := range m.sessions {
		if s.run != nil && s.run.Call == call {
			c = s.run
			break
		}
	}
	m.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.lastLine()
}

// capture finds a command's output in a session's output stream.
type capture struct {
	// mu guards what lastLine reads, which another goroutine may ask
	// while the run feeds it.
	mu sync.Mutex
	Capture
	from, until []byte
	pre         []byte // output before the from line: its end
	body        []byte // the output: its head, then (after a cut) its tail
	headLen     int    // body[:headLen] is never cut
	omitted     int64
	scanned     int // body[:scanned] holds no until (but for its last len(until)-1 bytes)
	dropped     int64

	started, ended bool
	rest           []byte
}

func newCapture(c Capture) *capture {
	return &capture{Capture: c, from: []byte(c.From), until: []byte(c.Until)}
}

func (c *capture) feed(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	if !c.started {
		c.pre = append(c.pre, b...)
		i := bytes.Index(c.pre, c.from)
		if i < 0 {
			// Keep what a from split across reads needs, and the end
			// shown when the line never starts.
			if keep := c.MaxBytes + len(c.from); len(c.pre) > keep+compactSlack {
				c.omitted += int64(len(c.pre) - keep)
				c.pre = append([]byte(nil), c.pre[len(c.pre)-keep:]...)
			}
			return
		}
		nl := bytes.IndexByte(c.pre[i+len(c.from):], '\n')
		if nl < 0 {
			return
		}
		b = c.pre[i+len(c.from)+nl+1:]
		c.started, c.pre, c.omitted = true, nil, 0
	}
	c.body = append(c.body, b...)
	from := max(c.scanned-len(c.until)+1, 0)
	if i := bytes.Index(c.body[from:], c.until); i >= 0 {
		at := from + i
		if nl := bytes.IndexByte(c.body[at+len(c.until):], '\n'); nl >= 0 {
			c.rest = bytes.TrimRight(c.body[at+len(c.until):at+len(c.until)+nl], "\r")
			c.body = c.body[:at]
			c.ended = true
			return
		}
		// The marker's line is still arriving: keep the marker.
		c.scanned = at
		return
	}
	c.scanned = len(c.body)
	c.compact(c.MaxBytes + compactSlack)
}

// compact cuts the middle out of the body once it is over limit, keeping
// its first half bound and its last, with what an until split across
// reads needs.
func (c *capture) compact(limit int) {
	if len(c.body) <= limit {
		return
	}
	half := c.MaxBytes / 2
	c.headLen = min(max(c.headLen, half), len(c.body))
	keep := max(c.MaxBytes-c.headLen, 0) + len(c.until)
	if len(c.body)-c.headLen <= keep {
		return
	}
	cut := len(c.body) - c.headLen - keep
	c.omitted += int64(cut)
	c.body = append(c.body[:c.headLen:c.headLen], c.body[c.headLen+cut:]...)
	c.scanned -= cut
}

// lastLine is the output's last line as it stands, without its CRs; a
// line that may be the end marker arriving is not the output's, and the
// line before it is taken. Nothing before the start marker is: it holds
// the typed line.
func (c *capture) lastLine() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return nil
	}
	b := c.body
	if i := bytes.Index(b, c.until); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimRight(b, "\r\n")
	line := b[bytes.LastIndexByte(b, '\n')+1:]
	if len(line) > 0 && bytes.HasPrefix(c.until, line) {
		b = bytes.TrimRight(b[:len(b)-len(line)], "\r\n")
		line = b[bytes.LastIndexByte(b, '\n')+1:]
	}
	return bytes.Clone(bytes.TrimRight(line, "\r"))
}

func (c *capture) result() Captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Captured{Started: c.started, Ended: c.ended, Rest: string(c.rest), Dropped: c.dropped}
	if !c.started {
		data, omitted := c.pre, c.omitted
		if len(data) > c.MaxBytes {
			omitted += int64(len(data) - c.MaxBytes)
			data = data[len(data)-c.MaxBytes:]
		}
		r.Data, r.Omitted = data, omitted
		return r
	}
	c.compact(c.MaxBytes)
	if len(c.body) > c.MaxBytes {
		// Within the until kept for a split marker: cut to the bound.
		over := len(c.body) - c.MaxBytes
		c.omitted += int64(over)
		c.body = append(c.body[:c.headLen:c.headLen], c.body[c.headLen+over:]...)
	}
	r.Data, r.Omitted = c.body, c.omitted
	return r
}

// startGrace is how long a run that has not printed its start marker
// waits before a read of the terminal settles it (the typed line went to
// another program, which reads more).
const startGrace = time.Second

// shellStartGrace is startGrace when the reader is the shell itself: the
// typed line can only have gone to it, and a loaded machine may hand it
// over late (the kernel moves what the master wrote to the reader's queue
// in a worker of its own, which FIONREAD does not count), so a shell seen
// at its prompt is not yet a line that never started.
const shellStartGrace = 15 * time.Second

func graceFor(res settle.Result, shell int) time.Duration {
	if res.Pgrp == shell {
		return shellStartGrace
	}
	return startGrace
}

// maxCaptureBytes bounds what a capture may ask to keep.
const maxCaptureBytes = 16 << 20
