package shelltool

import (
	"strings"
	"testing"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/plugins/shell"
)

// testShell is a shell tool of no particular shell; its hint for binary
// output is bash's, which the rendering goldens show.
var testShell = Shell{
	Plugin: "tool-sh", Version: "1.0.0", Summary: "a test shell tool",
	Tool: "sh", Title: "Run an sh command", Command: "The sh command to run.", ChangeDir: "chdir",
	Session:   "a new sh",
	Intro:     func(session string) string { return "Run an sh command in " + session + "." },
	ReadSpill: "grep", ReadBinary: "pipe it through xxd or od to read it",
}

// The tool's own words come from its Shell; the rest is every shell
// tool's.
func TestSpecsOfShell(t *testing.T) {
	specs := testShell.Specs("", Place{Start: "/w"}, 1, 2, 100)
	if len(specs) != 4 || specs[0].Name != "sh" || specs[0].Title != "Run an sh command" || specs[1].Name != "job_output" || specs[2].Name != "job_kill" || specs[3].Name != "job_list" {
		t.Fatalf("specs: %v", specs)
	}
	d := specs[0].Description
	if !strings.HasPrefix(d, "Run an sh command in a new sh that starts in `/w`.\n- A command is killed") || !strings.Contains(d, "read that (grep) instead") {
		t.Errorf("description:\n%s", d)
	}
	if !strings.Contains(specs[0].InputSchema, `"description":"The sh command to run."`) || !strings.Contains(specs[0].InputSchema, "(instead of chdir)") || !strings.Contains(specs[1].InputSchema, "The id `sh` returned") {
		t.Errorf("schemas: %s %s", specs[0].InputSchema, specs[1].InputSchema)
	}
	// job_list takes no arguments, and says when to use it and what it
	// does not list.
	if l := specs[3]; l.InputSchema != `{"additionalProperties":false,"properties":{},"type":"object"}` ||
		!strings.Contains(l.Description, "lost track of a job id") || !strings.Contains(l.Description, "before you finish") ||
		!strings.Contains(l.Description, "job_kill") || !strings.Contains(l.Description, "then it is forgotten and no longer listed") {
		t.Errorf("job_list: %s\n%s", l.InputSchema, l.Description)
	}
	desc := New(testShell).Describe()
	if desc.Name != "tool-sh" || desc.Version != "1.0.0" || desc.Summary != "a test shell tool" || strings.Join(desc.Tools, ",") != "sh,job_output,job_kill,job_list" {
		t.Errorf("describe: %+v", desc)
	}
}

// The sandbox fields appear only under a sandboxing executor, with the
// modes that give more access than its own.
func TestSpecsEscalation(t *testing.T) {
	schema := func(mode shell.SandboxMode) string { return testShell.Specs(mode, Place{}, 1, 2, 100)[0].InputSchema }
	if strings.Contains(schema(""), "sandbox_permissions") {
		t.Error("sandbox_permissions advertised without a sandboxing executor")
	}
	if s := schema(shell.DangerFullAccess); strings.Contains(s, "sandbox_permissions") {
		t.Fatalf("danger-full-access has nothing to escalate to: %s", s)
	}
	if s := schema(shell.ReadOnly); !strings.Contains(s, `"enum":["workspace-write","danger-full-access"]`) {
		t.Fatalf("read-only escalates to both other modes: %s", s)
	}
	if !strings.Contains(schema(shell.ReadOnly), "justification") {
		t.Error("justification missing under a sandboxing executor")
	}
}

// network_hosts is offered where the sandbox confines the network: under
// a confining executor whose policy does not give the whole network.
func TestSpecsNetworkHosts(t *testing.T) {
	spec := func(mode shell.SandboxMode, at Place) *toolsv1.ToolSpec {
		return testShell.Specs(mode, at, 1, 2, 100)[0]
	}
	for _, mode := range []shell.SandboxMode{shell.ReadOnly, shell.WorkspaceWrite} {
		s := spec(mode, Place{Workspace: "/w"})
		if !strings.Contains(s.InputSchema, `"network_hosts":{`) || !strings.Contains(s.Description, "`[sandbox: network access to HOST denied]`") || !strings.Contains(s.Description, "repeat the command with `network_hosts`") {
			t.Errorf("%s: network_hosts not offered:\n%s\n%s", mode, s.Description, s.InputSchema)
		}
	}
	for name, s := range map[string]*toolsv1.ToolSpec{
		"no sandbox":         spec("", Place{}),
		"danger-full-access": spec(shell.DangerFullAccess, Place{Workspace: "/w"}),
		"the whole network":  spec(shell.WorkspaceWrite, Place{Workspace: "/w", Network: true}),
	} {
		if strings.Contains(s.InputSchema, "network_hosts") || strings.Contains(s.Description, "network_hosts") {
			t.Errorf("%s: network_hosts offered:\n%s\n%s", name, s.Description, s.InputSchema)
		}
	}
	if !PlaceOf("/w", &sandbox.Policy{Network: true}).Network || PlaceOf("/w", &sandbox.Policy{}).Network {
		t.Error("PlaceOf does not carry the policy's network")
	}
}
