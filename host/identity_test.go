//go:build unix

package host

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/sdk"
)

// The host stamps identity: a plugin cannot name the agent a request acts
// for, nor borrow a call id it was not reached by.
func TestPluginCannotChooseTheOwner(t *testing.T) {
	h := startTools(t, toolsYAML)
	// agent's background job and its process.
	res := callTool(t, h, "agent", "bash", bashCall("sleep 30", "run_in_background", true))
	id := jobIDOf(t, res.Text)
	agents, err := h.sub.Spawn(procs.Spec{Argv: []string{"sleep", "30"}, Dir: t.TempDir(), Owner: "agent"})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "host.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := h.newHostServer(fakeCaller{id: "intruder", keys: []string{"jobs", "subprocess"}})
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient("unix:"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jc, sc := jobsv1.NewJobsClient(conn), subprocessv1.NewSubprocessClient(conn)

	// Naming the owner in the request: refused, and the job lives on.
	if _, err := jc.Kill(ctx, &jobsv1.JobRef{Id: id, Owner: "agent"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("kill naming the owner: %v", err)
	}
	if _, err := jc.Read(ctx, &jobsv1.JobRef{Id: id, Owner: "agent"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("read naming the owner: %v", err)
	}
	// A forged call id, and a real one of a call that never reached this
	// plugin: refused the same way.
	live, end := h.calls.begin("agent", "tools")
	defer end()
	for _, forged := range []string{"0123456789abcdef0123456789abcdef", live} {
		fctx := metadata.AppendToOutgoingContext(ctx, sdk.MetaCall, forged)
		if _, err := jc.Kill(fctx, &jobsv1.JobRef{Id: id}); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("kill with call id %s: %v", forged, err)
		}
		if _, err := sc.Kill(fctx, &subprocessv1.ProcessRef{Id: agents.ID}); err == nil {
			t.Fatalf("subprocess kill of agent's process with call id %s went through", forged)
		}
	}
	// A process the intruder spawns is its own, whatever owner it names.
	st, err := sc.Start(ctx, &subprocessv1.SpawnRequest{Argv: []string{"true"}, Dir: t.TempDir(), Owner: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := h.sub.Get("intruder", st.Id); err != nil || p.Owner() != "intruder" {
		t.Fatalf("the intruder's process: %v %v", p, err)
	}
	if r := callTool(t, h, "agent", "job_output", map[string]string{"job_id": id}); !strings.Contains(r.Text, "still running") {
		t.Fatalf("agent's job after the attempts: %q", r.Text)
	}
	if st, _, _ := agents.State(); st != procs.Running {
		t.Fatalf("agent's process after the attempts: %s", st)
	}
}

// A plugin registers only the tools its description declares.
func TestUndeclaredToolIsRefused(t *testing.T) {
	h := startTools(t, toolsYAML)
	ld := h.find("tools").current()
	srv := tools.NewServer(h.tools.For(toolCaller{ld}))
	_, err := srv.Register(context.Background(), &toolsv1.ToolSpec{Name: "sneaky", Description: "d", InputSchema: `{"type":"object"}`})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `did not declare tool "sneaky"`) {
		t.Fatalf("undeclared tool: %v", err)
	}
	if _, ok := h.tools.Get("sneaky"); ok {
		t.Fatal("the undeclared tool was registered")
	}
}
