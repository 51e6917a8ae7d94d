package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

func TestVersionFlags(t *testing.T) {
	want, _, _ := dsh(t, nil, "version")
	for _, flag := range []string{"--version", "-version", "-v"} {
		out, errOut, code := dsh(t, nil, flag)
		if code != 0 || out != want {
			t.Errorf("dsh %s: exit %d, stdout %q (dsh version: %q), stderr %s", flag, code, out, want, errOut)
		}
	}
}

// serve --http with an address it cannot listen on fails at once, in one
// sentence, before any plugin starts.
func TestServeHTTPBadAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct{ addr, says string }{
		{"nonsense", "HOST:PORT"},
		{taken.Addr().String(), "another process listens there"},
	} {
		script, started, _ := wrapped(t, "shell-env")
		f := comp(t, strings.Replace(toolsComp, "name: shell-env", "path: "+script, 1))
		begin := time.Now()
		out, errOut, code := dsh(t, nil, "serve", "--http", c.addr, f)
		took := time.Since(begin)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], fmt.Sprintf("dsh serve: cannot listen on %q", c.addr)) || !strings.Contains(lines[0], c.says) {
			t.Errorf("--http %s: exit %d, stdout %q, stderr:\n%s", c.addr, code, out, errOut)
		}
		if exists(started) {
			t.Errorf("--http %s: a plugin was started (after %v)", c.addr, took)
		}
		if left := testplugins.Running(binDir); len(left) > 0 {
			t.Fatalf("--http %s: processes left: %v", c.addr, left)
		}
		t.Logf("--http %s: exit %d after %v", c.addr, code, took.Round(time.Millisecond))
	}
}

// dsh call refuses a background job, which could never be read: it would
// be stopped as dsh call ends. Nothing starts.
func TestCallRefusesBackground(t *testing.T) {
	script, started, _ := wrapped(t, "shell-env")
	f := comp(t, strings.Replace(toolsComp, "name: shell-env", "path: "+script, 1))
	out, errOut, code := dsh(t, nil, "call", f, "bash", `{"command":"sleep 5","description":"d","run_in_background":true}`)
	if code != 2 || out != "" || !strings.Contains(errOut, "dsh call: run_in_background is refused here: dsh call stops every job it started when it exits") ||
		!strings.Contains(errOut, "dsh serve") || strings.Contains(errOut, "job_output") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if exists(started) {
		t.Fatal("a plugin was started for a refused call")
	}
	// false is the default: the call runs.
	out, errOut, code = dsh(t, nil, "call", f, "bash", `{"command":"echo fg","description":"d","run_in_background":false}`)
	if code != 0 || out != "fg\n" {
		t.Fatalf("run_in_background false: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
}

// dsh status --json: camelCase keys, every key present, uptimeMs in
// milliseconds, empty lists as [].
func TestStatusJSON(t *testing.T) {
	rt := serveTools(t)
	time.Sleep(1100 * time.Millisecond) // an uptime of at least a second
	out, errOut, code := dsh(t, []string{"XDG_RUNTIME_DIR=" + rt}, "status", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, k := range []string{"composition", "pid", "limits", "entries"} {
		if _, ok := top[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(top["entries"], &entries); err != nil || len(entries) != 3 {
		t.Fatalf("entries: %v\n%s", err, out)
	}
	keys := []string{"id", "name", "binary", "disabled", "state", "reason", "pid", "restarts", "uptimeMs", "version", "provides", "tools"}
	for _, e := range entries {
		var missing []string
		for _, k := range keys {
			if _, ok := e[k]; !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 || len(e) != len(keys) {
			t.Fatalf("entry lacks %v (want exactly %v):\n%s", missing, keys, out)
		}
		for _, k := range []string{"provides", "tools"} {
			if !strings.HasPrefix(string(e[k]), "[") {
				t.Errorf("%s of %s is %s, want a list", k, e["id"], e[k])
			}
		}
		var ms int64
		if err := json.Unmarshal(e["uptimeMs"], &ms); err != nil || ms < 1000 || ms > 10*60*1000 {
			t.Errorf("uptimeMs of %s: %s (want milliseconds, at least 1000)", e["id"], e["uptimeMs"])
		}
	}
	compact := func(raw json.RawMessage) string {
		var b bytes.Buffer
		_ = json.Compact(&b, raw)
		return b.String()
	}
	if string(entries[0]["id"]) != `"env"` || compact(entries[0]["tools"]) != "[]" {
		t.Errorf("env's tools: %s (want [])", entries[0]["tools"])
	}
	if got := compact(entries[2]["tools"]); got != `["bash","job_output","job_kill","job_list"]` {
		t.Errorf("tool-bash's tools: %s", got)
	}
}
