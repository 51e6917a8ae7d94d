package subprocess

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dshrun/dsh/sdk/retention"
)

// Collected is one stream's output handed to a reader.
type Collected struct {
	// Data is the retained output: the tail, when older bytes were dropped.
	Data []byte
	// Total counts every byte the stream produced, read or not.
	Total int64
	// Truncated is true when bytes before Data were dropped unread.
	Truncated bool
	// Dropped counts those bytes exactly.
	Dropped int64
	// SpillPath is the file holding the whole stream (up to its cap), set
	// once the stream outgrew memory.
	SpillPath string
}

// stream collects one of a process's outputs: unread bytes in a bounded
// tail, everything (up to a cap) in a spill file created once the output no
// longer fits in memory.
type stream struct {
	m        *Manager
	owner    string
	path     string
	maxOut   int
	maxSpill int64

	mu      sync.Mutex
	unread  *retention.TextRetainer
	total   int64
	pending []byte   // the first maxOut bytes, until a spill file exists
	file    *os.File // the spill file, once created
	spilled int64
	lost    int64 // bytes the spill file could not hold
	failed  error
}

func newStream(m *Manager, spec Spec, id, name string) *stream {
	return &stream{
		m:        m,
		owner:    spec.Owner,
		path:     filepath.Join(m.ownerDir(spec.Owner), id+"."+name),
		maxOut:   spec.MaxOutputBytes,
		maxSpill: spec.MaxSpillBytes,
		// Collected output speaks of bytes, never lines: no line scan.
		unread: retention.NewTextRetainer(retention.Tail, spec.MaxOutputBytes, retention.WithoutLineCount()),
	}
}

// Most commands print little, so a stream starts with a small buffer and
// the default pipe. A command that keeps filling the buffer is pouring
// output: its pipe grows to bigPipe and the buffer with it, so it is read
// in fewer, larger reads (fewer wake-ups on both sides, and the tail
// retainer copies only the last maxOut bytes of each). Measured on 1 GiB in
// one process (no plugins): ~80 % of cat's throughput with the default
// pipe, ~95 % grown.
const (
	minReadBuf = 32 << 10
	bigPipe    = 1 << 20 // the default pipe-max-size, allowed to any user
)

func (s *stream) pump(r *os.File, wg *sync.WaitGroup) {
	defer wg.Done()
	defer r.Close()
	buf := make([]byte, minReadBuf)
	tried := false // to grow the pipe: once per stream
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = s.Write(buf[:n])
		}
		if err != nil {
			return
		}
		if n == len(buf) && len(buf) < bigPipe {
			if !tried {
				// Counted while the stream lasts, grown or not: past the
				// cap, pouring streams keep the default pipe.
				tried = true
				if s.m.bigPipes.Add(1) <= maxBigPipes {
					growPipe(r)
				}
				defer s.m.bigPipes.Add(-1)
			}
			buf = make([]byte, 2*len(buf))
		}
	}
}

// maxBigPipes bounds how many pipes are grown at once: each takes 256 of the
// user's pipe-user-pages-soft (16384 by default), past which every new pipe
// of the user's is created small.
const maxBigPipes = 16

// growPipe raises a pipe's capacity to bigPipe. Only streams that pour
// output get it: big pipes count against the user's pipe-user-pages-soft.
// Where the kernel refuses, the pipe stays as it was.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, bigPipe)
		})
	}
}

// Write never fails: output that cannot be kept is counted as lost.
func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += int64(len(p))
	_, _ = s.unread.Write(p)
	if s.file == nil && s.failed == nil {
		if len(s.pending)+len(p) <= s.maxOut {
			s.pending = append(s.pending, p...)
			return len(p), nil
		}
		if err := s.openSpill(); err != nil {
			s.failed = err
			s.m.log.Warn("spill file", "path", s.path, "error", err)
		}
	}
	if s.file != nil {
		s.spill(p)
	} else {
		s.lost += int64(len(p))
	}
	return len(p), nil
}

func (s *stream) openSpill() error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	s.file = f
	pending := s.pending
	s.pending = nil
	s.spill(pending)
	return nil
}

// spill appends to the file within the per-stream cap and the disk budget.
func (s *stream) spill(p []byte) {
	room := s.maxSpill - s.spilled
	if room < 0 {
		room = 0
	}
	n := int64(len(p))
	if n > room {
		n = room
	}
	n = s.m.spill.take(s.owner, n)
	if n > 0 {
		w, err := s.file.Write(p[:n])
		s.spilled += int64(w)
		if err != nil {
			n = int64(w)
		}
	}
	s.lost += int64(len(p)) - n
}

// finish closes the spill file, saying at its end what it could not hold.
func (s *stream) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil {
		return
	}
	if s.lost > 0 {
		fmt.Fprintf(s.file, "\n[dsh: %d more bytes were dropped: this file holds the first %d of %d]\n", s.lost, s.spilled, s.total)
	}
	_ = s.file.Close()
}

// collect returns the unread output; consume starts a new unread window.
func (s *stream) collect(consume bool) Collected {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.unread.Result()
	if consume {
		s.unread = retention.NewTextRetainer(retention.Tail, s.maxOut, retention.WithoutLineCount())
	}
	c := Collected{
		Data:      []byte(res.Head + res.Tail),
		Total:     s.total,
		Truncated: res.Omitted.Bytes > 0,
		Dropped:   res.Omitted.Bytes,
	}
	if s.file != nil {
		c.SpillPath = s.path
	}
	return c
}

// spillBudget is the disk cap shared by every spill file.
type spillBudget struct {
	mu    sync.Mutex
	max   int64
	used  int64
	owner map[string]int64
}

func (b *spillBudget) take(owner string, n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.used; n > room {
		n = max(room, 0)
	}
	b.used += n
	if b.owner == nil {
		b.owner = map[string]int64{}
	}
	b.owner[owner] += n
	return n
}

func (b *spillBudget) release(owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= b.owner[owner]
	delete(b.owner, owner)
}

var _ io.Writer = (*stream)(nil)
