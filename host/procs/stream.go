package procs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/dshrun/dsh/host/procs/retention"
	"github.com/dshrun/dsh/internal/notify"
)

// Collected is one stream's output handed to a reader.
type Collected struct {
	// Data is the retained output: the tail, when older bytes were dropped.
	Data []byte
	// Total counts every byte the stream produced, read or not.
	Total int64
	// Truncated is true when bytes before Data were dropped unread.
	Truncated bool
	// Dropped counts those bytes exactly, DroppedLines the newlines in them.
	Dropped, DroppedLines int64
	// SpillPath is the spill file, set once the stream outgrew memory and
	// the file holds at least one byte.
	SpillPath string
	// SpillBytes is how many of the stream's first bytes the spill file
	// holds: it is always a prefix of the stream, never one with a hole.
	SpillBytes int64
	// SpillComplete is true when the spill file holds every byte the
	// stream produced so far.
	SpillComplete bool
	// SpillReason says why it does not, once a byte could not be kept;
	// SpillError is the system's word for the failure behind
	// SpillDiskFull, SpillDiskQuota, SpillWriteError and SpillCreateError.
	SpillReason SpillReason
	SpillError  string
}

// SpillReason is why a spill file stopped holding its stream.
type SpillReason string

const (
	SpillCap         SpillReason = "cap"          // the stream's MaxSpillBytes
	SpillBudget      SpillReason = "budget"       // MaxSpillTotal, shared by every spill file
	SpillOwnerBudget SpillReason = "owner_budget" // MaxSpillPerOwner, shared by the owner's spill files
	SpillDiskFull    SpillReason = "disk_full"    // ENOSPC, at creation or on a write
	SpillDiskQuota   SpillReason = "disk_quota"   // EDQUOT, at creation or on a write
	SpillWriteError  SpillReason = "write_error"  // any other failed write
	SpillCreateError SpillReason = "create_error" // the file could not be created
)

var newline = []byte{'\n'}

// stream collects one of a process's outputs: unread bytes in a bounded
// tail, everything (up to a cap) in a spill file created once the output no
// longer fits in memory.
type stream struct {
	m        *Manager
	owner    string
	path     string
	maxOut   int
	maxSpill int64
	spillAt  int // bytes held before the spill file starts (at most maxOut)

	mu       sync.Mutex
	unread   *retention.TextRetainer
	total    int64
	lines    int64    // newlines in all the output
	winLines int64    // lines when the unread window began
	pending  []byte   // the first maxOut bytes, until the stream spills
	spilling bool     // the output outgrew memory: a spill file was tried
	file     *os.File // the spill file, once created
	spilled  int64    // bytes in it: the stream's first ones
	lost     int64    // bytes the spill file does not hold
	reason   SpillReason
	errText  string

	// changed is the process's: told of every write, for Follow.
	changed *notify.Set
}

func newStream(m *Manager, spec Spec, id, name string, changed *notify.Set) *stream {
	return &stream{
		changed:  changed,
		m:        m,
		owner:    spec.Owner,
		path:     filepath.Join(m.ownerDir(spec.Owner), id+"."+name),
		maxOut:   spec.MaxOutputBytes,
		maxSpill: spec.MaxSpillBytes,
		spillAt:  spillAt(spec),
		// Collected output is bytes: no line scan in the retainer; the
		// stream counts newlines itself, one bytes.Count per write.
		unread: retention.NewTextRetainer(retention.Tail, spec.MaxOutputBytes, retention.WithoutLineCount()),
	}
}

// spillAt is how much of a stream is held before its spill file starts.
func spillAt(spec Spec) int {
	if n := spec.SpillAfterBytes; n > 0 && n < spec.MaxOutputBytes {
		return n
	}
	return spec.MaxOutputBytes
}

// Most commands print little, so a stream starts with a small buffer and
// the default pipe. A buffer a read fills doubles; one that reaches
// pourReadBuf means the command is pouring output: its pipe grows to
// bigPipe and the buffer with it, so it is read in fewer, larger reads
// (fewer wake-ups on both sides, and the tail retainer copies only the last
// maxOut bytes of each). Measured on 1 GiB in one process (no plugins):
// ~80 % of cat's throughput with the default pipe, ~95 % grown.
//
// A live job's streams are mostly quiet, so a stream that is not pouring
// holds no buffer while its pipe is empty: it waits for the pipe to be
// readable, then reads into a pooled buffer of the size its output has
// grown to. Hundreds of idle jobs then hold none. The size is a variable so
// that a buffer is never on the pump's stack, whose doubling would make it
// cost twice the buffer.
var minReadBuf = 512

const (
	pourReadBuf = 32 << 10
	bigPipe     = 1 << 20 // the default pipe-max-size, allowed to any user
)

// readBufs pools the buffers smaller than pourReadBuf, one pool a size
// (minReadBuf doubled i times).
var readBufs [6]sync.Pool

func bufClass(size int) int {
	for i := range readBufs {
		if minReadBuf<<i == size {
			return i
		}
	}
	return -1
}

func getBuf(size int) *[]byte {
	if c := bufClass(size); c >= 0 {
		if b, ok := readBufs[c].Get().(*[]byte); ok {
			return b
		}
	}
	b := make([]byte, size)
	return &b
}

// putBuf pools b unless it is a pouring stream's.
func putBuf(b *[]byte) {
	if c := bufClass(len(*b)); c >= 0 {
		readBufs[c].Put(b)
	}
}

func (s *stream) pump(r *os.File, wg *sync.WaitGroup) {
	defer wg.Done()
	defer r.Close()
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	size := minReadBuf
	var buf *[]byte
	defer func() {
		if buf != nil {
			putBuf(buf)
		}
	}()
	tried := false // to grow the pipe: once per stream
	var n int
	var rerr error
	// The file's poller waits while read says the pipe is empty.
	read := func(fd uintptr) bool {
		if buf == nil {
			buf = getBuf(size)
		}
		for {
			n, rerr = rawRead(fd, *buf)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			if size < pourReadBuf {
				putBuf(buf) // nothing held while quiet
				buf = nil
			}
			return false
		}
		return true
	}
	for {
		err := rc.Read(read)
		if n > 0 {
			_, _ = s.Write((*buf)[:n])
		}
		if err != nil || rerr != nil || n <= 0 {
			return // closed, failed, or at its end
		}
		if n == size && size < bigPipe {
			if size >= pourReadBuf && !tried {
				// Counted while the stream lasts, grown or not: past the
				// cap, pouring streams keep the default pipe.
				tried = true
				if s.m.bigPipes.Add(1) <= maxBigPipes {
					growPipe(r)
				}
				defer s.m.bigPipes.Add(-1)
			}
			putBuf(buf)
			size *= 2
			buf = getBuf(size)
		}
	}
}

// maxBigPipes bounds how many pipes are grown at once: each takes 256 of the
// user's pipe-user-pages-soft (16384 by default), past which every new pipe
// of the user's is created small.
const maxBigPipes = 16

// Write never fails: output that cannot be kept is counted as lost, with
// the reason.
func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.write(p)
	s.mu.Unlock()
	s.changed.Fire() // one atomic load while nobody follows
	return len(p), nil
}

// write keeps p; s.mu is held.
func (s *stream) write(p []byte) {
	s.total += int64(len(p))
	s.lines += int64(bytes.Count(p, newline))
	_, _ = s.unread.Write(p)
	if !s.spilling {
		if len(s.pending)+len(p) <= s.spillAt {
			s.pending = append(s.pending, p...)
			return
		}
		s.spilling = true
		s.openSpill()
	}
	s.spill(p)
}

// openSpill creates the spill file and writes the bytes held so far.
func (s *stream) openSpill() {
	pending := s.pending
	s.pending = nil
	err := os.MkdirAll(filepath.Dir(s.path), 0o700)
	if err == nil {
		s.file, err = os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		s.stop(SpillCreateError, err)
	}
	s.spill(pending)
}

// stop records why the spill file holds no more of the stream. Nothing is
// written after the first byte it could not take, so the file stays a
// prefix of the stream.
func (s *stream) stop(reason SpillReason, err error) {
	if s.reason != "" {
		return
	}
	switch {
	case errors.Is(err, syscall.ENOSPC):
		reason = SpillDiskFull
	case errors.Is(err, syscall.EDQUOT):
		reason = SpillDiskQuota
	}
	s.reason = reason
	if err != nil {
		s.errText = errText(err)
		s.m.log.Warn("spill file", "path", s.path, "reason", string(reason), "error", err)
	}
}

// errText is an error without the path it names (the notice has it).
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// spill appends to the file within the per-stream cap and the disk budget.
func (s *stream) spill(p []byte) {
	if s.reason != "" {
		s.lost += int64(len(p))
		return
	}
	n := min(int64(len(p)), max(s.maxSpill-s.spilled, 0))
	got, short := s.m.spill.take(s.owner, n)
	var w int
	if got > 0 {
		var err error
		w, err = s.file.Write(p[:got])
		s.spilled += int64(w)
		if err != nil {
			s.m.spill.give(s.owner, got-int64(w))
			s.stop(SpillWriteError, err)
		}
	}
	switch {
	case got < n:
		s.stop(short, nil)
	case n < int64(len(p)):
		s.stop(SpillCap, nil)
	}
	s.lost += int64(len(p) - w)
}

// finish closes the spill file. One that stopped at a limit ends by saying
// what it does not hold; after a failed write nothing more is written (the
// disk is full or failing); one that holds nothing is removed.
func (s *stream) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil {
		return
	}
	if s.lost > 0 && (s.reason == SpillCap || s.reason == SpillBudget || s.reason == SpillOwnerBudget) && s.spilled > 0 {
		fmt.Fprintf(s.file, "\n[dsh: %d more bytes were dropped (%s): this file holds the first %d of %d]\n", s.lost, s.reason, s.spilled, s.total)
	}
	_ = s.file.Close()
	if s.spilled == 0 {
		_ = os.Remove(s.path)
	}
}

// lastLine is the last line of the unread output as it stands (a line
// still being written included), without consuming anything.
func (s *stream) lastLine() []byte {
	s.mu.Lock()
	res := s.unread.Result()
	s.mu.Unlock()
	tail := strings.TrimRight(res.Head+res.Tail, "\n")
	if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	return []byte(tail)
}

// collect returns the unread output; consume starts a new unread window.
func (s *stream) collect(consume bool) Collected {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.unread.Result()
	c := Collected{
		Data:      []byte(res.Head + res.Tail),
		Total:     s.total,
		Truncated: res.Omitted.Bytes > 0,
		Dropped:   res.Omitted.Bytes,
	}
	if c.Truncated {
		// The window's newlines, less those still in Data.
		c.DroppedLines = s.lines - s.winLines - int64(bytes.Count(c.Data, newline))
	}
	if consume {
		s.unread = retention.NewTextRetainer(retention.Tail, s.maxOut, retention.WithoutLineCount())
		s.winLines = s.lines
	}
	if s.spilling {
		c.SpillBytes = s.spilled
		c.SpillComplete = s.reason == "" && s.spilled == s.total
		c.SpillReason, c.SpillError = s.reason, s.errText
		if s.file != nil && s.spilled > 0 {
			c.SpillPath = s.path
		}
	}
	return c
}

// spillBudget is the disk cap shared by every spill file, and the cap
// shared by the spill files of one owner.
type spillBudget struct {
	mu       sync.Mutex
	max      int64
	perOwner int64
	used     int64
	owner    map[string]int64
}

// take reserves up to n bytes for owner's spill file and returns how many
// it got and, when fewer than n, which budget ran out: the owner's when it
// is the tighter one, the host's when both are spent.
func (b *spillBudget) take(owner string, n int64) (int64, SpillReason) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var short SpillReason
	room, ownRoom := b.max-b.used, b.perOwner-b.owner[owner]
	switch {
	case n > ownRoom && ownRoom < room:
		n, short = max(ownRoom, 0), SpillOwnerBudget
	case n > room:
		n, short = max(room, 0), SpillBudget
	}
	b.used += n
	if b.owner == nil {
		b.owner = map[string]int64{}
	}
	b.owner[owner] += n
	return n, short
}

// give returns bytes taken but not written.
func (b *spillBudget) give(owner string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.owner[owner] -= n
}

func (b *spillBudget) release(owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= b.owner[owner]
	delete(b.owner, owner)
}

var _ io.Writer = (*stream)(nil)

// written counts every byte the stream produced.
func (s *stream) written() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}
