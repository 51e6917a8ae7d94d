package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startServeIn is startServe with the host's runtime directory (and so its
// spill files) under rtBase, and extra variables in its environment.
func startServeIn(t *testing.T, ctx context.Context, rtBase, compYAML string, env ...string) *serve {
	t.Helper()
	s := &serve{rtBase: rtBase, stderr: &syncBuffer{}}
	s.cmd = exec.Command(filepath.Join(binDir, "dsh"), "serve", writeComp(t, compYAML))
	s.cmd.Env = append(append(os.Environ(), env...), "XDG_RUNTIME_DIR="+s.rtBase)
	s.cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "reliability", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: s.cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", s.stderr)
		}
	})
	return s
}

// tool calls a tool and returns its text and structured content.
func (s *serve) tool(t *testing.T, ctx context.Context, name string, args map[string]any) (string, map[string]any) {
	t.Helper()
	if _, ok := args["description"]; !ok && name == "bash" {
		args["description"] = "reliability"
	}
	r, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v\nstderr:\n%s", name, args, err, s.stderr)
	}
	var out []string
	s.links = nil
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, c.Text)
		case *mcp.ResourceLink:
			s.links = append(s.links, c.Title)
		}
	}
	var facts map[string]any
	if r.StructuredContent != nil {
		b, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(b, &facts)
	}
	return strings.Join(out, "\n"), facts
}

// tmpfs mounts a tmpfs of size (mount options: "4m", "4m,nr_inodes=8") on
// a new folder for the test, or skips the test where mounting is not
// permitted.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		for i := 0; ; i++ {
			out, err := exec.Command("umount", dir).CombinedOutput()
			if err == nil {
				return
			}
			if i == 100 {
				t.Errorf("umount %s: %v: %s", dir, err, out)
				_ = exec.Command("umount", "-l", dir).Run()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}

func errorAs(err error, target any) bool { return errors.As(err, target) }
