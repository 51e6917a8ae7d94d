package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/bounded"
)

// wrapped is a plugin binary of binDir started through a script, which
// touches started on each start, and exits 3 without starting the plugin
// while the file broken exists.
func wrapped(t *testing.T, name string) (script, started, broken string) {
	t.Helper()
	dir := t.TempDir()
	script = filepath.Join(dir, "dsh-"+name+"-wrapped")
	started, broken = filepath.Join(dir, "started"), filepath.Join(dir, "broken")
	body := fmt.Sprintf("#!/bin/sh\ntouch %s\nif [ -e %s ]; then echo 'broken on purpose' >&2; exit 3; fi\nexec %s \"$@\"\n",
		started, broken, filepath.Join(binDir, "dsh-"+name))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, started, broken
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// statusOf is entry id's status from dsh status --json.
func statusOf(t *testing.T, rt, id string) (state, reason string, pid int) {
	t.Helper()
	out, errOut, code := dsh(t, []string{"XDG_RUNTIME_DIR=" + rt}, "status", "--json")
	if code != 0 {
		t.Fatalf("dsh status: exit %d: %s", code, errOut)
	}
	var st struct {
		Entries []struct {
			ID, State, Reason string
			Pid               int
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("dsh status --json: %v\n%s", err, out)
	}
	for _, e := range st.Entries {
		if e.ID == id {
			return e.State, e.Reason, e.Pid
		}
	}
	t.Fatalf("no entry %q in %s", id, out)
	return "", "", 0
}

// A tool whose plugin, or whose executor, crash-loops stays listed and
// answers one sentence (isError) naming the plugin that is down, its
// binary, why and how it comes back; `dsh reload` brings it back.
func TestToolStaysWhileItsPluginIsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*bounded.Bound)
	defer cancel()
	bashScript, _, bashBroken := wrapped(t, "bash-local")
	toolsScript, _, toolsBroken := wrapped(t, "tool-bash")
	yaml := strings.Replace(toolsComp, "name: bash-local", "path: "+bashScript, 1)
	yaml = strings.Replace(yaml, "name: tool-bash", "path: "+toolsScript, 1)
	rt := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "dsh"), "serve", comp(t, yaml))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	listed := func() string {
		t.Helper()
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		return strings.Join(names, ",")
	}
	if r := callBash(t, ctx, cs, map[string]any{"command": "echo up"}); text(t, r) != "up" {
		t.Fatalf("before: %q", text(t, r))
	}

	for _, c := range []struct {
		id, script, broken string
		says               []string
	}{
		{"bash", bashScript, bashBroken, []string{"The bash tool is unavailable: it needs ctx.shell, whose plugin \"bash\" (" + bashScript + ") has failed: crash loop", "dsh reload bash", "Its last error: a new process could not start"}},
		{"tools", toolsScript, toolsBroken, []string{"The bash tool is unavailable: its plugin \"tools\" (" + toolsScript + ") has failed: crash loop", "dsh reload tools", "Its last error: a new process could not start"}},
	} {
		// Every restart fails: five crashes make a crash loop.
		if err := os.WriteFile(c.broken, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, pid := statusOf(t, rt, c.id)
		proc, err := os.FindProcess(pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := proc.Kill(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(bounded.Bound); ; time.Sleep(100 * time.Millisecond) {
			if st, _, _ := statusOf(t, rt, c.id); st == "failed" {
				break
			}
			if time.Now().After(deadline) {
				st, why, _ := statusOf(t, rt, c.id)
				t.Fatalf("%s not failed within %v: %s (%s)", c.id, bounded.Bound, st, why)
			}
		}
		if got := listed(); got != "bash,job_kill,job_list,job_output" {
			t.Errorf("%s down: tools listed %q", c.id, got)
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi", "description": "d"}})
		if err != nil {
			t.Fatalf("%s down: the call failed as a protocol error: %v", c.id, err)
		}
		got := text(t, r)
		t.Logf("%s down: %s", c.id, got)
		if !r.IsError || strings.Count(got, "\n") > 0 {
			t.Errorf("%s down: isError %v, text %q", c.id, r.IsError, got)
		}
		for _, w := range c.says {
			if !strings.Contains(got, w) {
				t.Errorf("%s down: the answer lacks %q:\n%s", c.id, w, got)
			}
		}
		for _, w := range []string{"rpc", "RPC", "unknown tool"} {
			if strings.Contains(got, w) {
				t.Errorf("%s down: the answer says %q:\n%s", c.id, w, got)
			}
		}
		select {
		case <-changed:
			t.Errorf("%s down: tools/list_changed was sent", c.id)
		default:
		}

		if err := os.Remove(c.broken); err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := dsh(t, []string{"XDG_RUNTIME_DIR=" + rt}, "reload", c.id); code != 0 {
			t.Fatalf("reload %s: exit %d: %s", c.id, code, errOut)
		}
		for deadline := time.Now().Add(bounded.Bound); ; time.Sleep(100 * time.Millisecond) {
			if st, _, _ := statusOf(t, rt, "tools"); st == "active" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tools not active again after reload %s", c.id)
			}
		}
		if r := callBash(t, ctx, cs, map[string]any{"command": "echo back"}); text(t, r) != "back" || r.IsError {
			t.Fatalf("after reload %s: %q", c.id, text(t, r))
		}
	}
}
