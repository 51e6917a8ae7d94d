// Package procstest serves a real ctx.subprocess (host/procs) to tests of
// executors, over an in-memory gRPC connection, the way the host serves it
// to an executor plugin.
package procstest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/sdk"
)

// Serve is ctx.subprocess for the plugin caller: commands see PATH and
// environ (KEY=VALUE), spill files go under the test's temporary folder,
// and every process is ended when the test ends.
func Serve(t *testing.T, caller string, environ ...string) subprocess.Processes {
	t.Helper()
	m, err := procs.New(procs.Config{
		SpillDir: filepath.Join(t.TempDir(), "spill"),
		Environ:  func() []string { return append([]string{"PATH=" + os.Getenv("PATH")}, environ...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(sdk.ServerOptions()...)
	subprocessv1.RegisterSubprocessServer(srv, subprocess.NewServer(&procs.Service{M: m, Caller: caller}))
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn", append(sdk.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close ctx.subprocess: %v", err)
		}
	})
	return subprocess.NewClient(conn)
}
