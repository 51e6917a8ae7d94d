package shellenv

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/sdk"
)

// Each kind of error crosses the wire and comes back as itself, with the
// implementation's message and no transport words.
func TestAdaptersRoundTripErrors(t *testing.T) {
	ctx := context.Background()
	reg := newStore("/h")
	fake := over(reg, "p")
	fake.collect = func(context.Context) (Snapshot, error) {
		return Snapshot{}, sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, "plugin exited")
	}
	fake.list = func(context.Context) ([]Fact, error) {
		return nil, seam.New(sdk.ErrPermissionDenied, "not yours")
	}
	fake.watch = func(context.Context, func(Snapshot) error) error {
		return seam.New(sdk.ErrUnimplemented, "no watch here")
	}
	sock := filepath.Join(t.TempDir(), "env.sock")
	defer serve(t, sock, NewServer(fake))()
	c := dial(t, sock)
	var _ Env = c

	err := c.Register(ctx, "NOT_A_FACT", "x")
	var fe *FactError
	if !errors.As(reg.Register("p", "NOT_A_FACT", "x"), &fe) || !errors.Is(err, ErrRefused) || err.Error() != fe.Error() {
		t.Errorf("refused: %v", err)
	}
	if err := c.Register(ctx, "DSH_A", "1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Unregister(ctx, "DSH_B"); !errors.Is(err, ErrRefused) {
		t.Errorf("unregister of no fact: %v", err)
	}
	if _, err := c.Collect(ctx); !errors.Is(err, sdk.ErrProviderGone) || err.Error() != "shellEnv collect: plugin exited" {
		t.Errorf("collect through a gone provider: %v", err)
	}
	if _, err := c.List(ctx); !errors.Is(err, sdk.ErrPermissionDenied) || errors.Is(err, ErrRefused) {
		t.Errorf("list refused by the vocabulary: %v", err)
	}
	if err := c.Watch(ctx, func(Snapshot) error { return nil }); !errors.Is(err, sdk.ErrUnimplemented) {
		t.Errorf("watch of a provider without it: %v", err)
	}

	fake.unregister = func(context.Context, string) error { return errors.New("disk on fire") }
	if err := c.Unregister(ctx, "DSH_A"); err == nil || errors.Is(err, ErrRefused) || err.Error() != "shellEnv unregister DSH_A: disk on fire" {
		t.Errorf("an error of no kind: %v", err)
	}
}

// Watch delivers every snapshot in order, and a consumer that stops
// receiving ends it with its own error.
func TestAdaptersRoundTripWatch(t *testing.T) {
	reg := newStore("/h")
	sock := filepath.Join(t.TempDir(), "env.sock")
	defer serve(t, sock, NewServer(over(reg, "p")))()
	c := dial(t, sock)

	enough := errors.New("enough")
	var gens []uint64
	err := c.Watch(context.Background(), func(s Snapshot) error {
		gens = append(gens, s.Generation)
		if len(gens) == 3 {
			return enough
		}
		return reg.Register("p", "DSH_N", string(rune('a'+len(gens))))
	})
	if !errors.Is(err, enough) || len(gens) != 3 || gens[0] >= gens[1] || gens[1] >= gens[2] {
		t.Fatalf("watch: %v, generations %v", err, gens)
	}
	if l, err := c.List(context.Background()); err != nil || len(l) != 2 || l[1].Name != "DSH_N" || l[1].Owner != "p" {
		t.Fatalf("list: %v %v", l, err)
	}
}
