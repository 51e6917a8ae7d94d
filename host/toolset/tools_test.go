package toolset

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/internal/seam/seamtest"
	"github.com/dshrun/dsh/sdk"
)

// slot is a Slot whose liveness a test sets.
type slot struct{ dead bool }

func (s *slot) Live() bool { return !s.dead }

// caller is one process of a plugin entry.
type caller struct {
	id       string
	slot     *slot // nil: serves no tool calls
	declared []string
	effects  []func(context.Context) error
	refuse   error // what AddEffect fails with
}

func (c *caller) ID() string    { return c.id }
func (c *caller) Label() string { return `"` + c.id + `"` }
func (c *caller) Serving() (*slot, []string, bool) {
	return c.slot, c.declared, c.slot != nil
}
func (c *caller) AddEffect(_ string, dispose func(context.Context) error) error {
	if c.refuse != nil {
		return c.refuse
	}
	c.effects = append(c.effects, dispose)
	return nil
}

// dispose runs the caller's effects, as its scope going does.
func (c *caller) dispose() {
	for _, e := range c.effects {
		_ = e(context.Background())
	}
	c.effects = nil
}

func spec(name, desc string) *tools.ToolSpec {
	return &tools.ToolSpec{Name: name, Description: desc, InputSchema: `{"type":"object"}`}
}

// told reports whether changes holds a change, and takes it.
func told(changes <-chan struct{}) bool {
	select {
	case _, ok := <-changes:
		return ok
	default:
		return false
	}
}

func TestRegisterRefusals(t *testing.T) {
	ctx := context.Background()
	r := New[*slot]()
	a := &caller{id: "a", slot: &slot{}, declared: []string{"bash", "x y"}}
	b := &caller{id: "b", slot: &slot{}, declared: []string{"bash"}}
	if err := r.For(a).Register(ctx, spec("bash", "d")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who  *caller
		spec *tools.ToolSpec
		kind error
		says string
	}{
		{a, spec("x y", "d"), tools.ErrInvalid, `tool name "x y"`},
		{a, &tools.ToolSpec{Name: "bash", InputSchema: `{"type":`}, tools.ErrInvalid, `tool "bash": input`},
		{&caller{id: "host"}, spec("bash", "d"), tools.ErrCannotRegister, "cannot serve tool calls"},
		{a, spec("sneaky", "d"), sdk.ErrPermissionDenied, `plugin "a" did not declare tool "sneaky": add it to its description's Tools list (it declares [bash x y])`},
		{b, spec("bash", "d"), tools.ErrTaken, `tool "bash" is already registered by plugin "a"; plugin "b" cannot register it`},
		{&caller{id: "c", slot: &slot{}, declared: []string{"late"}, refuse: errors.New("the scope is closing")}, spec("late", "d"), tools.ErrCannotRegister, `tool "late": the scope is closing`},
	} {
		err := r.For(c.who).Register(ctx, c.spec)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s registering %q: %v, want %v saying %q", c.who.id, c.spec.Name, err, c.kind, c.says)
		}
	}
	if _, ok := r.Get("late"); ok {
		t.Error("a tool whose effect could not be added stayed registered")
	}
	if l := r.List(); len(l) != 1 || l[0].Plugin != "a" || l[0].Label != `"a"` {
		t.Errorf("listed: %+v", l)
	}
	if err := r.For(b).Unregister(ctx, "bash"); !errors.Is(err, tools.ErrNotRegistered) {
		t.Errorf("unregister of another plugin's tool: %v", err)
	}
}

// Subscribers hear of a change only when what they list changed: a
// restart or a reload that registers the same tools is no change.
func TestChangesOnlyWhenTheListingChanges(t *testing.T) {
	ctx := context.Background()
	r := New[*slot]()
	changes, stop := r.Changes()
	defer stop()
	old := &caller{id: "tools", slot: &slot{}, declared: []string{"bash", "job_kill"}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(r.For(old).Register(ctx, spec("bash", "v1")))
	must(r.For(old).Register(ctx, spec("job_kill", "v1")))
	if !told(changes) || told(changes) {
		t.Fatal("two registrations: want one change told, coalesced")
	}
	// A restart in place: a new process in the same slot registers again.
	restarted := &caller{id: "tools", slot: old.slot, declared: old.declared}
	must(r.For(restarted).Register(ctx, spec("bash", "v1")))
	if told(changes) || len(restarted.effects) != 0 {
		t.Error("the same tool registered again in its slot: a change, or a second effect")
	}
	must(r.For(restarted).Register(ctx, spec("bash", "v2")))
	if !told(changes) {
		t.Error("a new description in the same slot was not told")
	}
	// A reload: a new scope of the entry takes the tools over.
	reloaded := &caller{id: "tools", slot: &slot{}, declared: old.declared}
	must(r.For(reloaded).Register(ctx, spec("bash", "v2")))
	must(r.For(reloaded).Register(ctx, spec("job_kill", "v1")))
	if told(changes) {
		t.Error("a takeover with the same specs was told")
	}
	if tl, _ := r.Get("bash"); tl.Slot != reloaded.slot {
		t.Fatal("the reload did not take the tool over")
	}
	// The old scope goes: the tools stay with the new one.
	old.slot.dead = true
	old.dispose()
	if told(changes) || len(r.List()) != 2 {
		t.Errorf("the replaced scope going changed the listing: %+v", r.List())
	}

	// A reload that fails gives the tools back to the scope that serves.
	failed := &caller{id: "tools", slot: &slot{}, declared: old.declared}
	must(r.For(failed).Register(ctx, spec("bash", "v3")))
	if !told(changes) {
		t.Error("a takeover with a new description was not told")
	}
	failed.slot.dead = true
	failed.dispose()
	if tl, _ := r.Get("bash"); !told(changes) || tl.Slot != reloaded.slot || tl.Spec.Description != "v2" {
		t.Errorf("after the failed reload: %+v (giving the old description back is a change to tell)", tl)
	}

	must(r.For(reloaded).Unregister(ctx, "job_kill"))
	if !told(changes) {
		t.Error("an unregistration was not told")
	}
	reloaded.slot.dead = true
	reloaded.dispose()
	if !told(changes) || len(r.List()) != 0 {
		t.Errorf("the last scope going: %+v", r.List())
	}
}

// A tool whose scope goes while its entry still declares it stays listed,
// Down, with no change told; the entry's next scope takes it back; once
// the entry no longer declares it, Prune removes it (a change).
func TestDownToolsStayListed(t *testing.T) {
	ctx := context.Background()
	r := New[*slot]()
	declared := map[string]bool{"bash": true}
	r.KeepWhileDown(func(plugin, name string) bool { return plugin == "tools" && declared[name] })
	changes, stop := r.Changes()
	defer stop()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	first := &caller{id: "tools", slot: &slot{}, declared: []string{"bash", "job_kill"}}
	must(r.For(first).Register(ctx, spec("bash", "v1")))
	must(r.For(first).Register(ctx, spec("job_kill", "v1")))
	told(changes)

	first.slot.dead = true
	first.dispose()
	if tl, ok := r.Get("bash"); !ok || !tl.Down || tl.Spec.Description != "v1" {
		t.Fatalf("bash after its scope went: %+v", tl)
	}
	if _, ok := r.Get("job_kill"); ok || !told(changes) {
		t.Error("a tool the entry no longer declares stayed, or went untold")
	}
	if told(changes) {
		t.Error("a tool kept Down was told as a change")
	}
	// Another plugin cannot take the name while the entry declares it.
	other := &caller{id: "other", slot: &slot{}, declared: []string{"bash"}}
	if err := r.For(other).Register(ctx, spec("bash", "v1")); !errors.Is(err, tools.ErrTaken) {
		t.Errorf("another plugin took a Down tool: %v", err)
	}

	// The entry's next scope registers it again: serving, no change.
	next := &caller{id: "tools", slot: &slot{}, declared: []string{"bash"}}
	must(r.For(next).Register(ctx, spec("bash", "v1")))
	if tl, _ := r.Get("bash"); tl.Down || tl.Slot != next.slot || told(changes) {
		t.Errorf("after the next scope registered: %+v (told: a change)", tl)
	}
	next.slot.dead = true
	next.dispose()
	if tl, _ := r.Get("bash"); !tl.Down {
		t.Errorf("the next scope went: %+v", tl)
	}

	r.Prune()
	if _, ok := r.Get("bash"); !ok || told(changes) {
		t.Error("Prune removed a tool its entry still declares")
	}
	declared["bash"] = false
	r.Prune()
	if _, ok := r.Get("bash"); ok || !told(changes) {
		t.Error("Prune kept a tool its entry no longer declares, or did not tell")
	}
}

func TestSubscriptionsEnd(t *testing.T) {
	r := New[*slot]()
	a, stopA := r.Changes()
	b, _ := r.Changes()
	stopA()
	stopA()
	if _, ok := <-a; ok {
		t.Error("a stopped subscription is open")
	}
	r.Close()
	if _, ok := <-b; ok {
		t.Error("a subscription is open after Close")
	}
	c, stopC := r.Changes()
	stopC()
	if _, ok := <-c; ok {
		t.Error("a subscription made after Close is open")
	}
	r.tell() // no one to tell, nothing to panic about
}

// Through the seam's adapter, a plugin gets the registry's refusals as the
// seam's errors.
func TestRegistryThroughTheAdapter(t *testing.T) {
	r := New[*slot]()
	a := &caller{id: "a", slot: &slot{}, declared: []string{"bash"}}
	b := &caller{id: "b", slot: &slot{}, declared: []string{"bash"}}
	dial := func(c *caller) *tools.Client {
		return tools.NewClient(seamtest.Conn(t, func(s *grpc.Server) { toolsv1.RegisterToolsServer(s, tools.NewServer(r.For(c))) }))
	}
	ctx := context.Background()
	if err := dial(a).Register(ctx, spec("bash", "d")); err != nil {
		t.Fatal(err)
	}
	cb := dial(b)
	if err := cb.Register(ctx, spec("bash", "d")); !errors.Is(err, tools.ErrTaken) {
		t.Errorf("taken: %v", err)
	}
	if err := cb.Register(ctx, spec("other", "d")); !errors.Is(err, sdk.ErrPermissionDenied) {
		t.Errorf("undeclared: %v", err)
	}
	if err := cb.Unregister(ctx, "bash"); !errors.Is(err, tools.ErrNotRegistered) {
		t.Errorf("not registered: %v", err)
	}
}

// An interception covers the tools its patterns match by alias, is taken
// over by the entry's next scope and given back when that one goes first,
// and goes with its scope.
func TestIntercept(t *testing.T) {
	ctx := context.Background()
	r := New[*slot]()
	a := &caller{id: "hooks", slot: &slot{}}
	in := &tools.Interception{Patterns: []string{"Bash", ".*(?:mcp__dsh__job_).*"}, Aliases: map[string]string{"bash": "Bash"}, AliasPrefix: "mcp__dsh__", Before: true}
	if err := r.For(a).Intercept(ctx, in); err != nil {
		t.Fatal(err)
	}
	covered := func(tool string, after bool) bool { return len(r.Interceptors(tool, after)) == 1 }
	if !covered("bash", false) || !covered("job_output", false) || covered("terminal_open", false) || covered("bash", true) {
		t.Fatal("the patterns do not cover by alias")
	}
	for _, bad := range []*tools.Interception{{Patterns: []string{"("}}, {Patterns: []string{"*"}, TimeoutMs: -1}} {
		if err := r.For(a).Intercept(ctx, bad); !errors.Is(err, tools.ErrInvalid) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	// A reload: the next scope takes over; should it go while the first
	// serves, the first's comes back.
	next := &caller{id: "hooks", slot: &slot{}}
	if err := r.For(next).Intercept(ctx, &tools.Interception{Patterns: []string{"*"}, After: true}); err != nil {
		t.Fatal(err)
	}
	if !covered("terminal_open", true) || covered("bash", false) {
		t.Fatal("the next scope's interception is not the one in force")
	}
	next.dispose()
	if !covered("bash", false) || covered("terminal_open", true) {
		t.Fatal("the first scope's interception did not come back")
	}
	a.dispose()
	if covered("bash", false) {
		t.Fatal("the interception outlived its scope")
	}
	if err := (&registrar[*slot]{r: r, c: &caller{id: "x"}}).Intercept(ctx, in); !errors.Is(err, tools.ErrCannotRegister) {
		t.Fatalf("a caller that serves nothing: %v", err)
	}
}
