//go:build linux

package console

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshrun/dsh/internal/testplugins"
)

// consoleComp is the composition under test: a sandboxed bash (so an
// escalation out of the sandbox asks), its tools, terminals, and approval
// asked of the client and the console (the go-sdk client here cannot
// elicit, so the console alone answers). %s is the workspace.
const consoleComp = `sandbox:
  defaultMode: workspace-write
  workspaceRoot: %s
  network: false
approval:
  channels: [client, console]
  rules:
    - {match: "rm -rf *", decision: deny}
    - {match: "echo esc-*", decision: ask}
  otherwise: ask
  askTimeout: 2m
plugins:
  - id: env
    name: shell-env
  - id: bash
    name: bash-sandbox
  - id: tools
    name: tool-bash
  - id: term-bash
    name: terminal-bash
  - id: terminal-tools
    name: tool-terminal
`

// entries maps each entry of consoleComp to its plugin.
var entries = map[string]string{
	"env":            "shell-env",
	"bash":           "bash-sandbox",
	"tools":          "tool-bash",
	"term-bash":      "terminal-bash",
	"terminal-tools": "tool-terminal",
}

var termIDRE = regexp.MustCompile(`terminal (t\d+-[0-9a-f]+)`)

// The console in a browser, against a real dsh serve --http: login and
// its refusals, the composition, a plugin's restart and reload, a job's
// output and kill, a terminal's screen and typing into it, a call
// cancelled, approvals answered in the page, the logs, a broken edit and
// a good one, and the page's connection as the host stops. The subtests
// run in order on one host, each printing what it checked; each runs
// alone too (-run 'TestConsoleInBrowser/terminal', on a session from dsh
// console), except logs, which reads what the ones before it logged.
//
//	DSH_CONSOLE_SHOTS=/tmp/shots go test -count=1 ./test/console/ -v
func TestConsoleInBrowser(t *testing.T) {
	b := needBrowser(t)
	ws := t.TempDir()
	h := startHost(t, fmt.Sprintf(consoleComp, ws), ws)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cs := h.connect(t, ctx)
	t.Logf("console at %s; screenshots in %s", h.login, b.shots)

	var cookie string
	session := func(t *testing.T, scenario string, params map[string]any) spec {
		t.Helper()
		if cookie == "" {
			cookie = h.freshSession(t)
			t.Log("the login scenario left no session: logged in with a URL from dsh console")
		}
		return spec{Scenario: scenario, Base: h.base, Cookie: cookie, Params: params}
	}
	ids := make([]string, 0, len(entries))
	for id := range entries {
		ids = append(ids, id)
	}

	t.Run("login", func(t *testing.T) {
		r := b.run(t, spec{Scenario: "login", Base: h.base, Login: h.login}, nil)
		cookie, _ = r["cookie"].(string)
		if len(cookie) < 16 {
			t.Fatalf("session cookie %q", cookie)
		}
	})
	t.Run("login-twice", func(t *testing.T) {
		b.run(t, spec{Scenario: "login-twice", Base: h.base, Login: h.login}, nil)
	})
	t.Run("login-required", func(t *testing.T) {
		b.run(t, spec{Scenario: "login-required", Base: h.base}, nil)
	})
	t.Run("forged-origin", func(t *testing.T) {
		b.run(t, session(t, "forged-origin", nil), nil)
		// A forged Host (DNS rebinding: a foreign name resolving to
		// loopback) is refused too; only Go sets Host freely.
		req, _ := http.NewRequest("GET", h.base+"/console/api/graph", nil)
		req.Host = "evil.example"
		req.Header.Set("Cookie", cookieName(h.base)+"="+cookie)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("Host evil.example: %d, want 403", resp.StatusCode)
		}
		t.Log("checked: GET with Host evil.example: 403")
	})

	t.Run("composition", func(t *testing.T) {
		shas := map[string]any{}
		for id, name := range entries {
			shas[id] = fileSHA256(t, filepath.Join(binDir, "dsh-"+name))
		}
		r := b.run(t, session(t, "composition", map[string]any{"entries": shas}), nil)
		pids, _ := r["pids"].(map[string]any)
		for id, name := range entries {
			pid, err := num(pids[id])
			if err != nil {
				t.Fatalf("entry %s: pid %v", id, err)
			}
			if exe, want := exeOf(pid), filepath.Join(binDir, "dsh-"+name); exe != want {
				t.Errorf("entry %s: the page shows pid %d, whose executable is %q, not %s", id, pid, exe, want)
			}
		}
		t.Logf("checked: each pid the page shows is its plugin's process; the docs picture: %v", r["shot"])
	})

	t.Run("restart", func(t *testing.T) {
		const id = "env"
		want := filepath.Join(binDir, "dsh-"+entries[id])
		r := b.run(t, session(t, "restart", map[string]any{"entry": id}), map[string]answer{
			"kill": func(ask map[string]any) (map[string]any, error) {
				pid, err := num(ask["pid"])
				if err != nil {
					return nil, err
				}
				if exe := exeOf(pid); exe != want {
					return nil, fmt.Errorf("pid %d is %q, not %s", pid, exe, want)
				}
				return map[string]any{}, syscall.Kill(pid, syscall.SIGKILL)
			},
		})
		after, err := num(r["after"])
		if err != nil {
			t.Fatal(err)
		}
		if exe := exeOf(after); exe != want {
			t.Fatalf("the new pid %d the page shows is %q, not %s", after, exe, want)
		}
		t.Logf("checked: the new pid %d is %s's process", after, entries[id])
	})

	t.Run("reload", func(t *testing.T) {
		const id = "tools"
		r := b.run(t, session(t, "reload", map[string]any{"entry": id}), nil)
		before, err1 := num(r["before"])
		after, err2 := num(r["after"])
		if err1 != nil || err2 != nil {
			t.Fatalf("pids %v %v", r["before"], r["after"])
		}
		if exe, want := exeOf(after), filepath.Join(binDir, "dsh-"+entries[id]); exe != want {
			t.Fatalf("the new pid %d is %q, not %s", after, exe, want)
		}
		if !waitFor(15*time.Second, func() bool { return !testplugins.Alive(before) }) {
			t.Fatalf("the old process %d of %s still runs", before, id)
		}
		text, isErr, _, err := call(ctx, cs, "bash", map[string]any{"command": "echo reloaded-$((5+5))"})
		if err != nil || isErr || !strings.Contains(text, "reloaded-10") {
			t.Fatalf("bash after the reload: %v %q", err, text)
		}
		t.Logf("checked: the new pid %d is %s's, the old one is gone, bash answers", after, entries[id])
	})

	// A background job whose tree holds two sleeps that carry markers.
	m1, m2 := marker(710000), marker(810000)
	// The two sleeps themselves (their shell's command line names them too).
	sleepers := func() []string {
		var out []string
		for _, m := range []string{m1, m2} {
			for _, p := range testplugins.Matching("sleep " + m) {
				if strings.HasSuffix(strings.TrimSpace(p), ": sleep "+m) {
					out = append(out, p)
				}
			}
		}
		return out
	}
	var job string
	t.Run("job-output", func(t *testing.T) {
		text, isErr, sc, err := call(ctx, cs, "bash", map[string]any{
			"command":           fmt.Sprintf("sleep %s & sleep %s & for i in $(seq 1 600); do echo tick-$i; sleep 0.3; done; wait", m1, m2),
			"run_in_background": true,
		})
		if err != nil || isErr {
			t.Fatalf("background start: %v %s", err, text)
		}
		job, _ = sc["jobId"].(string)
		if job == "" {
			t.Fatalf("no job id in %v (%s)", sc, text)
		}
		if !waitFor(30*time.Second, func() bool { return len(sleepers()) == 2 }) {
			t.Fatalf("the job's sleeps are not running: %v", sleepers())
		}
		t.Logf("checked: job %s started over MCP, its sleeps running", job)
		b.run(t, session(t, "job-output", map[string]any{"job": job}), nil)
	})
	t.Run("job-kill", func(t *testing.T) {
		if job == "" {
			t.Fatal("no job: job-output did not start one")
		}
		b.run(t, session(t, "job-kill", map[string]any{"job": job}), map[string]answer{
			"processes": func(map[string]any) (map[string]any, error) {
				return map[string]any{"count": len(sleepers())}, nil
			},
			"gone": func(map[string]any) (map[string]any, error) {
				start := time.Now()
				// Absent several polls in a row: a process in the middle
				// of exec briefly shows an empty command line.
				absent := 0
				if !waitFor(15*time.Second, func() bool {
					if len(sleepers()) > 0 {
						absent = 0
						return false
					}
					absent++
					return absent >= 3
				}) {
					return nil, fmt.Errorf("left after job-kill: %v", sleepers())
				}
				return map[string]any{"waited": time.Since(start).Milliseconds()}, nil
			},
		})
		text, _, _, err := call(ctx, cs, "job_output", map[string]any{"job_id": job})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("checked: job_output over MCP after the kill: %q", lastLine(text))
	})

	t.Run("terminal", func(t *testing.T) {
		m := marker(910000)
		text, isErr, _, err := call(ctx, cs, "terminal_open", map[string]any{})
		id := termIDRE.FindStringSubmatch(text)
		if err != nil || isErr || id == nil {
			t.Fatalf("terminal_open: %v %s", err, text)
		}
		// What is typed differs from what it prints ($((...)) expands), so
		// the view holds the output only once the shell ran it.
		send := func(cmd string) error {
			text, isErr, _, err := call(ctx, cs, "terminal_send", map[string]any{"session_id": id[1], "text": cmd})
			if err == nil && isErr {
				err = fmt.Errorf("terminal_send %q: %s", cmd, text)
			}
			return err
		}
		if err := send("echo before-$((40+2))-" + m); err != nil {
			t.Fatal(err)
		}
		b.run(t, session(t, "terminal", map[string]any{"terminal": id[1], "before": "before-42-" + m, "live": "live-42-" + m}), map[string]answer{
			"type": func(map[string]any) (map[string]any, error) {
				return map[string]any{}, send("echo live-$((40+2))-" + m)
			},
		})
	})

	t.Run("terminal-attach", func(t *testing.T) {
		m := marker(920000)
		text, isErr, _, err := call(ctx, cs, "terminal_open", map[string]any{})
		id := termIDRE.FindStringSubmatch(text)
		if err != nil || isErr || id == nil {
			t.Fatalf("terminal_open: %v %s", err, text)
		}
		want := "typed-7-" + m
		b.run(t, session(t, "terminal-attach", map[string]any{"terminal": id[1], "type": "echo typed-$((3+4))-" + m, "want": want}), map[string]answer{
			"read": func(map[string]any) (map[string]any, error) {
				text, _, _, err := call(ctx, cs, "terminal_read", map[string]any{"session_id": id[1]})
				if err != nil {
					return nil, err
				}
				for _, l := range strings.Split(text, "\n") {
					if strings.TrimSpace(l) == want {
						return map[string]any{"line": l}, nil
					}
				}
				return nil, fmt.Errorf("terminal_read does not show the line %s:\n%s", want, text)
			},
		})
	})

	t.Run("call-cancel", func(t *testing.T) {
		m := marker(510000)
		callCtx, stop := context.WithTimeout(ctx, 3*time.Minute)
		defer stop()
		p := callAsync(callCtx, cs, "bash", map[string]any{"command": "sleep " + m, "timeoutMs": 300000})
		sleeping := func() bool {
			for _, p := range testplugins.Matching("sleep " + m) {
				if strings.HasSuffix(strings.TrimSpace(p), ": sleep "+m) {
					return true
				}
			}
			return false
		}
		if !waitFor(30*time.Second, sleeping) {
			t.Fatalf("the call's sleep %s is not running", m)
		}
		b.run(t, session(t, "call-cancel", map[string]any{"marker": "sleep " + m}), nil)
		text, _, err := p.wait(30 * time.Second)
		if err != nil {
			t.Fatalf("the call after call-cancel: %v", err)
		}
		if !strings.Contains(text, "cancelled this call from the dsh console") {
			t.Fatalf("the call after call-cancel returned %q, want the console's cancel said", text)
		}
		t.Logf("checked: the call returned %q", lastLine(text))
		if !waitFor(15*time.Second, func() bool { return !sleeping() }) {
			t.Fatalf("sleep %s still runs after call-cancel: %v", m, testplugins.Matching("sleep "+m))
		}
		t.Log("checked: its sleep is gone")
	})

	for _, c := range []struct{ decision, justification string }{
		{"approve", "the console test approves this"},
		{"deny", "the console test denies this"},
	} {
		t.Run(c.decision, func(t *testing.T) {
			m := marker(610000)
			command := "echo esc-$((1+1))-" + c.decision + "-" + m
			callCtx, stop := context.WithTimeout(ctx, 3*time.Minute)
			defer stop()
			p := callAsync(callCtx, cs, "bash", map[string]any{
				"command":             command,
				"sandbox_permissions": "danger-full-access",
				"justification":       c.justification,
			})
			b.run(t, session(t, "approval", map[string]any{
				"marker": c.decision + "-" + m, "command": command, "justification": c.justification, "decision": c.decision,
			}), nil)
			text, isErr, err := p.wait(30 * time.Second)
			if err != nil {
				t.Fatalf("the escalated call after %s in the page: %v", c.decision, err)
			}
			out := "esc-2-" + c.decision + "-" + m
			switch {
			case c.decision == "approve" && (isErr || !strings.Contains(text, out)):
				t.Fatalf("approved in the page, the call returned (isError %v) %q, want %q", isErr, text, out)
			case c.decision == "deny" && (!isErr || !strings.Contains(text, "denied") || strings.Contains(text, out)):
				t.Fatalf("denied in the page, the call returned (isError %v) %q, want a denial with nothing run", isErr, text)
			}
			t.Logf("checked: the call's result after %s: %q", c.decision, text)
		})
	}

	// After restart, job-kill and the approvals, the host has logged at
	// info (a job started, an approval granted) and at error (a crash).
	t.Run("logs", func(t *testing.T) {
		b.run(t, session(t, "logs", map[string]any{
			"info": []string{"job started", "approval granted"}, "error": "plugin crashed",
		}), nil)
	})

	t.Run("composition-broken", func(t *testing.T) {
		before, err := os.ReadFile(h.file)
		if err != nil {
			t.Fatal(err)
		}
		b.run(t, session(t, "composition-broken", map[string]any{
			"entries": ids, "file": filepath.Base(h.file),
			"find": "name: tool-bash", "replace": "nme: tool-bash", "message": `unknown key "nme"`,
		}), map[string]answer{
			"unchanged": func(map[string]any) (map[string]any, error) {
				now, err := os.ReadFile(h.file)
				if err != nil {
					return nil, err
				}
				if string(now) != string(before) {
					return nil, fmt.Errorf("the composition file changed:\n%s", now)
				}
				return map[string]any{}, nil
			},
		})
		// The tools still answer: nothing was applied.
		text, isErr, _, err := call(ctx, cs, "bash", map[string]any{"command": "echo still-$((2+2))"})
		if err != nil || isErr || !strings.Contains(text, "still-4") {
			t.Fatalf("bash after the refused edit: %v %q", err, text)
		}
		t.Log("checked: bash still answers over MCP")
	})

	t.Run("composition-apply", func(t *testing.T) {
		r := b.run(t, session(t, "composition-apply", map[string]any{
			"find": "  - id: terminal-tools\n    name: tool-terminal\n", "replace": "  - id: terminal-tools\n    name: tool-terminal\n    disabled: true\n",
			"entry": "terminal-tools", "state": "disabled",
		}), nil)
		now, err := os.ReadFile(h.file)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := r["text"].(string); string(now) != want {
			t.Fatalf("the file on disk is not the text applied:\n%s\nwant:\n%s", now, want)
		}
		t.Log("checked: the file on disk is the text applied")
		var names []string
		if !waitFor(15*time.Second, func() bool {
			names = nil
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				return false
			}
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			return !slices.Contains(names, "terminal_open") && slices.Contains(names, "bash")
		}) {
			t.Fatalf("tools 15 s after terminal-tools was disabled: %v", names)
		}
		t.Logf("checked: the MCP client's tools are now %v", names)
	})

	// Last: it stops the host.
	t.Run("connection", func(t *testing.T) {
		b.run(t, session(t, "connection", nil), map[string]answer{
			"stop": func(map[string]any) (map[string]any, error) { return map[string]any{}, h.stop() },
		})
	})
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Under --no-auth on loopback the page needs no login, and the rest of
// the protection stands: a foreign Origin or Host is refused, and a change
// needs the CSRF header.
func TestConsoleNoAuth(t *testing.T) {
	b := needBrowser(t)
	ws := t.TempDir()
	h := startHost(t, fmt.Sprintf(consoleComp, ws), ws, "--no-auth")
	b.run(t, spec{Scenario: "no-auth", Base: h.base, Params: map[string]any{"entries": []string{"env", "tools"}}}, nil)
	req, _ := http.NewRequest("GET", h.base+"/console/api/graph", nil)
	req.Host = "evil.example"
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("Host evil.example under --no-auth: %d, want 403", resp.StatusCode)
	}
	t.Log("checked: GET with Host evil.example: 403")
}
