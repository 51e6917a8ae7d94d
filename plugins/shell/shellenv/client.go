package shellenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/plugins/shell/shellenv/shellenvv1"
)

// Client is the Env of a provider reached over gRPC (usually through
// sdk.Host.Conn(shellenv.Key)).
type Client struct {
	c shellenvv1.ShellEnvClient
}

var _ Env = (*Client)(nil)

// NewClient wraps a connection to ctx.shellEnv.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: shellenvv1.NewShellEnvClient(conn)}
}

func (c *Client) Collect(ctx context.Context) (Snapshot, error) {
	resp, err := c.c.Collect(ctx, &shellenvv1.CollectRequest{})
	if err != nil {
		return Snapshot{}, fmt.Errorf("shellEnv collect: %w", err)
	}
	return Snapshot{Env: resp.Env, Generation: resp.Generation}, nil
}

func (c *Client) Register(ctx context.Context, name, value string) error {
	if _, err := c.c.Register(ctx, &shellenvv1.RegisterRequest{Name: name, Value: value}); err != nil {
		return fmt.Errorf("shellEnv register %s: %w", name, err)
	}
	return nil
}

func (c *Client) Unregister(ctx context.Context, name string) error {
	if _, err := c.c.Unregister(ctx, &shellenvv1.UnregisterRequest{Name: name}); err != nil {
		return fmt.Errorf("shellEnv unregister %s: %w", name, err)
	}
	return nil
}

func (c *Client) List(ctx context.Context) ([]Fact, error) {
	resp, err := c.c.List(ctx, &shellenvv1.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("shellEnv list: %w", err)
	}
	out := make([]Fact, 0, len(resp.Facts))
	for _, f := range resp.Facts {
		out = append(out, Fact{Name: f.Name, Value: f.Value, Owner: f.Owner})
	}
	return out, nil
}

// Follower keeps the latest snapshot of ctx.shellEnv through Watch, so a
// consumer that needs one on every command reads it without a round trip.
// Where no watch is live (the provider is being replaced, or does not serve
// Watch) Snapshot collects instead, so a caller always gets a current
// snapshot or an error.
type Follower struct {
	c      *Client
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	latest *Snapshot // nil while no watch is live
	last   *Snapshot // the last one delivered, live or not
}

// Follow starts following the provider until Close.
func (c *Client) Follow() *Follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{c: c, cancel: cancel, done: make(chan struct{})}
	go f.run(ctx)
	return f
}

// Retry pauses of the watch: short after a broken stream (a provider being
// replaced is back within milliseconds), long for a provider that does not
// serve Watch (it may be replaced by one that does).
const (
	watchRetryMin    = 20 * time.Millisecond
	watchRetryMax    = 2 * time.Second
	watchRetryUnimpl = 30 * time.Second
)

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	pause := watchRetryMin
	for ctx.Err() == nil {
		began := time.Now()
		got, err := f.watch(ctx)
		f.set(nil)
		if ctx.Err() != nil {
			return
		}
		switch {
		case status.Code(err) == codes.Unimplemented:
			pause = watchRetryUnimpl
		case got && time.Since(began) > watchRetryMax:
			// A watch that held for a while broke: the provider is
			// probably being replaced and back at once.
			pause = watchRetryMin
		default:
			pause = min(2*pause, watchRetryMax)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// watch follows one stream until it breaks; got reports whether it
// delivered anything.
func (f *Follower) watch(ctx context.Context) (got bool, err error) {
	stream, err := f.c.c.Watch(ctx, &shellenvv1.WatchRequest{})
	if err != nil {
		return false, err
	}
	for {
		snap, err := stream.Recv()
		if err != nil {
			return got, err
		}
		got = true
		f.set(&Snapshot{Env: snap.Env, Generation: snap.Generation})
	}
}

func (f *Follower) set(s *Snapshot) {
	f.mu.Lock()
	f.latest = s
	if s != nil {
		f.last = s
	}
	f.mu.Unlock()
}

// Snapshot returns the latest snapshot the watch delivered, or collects
// one when no watch is live. When the provider cannot be reached (it
// crashed and is restarting, or hangs) it returns the last snapshot it
// had, with Stale set: a command is better run with the last trusted
// facts than not at all. The maps of a watched snapshot are shared:
// callers must not change them.
func (f *Follower) Snapshot(ctx context.Context) (Snapshot, error) {
	f.mu.Lock()
	s, last := f.latest, f.last
	f.mu.Unlock()
	if s != nil {
		return *s, nil
	}
	snap, err := f.c.Collect(ctx)
	if err != nil && last != nil && ctx.Err() == nil {
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded:
			stale := *last
			stale.Stale = true
			return stale, nil
		}
	}
	return snap, err
}

// Close stops following and waits for the watch to end.
func (f *Follower) Close() {
	f.cancel()
	<-f.done
}
