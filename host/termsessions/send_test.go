//go:build linux

package termsessions

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dshrun/dsh/core/terminals"
)

// One send at a time: a second one while the first is in flight is
// refused, and a signal still gets through.
func TestSendActive(t *testing.T) {
	f := newFixture(t, nil)
	in := f.open(t, "agent", OpenRequest{})
	f.readToPrompt(t, "agent", in.ID, "")
	// The first send the backend is asked for holds until released; the
	// later ones pass. Which send is first is counted, never guessed from
	// whether the test happens to be receiving yet.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var sends atomic.Int32
	f.b.onSend = func(ctx context.Context) error {
		if sends.Add(1) != 1 {
			return nil
		}
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := f.m.Send(ctx, "agent", in.ID, "echo fi''rst", true, "")
		done <- err
	}()
	receive(t, entered, "the first send reaching the backend")
	_, err := f.m.Send(context.Background(), "agent", in.ID, "echo second", true, "")
	if !errors.Is(err, terminals.ErrSendActive) {
		t.Fatalf("a second send: %v", err)
	}
	// (SIGTSTP, which an interactive shell at its prompt ignores.)
	if ok, _, err := f.m.Signal("agent", in.ID, "SIGTSTP", false); err != nil || !ok {
		t.Fatalf("a signal during a send: %v %v", ok, err)
	}
	close(release)
	if err := receive(t, done, "the first send"); err != nil {
		t.Fatal(err)
	}
	f.readToPrompt(t, "agent", in.ID, "first")
	f.send(t, "agent", in.ID, "echo th''ird")
	f.readToPrompt(t, "agent", in.ID, "third")
}
