package mcpserver

import (
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/approval"
)

// What the user reads is what would run: text that could look like
// something else (a carriage return, an escape, a bidi control, a
// newline) is shown quoted.
func TestQuestionShowsTheCommandAsItIs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"git push origin main", "git push origin main"},
		{"ls\rrm -rf ~", `"ls\rrm -rf ~" (quoted: it holds control characters)`},
		{"make test\nrm -rf /", `"make test\nrm -rf /" (quoted: it holds control characters)`},
		{"echo \x1b[2Jhi", `"echo \x1b[2Jhi" (quoted: it holds control characters)`},
		{"cat safe\u202etxt.sh", `"cat safe\u202etxt.sh" (quoted: it holds control characters)`},
		{"echo héllo", "echo héllo"},
	} {
		if got := shown(c.in); got != c.want {
			t.Errorf("shown(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	p := elicitParams("bash", &approval.Request{Kind: approval.KindSandboxEscalation, Tool: "not-bash", Command: "ls\rrm -rf ~", TargetMode: "danger-full-access", Reason: "look\naround"})
	for _, want := range []string{
		"The bash tool asks to run a command with more access than its sandbox gives (danger-full-access):\n\n",
		`    "ls\rrm -rf ~" (quoted: it holds control characters)`,
		`Its reason (the model's words): "look\naround" (quoted`,
	} {
		if !strings.Contains(p.Message, want) {
			t.Errorf("message %q lacks %q", p.Message, want)
		}
	}
	if strings.ContainsRune(p.Message, '\r') || p.Mode != "form" {
		t.Errorf("message %q mode %q", p.Message, p.Mode)
	}
	if q := elicitParams("bash", &approval.Request{Kind: approval.KindHookAsk, Tool: "bash", Command: "ls"}); !strings.HasPrefix(q.Message, "The bash tool asks for your approval before it runs:") {
		t.Errorf("a hook's question: %q", q.Message)
	}
}

// A network escalation names the hosts the command is to reach; a host
// that could look like another is shown quoted. Two asks differing only
// in their hosts are two questions.
func TestQuestionNamesTheHosts(t *testing.T) {
	req := &approval.Request{Kind: approval.KindNetworkEscalation, Tool: "bash", Command: "npm install", Hosts: []string{"registry.npmjs.org", "evil\u202e.test:443"}, Reason: "needs the registry"}
	p := elicitParams("bash", req)
	want := "The bash tool asks to let a command reach hosts its sandbox's network rules do not allow (registry.npmjs.org, \"evil\\u202e.test:443\" (quoted: it holds control characters)):\n\n    npm install\n\nIts reason (the model's words): needs the registry\n\n"
	if !strings.HasPrefix(p.Message, want) {
		t.Errorf("message %q, want it to start %q", p.Message, want)
	}
	other := &approval.Request{Kind: approval.KindNetworkEscalation, Tool: "bash", Command: "npm install", Hosts: []string{"registry.npmjs.org"}, Reason: "needs the registry"}
	if questionKey(req) == questionKey(other) {
		t.Error("asks for different hosts are one question")
	}
}

// An IP literal of this machine's (loopback, link-local) among the hosts
// reaches the host's own services, outside the sandbox: the question says
// so, rather than let 127.0.0.1 read as the sandbox's own.
func TestQuestionNamesThisMachine(t *testing.T) {
	req := &approval.Request{Kind: approval.KindNetworkEscalation, Tool: "bash", Command: "curl http://127.0.0.1:8080/",
		Hosts: []string{"registry.npmjs.org", "127.0.0.1:8080", "[::1]:80", "::1", "169.254.10.1", "10.0.0.7"}, Reason: "test"}
	p := elicitParams("bash", req)
	want := "\n\n127.0.0.1:8080, [::1]:80, ::1 and 169.254.10.1 are this computer or its local link: the command would reach what listens there, outside its sandbox.\n\n"
	if !strings.Contains(p.Message, want) {
		t.Errorf("message %q, want it to hold %q", p.Message, want)
	}
	req.Hosts = []string{"127.0.0.9:1"}
	if p := elicitParams("bash", req); !strings.Contains(p.Message, "\n\n127.0.0.9:1 is this computer or its local link: ") {
		t.Errorf("one host: %q", p.Message)
	}
	req.Hosts = []string{"registry.npmjs.org", "10.0.0.7:80"}
	if p := elicitParams("bash", req); strings.Contains(p.Message, "this computer") {
		t.Errorf("hosts elsewhere told as this computer: %q", p.Message)
	}
}

// Two spellings of the same arguments are one call; a digit apart are two.
func TestCanonicalArguments(t *testing.T) {
	a := canonical([]byte(`{"b": 1, "a": "x"}`))
	if b := canonical([]byte(`{"a":"x","b":1}`)); a != b {
		t.Errorf("%s != %s", a, b)
	}
	if canonical([]byte(`{"n": 9007199254740993}`)) == canonical([]byte(`{"n": 9007199254740992}`)) {
		t.Error("numbers a digit apart are the same arguments")
	}
}
