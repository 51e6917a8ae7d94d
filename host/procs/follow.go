package procs

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Following a process's output without reading it: the person who runs
// the host watches what a job prints from its first byte, while the job's
// owner still reads all of it. What a stream printed is kept in two
// places besides the unread tail a read consumes: its first bytes in
// memory until they outgrow it, then the spill file, which holds the
// stream from its start up to the file's cap or the disk budget. Past
// that, only the unread tail's last bytes are there to see.

// followChunk bounds what one hand-out of Follow carries.
const followChunk = 64 << 10

// Follow hands out, through out, what the process prints on stdout
// ("stdout") and stderr ("stderr"), each from its first byte, then as it
// comes, consuming nothing: Read still returns all of it. Bytes kept
// nowhere any more are skipped with a note. It returns nil once the
// process is done and all it printed was handed out, or ctx's error.
func (p *Process) Follow(ctx context.Context, out func(stream string, data []byte)) error {
	changed, stop := p.changed.Subscribe()
	defer stop()
	var cur [2]int64 // offsets in stdout, stderr
	streams := [2]*stream{p.stdout, p.stderr}
	names := [2]string{"stdout", "stderr"}
	for {
		// Done first: once it is, the streams hold everything, and what
		// is handed out below is all there is.
		done := false
		select {
		case <-p.done:
			done = true
		default:
		}
		for i, s := range streams {
			for ctx.Err() == nil {
				data, next, skipped := s.peek(cur[i], followChunk)
				if skipped > 0 {
					out(names[i], fmt.Appendf(nil, "\n[dsh: %d bytes of %s are not kept, so they are not shown]\n", skipped, names[i]))
				}
				if len(data) > 0 {
					out(names[i], data)
				}
				if next == cur[i] {
					break
				}
				cur[i] = next
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// peek returns up to limit bytes of the stream from offset from, without
// consuming them; next is the offset after them, skipped counts bytes at
// from that are kept nowhere (jumped over to reach data).
func (s *stream) peek(from int64, limit int) (data []byte, next int64, skipped int64) {
	s.mu.Lock()
	total := s.total
	if from >= total {
		s.mu.Unlock()
		return nil, from, 0
	}
	if !s.spilling {
		// Everything so far is in pending.
		end := min(total, from+int64(limit))
		data = append([]byte(nil), s.pending[from:end]...)
		s.mu.Unlock()
		return data, end, 0
	}
	spilled, path := s.spilled, s.path
	var tail []byte
	if from >= spilled {
		// Past the spill file: only the unread tail's bytes, the
		// stream's last ones, are left to see.
		res := s.unread.Result()
		tail = []byte(res.Head + res.Tail)
	}
	s.mu.Unlock()
	if from < spilled {
		// The file holds the stream's first spilled bytes, written before
		// they were counted: read them without the lock.
		end := min(spilled, from+int64(limit))
		data, err := readAt(path, from, int(end-from))
		if err != nil || len(data) == 0 {
			// The file went (its owner was released): what it held is
			// gone, and so is the rest.
			return nil, total, total - from
		}
		return data, from + int64(len(data)), 0
	}
	start := total - int64(len(tail))
	if from < start {
		skipped = start - from
		from = start
	}
	end := min(total, from+int64(limit))
	return tail[from-start : end-start], end, skipped
}

// readAt reads n bytes of the file at path from off.
func readAt(path string, off int64, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	got, err := f.ReadAt(b, off)
	if err == io.EOF {
		err = nil
	}
	return b[:got], err
}
