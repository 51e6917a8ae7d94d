//go:build unix

package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hosts beyond the sandbox's network rules, through the real binaries on
// each protocol: the user is asked a question that names them; declined,
// nothing runs; approved, the command runs once. With danger-full-access
// asked for too, the hosts are moot: one question, the mode's.
func TestUserApprovesHosts(t *testing.T) {
	s, logs := approvalHost(t, "20s")
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			call := func(u *fakeUser, args map[string]any) (string, bool, int) {
				t.Helper()
				cs := connectUser(t, s, v.version, u)
				marker := filepath.Join(t.TempDir(), "ran")
				args["command"], args["description"] = "echo run >> "+marker+"; echo ran", "test"
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(marker)
				return resultText(r), r.IsError, strings.Count(string(b), "run\n")
			}
			hosts := func() map[string]any {
				return map[string]any{"network_hosts": []string{"registry.npmjs.org", "cdn.test:8443"}, "justification": "installs the dependencies"}
			}

			no := answers("decline")
			text, isErr, runs := call(no, hosts())
			if !isErr || runs != 0 || text != "[network access to registry.npmjs.org, cdn.test:8443 was denied by the user (declined); nothing was run]" {
				t.Fatalf("declined: %q (isError %v), ran %d times", text, isErr, runs)
			}
			qs := no.questions()
			if len(qs) != 1 || !strings.HasPrefix(qs[0].Message, "The bash tool asks to let a command reach hosts its sandbox's network rules do not allow (registry.npmjs.org, cdn.test:8443):") ||
				!strings.Contains(qs[0].Message, "Its reason (the model's words): installs the dependencies") {
				t.Fatalf("the questions: %+v", qs)
			}

			yes := accepts(true)
			if text, isErr, runs := call(yes, hosts()); isErr || runs != 1 || !strings.Contains(text, "ran") {
				t.Fatalf("approved: %q (isError %v), ran %d times", text, isErr, runs)
			}

			both := hosts()
			both["sandbox_permissions"] = "danger-full-access"
			both["network_hosts"] = []string{"proxy.golang.org"}
			full := accepts(true)
			if _, _, runs := call(full, both); runs != 1 || len(full.questions()) != 1 || !strings.Contains(full.questions()[0].Message, "more access than its sandbox gives (danger-full-access)") {
				t.Fatalf("danger-full-access with hosts ran %d times, asked %+v", runs, full.questions())
			}
		})
	}
	if !strings.Contains(logs.String(), "kind=network_escalation") || !strings.Contains(logs.String(), "hosts=") {
		t.Errorf("the decisions are not logged with their hosts:\n%s", logs.String())
	}
}
