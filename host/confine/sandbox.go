// Package confine is the host's side of ctx.sandboxPolicy: the policy of
// the composition's sandbox section, served to sandboxing executors and
// the tools that advertise escalation. It owns the policy the host runs
// under (replaced when an edit changes the section); confining commands is
// the sandbox runner's job.
package confine

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/internal/seam"
)

// Service is ctx.sandboxPolicy.
type Service struct {
	policy atomic.Pointer[sandbox.Policy] // nil: no sandbox section
}

var _ sandbox.Policies = (*Service)(nil)

// New serves the policy of section (nil for none).
func New(section *composition.Sandbox) *Service {
	s := &Service{}
	s.Set(section)
	return s
}

// Set replaces the policy; it reports whether it changed.
func (s *Service) Set(section *composition.Sandbox) bool {
	next := PolicyOf(section)
	prev := s.policy.Swap(next)
	return !equal(prev, next)
}

func (s *Service) Get(context.Context) (*sandbox.Policy, error) {
	p := s.policy.Load()
	if p == nil {
		return nil, seam.New(sandbox.ErrNoPolicy, "the composition has no sandbox section, so no executor may sandbox under it (add one: sandbox: {defaultMode: workspace-write}, whose workspace is the folder dsh was started in)")
	}
	return p, nil
}

// PolicyOf is a sandbox section as the contract says it; nil for none.
func PolicyOf(section *composition.Sandbox) *sandbox.Policy {
	if section == nil {
		return nil
	}
	p := &sandbox.Policy{
		DefaultMode:    section.DefaultMode,
		WorkspaceRoot:  section.WorkspaceRoot,
		WritableRoots:  slices.Clone(section.WritableRoots),
		CacheRoots:     slices.Clone(section.CacheRoots),
		Network:        section.Network,
		ProtectedPaths: slices.Clone(section.ProtectedPaths),
		UnixSockets:    slices.Clone(section.UnixSockets),
	}
	if r := section.NetworkRules; r != nil {
		p.NetworkRules = &sandbox.NetworkRules{Allow: slices.Clone(r.Allow), Deny: slices.Clone(r.Deny), Mode: r.Mode, Hosts: maps.Clone(r.Hosts)}
	}
	return p
}

func equal(a, b *sandbox.Policy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.DefaultMode == b.DefaultMode && a.WorkspaceRoot == b.WorkspaceRoot && a.Network == b.Network &&
		slices.Equal(a.WritableRoots, b.WritableRoots) && slices.Equal(a.ProtectedPaths, b.ProtectedPaths) &&
		slices.Equal(a.UnixSockets, b.UnixSockets) && slices.Equal(a.CacheRoots, b.CacheRoots) &&
		proto.Equal(a.NetworkRules, b.NetworkRules)
}
