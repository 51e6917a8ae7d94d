package hookbridge

import (
	"context"
	"sync"
)

// MatchingAll are the hooks of event whose matchers take tool name, in
// file order, identical commands as many times as they are configured (for
// an agent that, like Codex, runs each configured hook).
func (s *Set) MatchingAll(event, name string) []Hook {
	var out []Hook
	for i := range s.Groups {
		g := &s.Groups[i]
		if g.Event == event && g.Matches(name) {
			out = append(out, g.Hooks...)
		}
	}
	return out
}

// RunCompleted is Run that also tells the order the hooks finished in:
// done[i] is hook i's rank (0 for the first to finish), for an agent that
// lets the last to finish win.
func (r *Runner) RunCompleted(ctx context.Context, owner string, hooks []Hook, payload []byte) (out []Ran, done []int) {
	out, done = make([]Ran, len(hooks)), make([]int, len(hooks))
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for i, h := range hooks {
		wg.Go(func() {
			ran := r.run(ctx, owner, h, payload)
			mu.Lock()
			out[i], done[i] = ran, next
			next++
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, done
}

// Turn is the id hooks see for the turn of a call (dsh has no turns: each
// call is its own).
func (ids *IDs) Turn(call string) string { return "turn_dsh_" + ids.of("turn", call) }

// Call is the id hooks see for a call, in the form of Codex's call ids.
func (ids *IDs) Call(call string) string { return "call_dsh_" + ids.of("call", call) }
