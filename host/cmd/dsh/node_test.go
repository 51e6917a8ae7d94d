package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testneeds"
	"github.com/dshrun/dsh/internal/testplugins"
)

// tsSDK is the folder of the official TypeScript SDK client
// (test/mcp-node) and the node that runs it. make test installs it (npm ci
// there) and then sets DSH_NODE_TESTS=1, as .ci/run does, which turns a
// missing install into a failure instead of a skip.
func tsSDK(t *testing.T) (dir, node string) {
	t.Helper()
	dir = filepath.Join(testplugins.Root(), "test", "mcp-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		if os.Getenv("DSH_NODE_TESTS") == "1" {
			t.Fatalf("the TypeScript SDK is not installed in %s (npm ci there): %v", dir, err)
		}
		t.Skipf("the TypeScript SDK client is not installed in %s: make test installs it when node and npm are there (%s), or run npm ci there", dir, testneeds.Install("npm"))
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed")
	}
	return dir, node
}

// An independent client: the official TypeScript SDK (test/mcp-node), over
// stdio and HTTP.
func TestMCPNodeClient(t *testing.T) {
	dir, node := tsSDK(t)
	type result struct {
		ProtocolVersion *string  `json:"protocolVersion"`
		SessionID       *string  `json:"sessionId"`
		Tools           []string `json:"tools"`
		Exit3           struct {
			Text     string `json:"text"`
			IsError  bool   `json:"isError"`
			ExitCode int    `json:"exitCode"`
		} `json:"exit3"`
		Job struct {
			Output string `json:"output"`
		} `json:"job"`
		Cancelled string `json:"cancelled"`
		SpillLink string `json:"spillLink"`
		Spill     struct {
			Bytes int    `json:"bytes"`
			First string `json:"first"`
			Last  string `json:"last"`
		} `json:"spill"`
		EmptySpill struct {
			Text  *string `json:"text"`
			Blob  *string `json:"blob"`
			Error string  `json:"error"`
		} `json:"emptySpill"`
	}
	check := func(t *testing.T, marker string, args ...string) result {
		cmd := exec.Command(node, append([]string{"client.mjs"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("node client: %v\n%s\n%s", err, out, stderr)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if strings.Join(r.Tools, ",") != "bash,job_kill,job_list,job_output" {
			t.Errorf("tools %v", r.Tools)
		}
		if r.Exit3.Text != "hi\n[exit code: 3]" || !r.Exit3.IsError || r.Exit3.ExitCode != 3 {
			t.Errorf("exit 3: %+v", r.Exit3)
		}
		for _, w := range []string{"n1", "n5", "finished]"} {
			if !strings.Contains(r.Job.Output, w) {
				t.Errorf("job output lacks %s: %q", w, r.Job.Output)
			}
		}
		if r.Cancelled != "aborted" {
			t.Errorf("cancelled call: %s", r.Cancelled)
		}
		waitGone(t, "sleep "+marker, 10*time.Second)
		if r.SpillLink == "" || r.Spill.First != "1\n2\n" || r.Spill.Last != "30000\n" || r.Spill.Bytes != 168894 {
			t.Errorf("spill resource: %q %+v", r.SpillLink, r.Spill)
		}
		if e := r.EmptySpill; e.Text == nil || *e.Text != "" || e.Blob != nil || e.Error != "" {
			t.Errorf("empty spill resource: %+v (text %v), want an empty text content", e, e.Text)
		}
		return r
	}
	t.Run("stdio", func(t *testing.T) {
		marker := strconv.Itoa(400000 + os.Getpid()%99999)
		check(t, marker, "stdio", marker, filepath.Join(binDir, "dsh"), "serve", comp(t, toolsComp))
	})
	t.Run("http", func(t *testing.T) {
		url, token, _ := serveHTTPForTest(t)
		marker := strconv.Itoa(450000 + os.Getpid()%99999)
		r := check(t, marker, "http", marker, url, token)
		if r.ProtocolVersion == nil || *r.ProtocolVersion != "2025-11-25" || r.SessionID == nil || *r.SessionID == "" {
			t.Errorf("HTTP: protocol %v, session %v; want 2025-11-25 with a session", r.ProtocolVersion, r.SessionID)
		}
	})
}
