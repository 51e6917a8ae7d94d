package mcpserver

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the console shows of the agents: the sessions (owners) and the
// calls in flight, which the person at the console may cancel. The books
// cost a call a map insert and delete and a signal no one waits on while
// no page is open; everything shown is worked out when it is asked for.

// OwnerView is an MCP session as the console shows it.
type OwnerView struct {
	// ID is the owner id the host knows the session by (its jobs,
	// terminals and spill files are this owner's).
	ID string
	// Client is the client's name and version from initialize ("" for a
	// client that did not initialize).
	Client string
	Since  time.Time
}

// CallView is a tool call in flight.
type CallView struct {
	// ID is the console's id for the call (CancelCall takes it).
	ID, Owner, Tool string
	// Command is the call's "command" argument, or a short summary of its
	// arguments for a tool that has none.
	Command string
	Started time.Time
}

// inflight is one call's entry in Server.calls, kept by value: the map
// entry is the only thing a call adds.
type inflight struct {
	owner, tool string
	args        json.RawMessage
	started     time.Time
	stop        context.CancelFunc
	byConsole   bool // CancelCall stopped it
}

// track enters a call in the books and tells the console.
func (s *Server) track(owner, tool string, args json.RawMessage, stop context.CancelFunc) uint64 {
	n := s.callSeq.Add(1)
	s.cmu.Lock()
	s.calls[n] = inflight{owner: owner, tool: tool, args: args, started: time.Now(), stop: stop}
	s.cmu.Unlock()
	s.agents.Fire()
	return n
}

// untrack takes a call out of the books and says whether the console
// cancelled it.
func (s *Server) untrack(n uint64) (byConsole bool) {
	s.cmu.Lock()
	byConsole = s.calls[n].byConsole
	delete(s.calls, n)
	s.cmu.Unlock()
	s.agents.Fire()
	return byConsole
}

// callID is the console's id of call n.
func callID(n uint64) string { return "c" + strconv.FormatUint(n, 10) }

// Owners lists the sessions the server knows, oldest first: those that
// ended stay until their jobs are released (ReleaseGrace).
func (s *Server) Owners() []OwnerView {
	s.omu.Lock()
	out := make([]OwnerView, 0, len(s.all))
	for _, r := range s.all {
		out = append(out, OwnerView{ID: r.id, Since: r.since, Client: r.client})
	}
	s.omu.Unlock()
	sort.Slice(out, func(a, b int) bool {
		return out[a].Since.Before(out[b].Since) || out[a].Since.Equal(out[b].Since) && out[a].ID < out[b].ID
	})
	return out
}

func clientName(ci *mcp.Implementation) string {
	name := ci.Name
	if ci.Title != "" && name == "" {
		name = ci.Title
	}
	if ci.Version != "" {
		name += " " + ci.Version
	}
	return strings.TrimSpace(name)
}

// CallsInFlight lists the tool calls running now, oldest first.
func (s *Server) CallsInFlight() []CallView {
	type entry struct {
		n uint64
		c inflight
	}
	s.cmu.Lock()
	all := make([]entry, 0, len(s.calls))
	for n, c := range s.calls {
		all = append(all, entry{n, c})
	}
	s.cmu.Unlock()
	out := make([]CallView, 0, len(all))
	for _, e := range all {
		// The arguments are read here, not on the call's path.
		out = append(out, CallView{ID: callID(e.n), Owner: e.c.owner, Tool: e.c.tool, Command: summary(e.c.args), Started: e.c.started})
	}
	sort.Slice(out, func(a, b int) bool {
		return out[a].Started.Before(out[b].Started) || out[a].Started.Equal(out[b].Started) && out[a].ID < out[b].ID
	})
	return out
}

// CancelCall stops call id as the client's notifications/cancelled would
// (its context ends: the host stops the call and the tool's processes);
// the client, which did not cancel it, is answered as usual, with a line
// saying the console cancelled it. False when no such call runs.
func (s *Server) CancelCall(id string) bool {
	num, ok := strings.CutPrefix(id, "c")
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return false
	}
	s.cmu.Lock()
	c, ok := s.calls[n]
	if ok {
		c.byConsole = true
		s.calls[n] = c
	}
	s.cmu.Unlock()
	if !ok {
		return false
	}
	s.log.Info("call cancelled from the console", "call", id, "owner", c.owner, "tool", c.tool)
	c.stop()
	return true
}

// AgentChanges signals (coalesced, at once on subscribing) whenever a
// call begins or ends or an owner comes or goes; stop ends the
// subscription and closes the channel.
func (s *Server) AgentChanges() (<-chan struct{}, func()) { return s.agents.Subscribe() }

// cancelledNote is the line a call cancelled from the console ends with.
const cancelledNote = "[dsh: the user cancelled this call from the dsh console; its command was stopped]"

// maxSummary bounds a call's summary in runes.
const maxSummary = 200

// summary is what the console shows of a call's arguments: its command,
// or its arguments in short.
func summary(args json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return cut(string(args))
	}
	var cmd string
	if json.Unmarshal(m["command"], &cmd) == nil && cmd != "" {
		return cmd
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		v := string(m[k])
		var str string
		if json.Unmarshal(m[k], &str) == nil {
			v = str
		}
		b.WriteString(k + "=" + v)
	}
	return cut(b.String())
}

func cut(s string) string {
	r := []rune(s)
	if len(r) <= maxSummary {
		return s
	}
	return string(r[:maxSummary-1]) + "…"
}
