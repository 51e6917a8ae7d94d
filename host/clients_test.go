package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/internal/syncbuf"
)

// The clients section is read when dsh serve starts: an edit says so,
// and one that changes nothing of it (its lines moved) says nothing.
func TestClientsSectionChangeWants(t *testing.T) {
	const plugins = "plugins:\n  - id: env\n    name: shell-env\n"
	opts := testOptions(t, nil)
	logs := &syncbuf.Buffer{}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: logs})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, writeComp(t, "clients:\n  owners: resumable\n"+plugins), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
	const warning = "the clients section changed"
	if err := h.ApplyComposition(ctx, writeComp(t, "# moved down a line\nclients:\n  owners: resumable\n"+plugins)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("warned of a section that did not change:\n%s", logs)
	}
	if err := h.ApplyComposition(ctx, writeComp(t, "clients:\n  owners: connection\n"+plugins)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), warning+"; it is read at start only: restart dsh to apply it") {
		t.Fatalf("no warning of a changed clients section:\n%s", logs)
	}
}
