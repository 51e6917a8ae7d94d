package termsessions

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// A watcher that falls behind by more than the backlog is told so (and
// painted afresh by Watch) instead of holding the terminal up or growing
// without bound; one that keeps up gets every byte, and what is left when
// the terminal ends.
func TestWatchQueue(t *testing.T) {
	q := &watchQueue{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	var got bytes.Buffer
	q.Write([]byte("ab"))
	q.Write([]byte("cd"))
	close(done)
	if err := q.drain(context.Background(), done, func(b []byte) { got.Write(b) }); err != nil || got.String() != "abcd" {
		t.Fatalf("drain: %v, %q", err, got.String())
	}

	q = &watchQueue{more: make(chan struct{}, 1)}
	big := make([]byte, maxWatchBacklog/2+1)
	q.Write(big)
	q.Write(big) // past the backlog
	q.Write([]byte("late"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := q.drain(ctx, make(chan struct{}), func(b []byte) { t.Errorf("handed out %d bytes of a queue that fell behind", len(b)) })
	if !errors.Is(err, errBehind) {
		t.Fatalf("drain of a queue that fell behind: %v", err)
	}
	q.reset()
	if b, behind := q.take(); behind || len(b) != 0 {
		t.Fatalf("after reset: %d bytes, behind %v", len(b), behind)
	}
}
