package host

import (
	"context"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/core/approval/approvalv1"
	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/sandbox/sandboxv1"
	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/core/terminals"
	"github.com/dshrun/dsh/core/terminals/terminalsv1"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/confine"
	"github.com/dshrun/dsh/host/consent"
	"github.com/dshrun/dsh/host/hub"
	"github.com/dshrun/dsh/host/jobtable"
	"github.com/dshrun/dsh/host/procs"
	"github.com/dshrun/dsh/host/termsessions"
	"github.com/dshrun/dsh/registry"
	"github.com/dshrun/dsh/sdk"
)

// The host's own services. They are provided by a scope of the registry
// like any plugin's, so consumers wait for them the same way and are
// disposed before them; calls reach them without a relay hop, since each
// plugin's host server serves them directly.

// CoreScope is the registry id of the host's own scope. It cannot clash
// with an entry id, which may not contain parentheses.
const CoreScope = "(host)"

// coreServices lists each core key and the gRPC services behind it.
var coreServices = map[string][]string{
	subprocess.Key: {subprocess.ServiceName},
	jobs.Key:       {jobs.ServiceName},
	tools.Key:      {tools.ServiceName},
	// Provided whether or not the composition has a sandbox section: Get
	// says why there is no policy, in words a user can act on.
	sandbox.PolicyKey: {sandbox.PolicyServiceName},
	sandbox.Key:       {sandbox.ServiceName},
	approval.Key:      {approval.ServiceName},
	terminals.Key:     {terminals.ServiceName},
}

// coreValue is the registry value of a core key.
type coreValue struct{ key string }

func isCore(key string) bool {
	_, ok := coreServices[key]
	return ok
}

// addCore adds the host's scope, providing every core key.
func (h *Host) addCore() error {
	var err error
	h.core, err = h.reg.Add(registry.Spec{
		ID:    CoreScope,
		Label: "the dsh host",
		Apply: func(_ context.Context, s *registry.Scope) error {
			for key := range coreServices {
				if _, err := s.Provide(key, coreValue{key: key}); err != nil {
					return err
				}
			}
			return nil
		},
	})
	return err
}

// registerCore serves the core services on one plugin's host server.
func (h *Host) registerCore(s *grpc.Server, c caller) {
	serving := h.servingFor(c.callerID())
	subprocessv1.RegisterSubprocessServer(s, subprocess.NewServer(&procs.Service{M: h.sub, Caller: c.callerID(), Serving: serving, Confinement: h.runner.Confinement, ConfinementEnv: h.runner.Env}))
	jobsv1.RegisterJobsServer(s, jobs.NewServer(&jobtable.Service{M: h.jobs, Caller: c.callerID(), Serving: serving, Reaches: func(key string) error { return h.authorize(c, key) }}))
	toolsv1.RegisterToolsServer(s, tools.NewServer(h.tools.For(toolCaller{c})))
	sandboxv1.RegisterSandboxPolicyServer(s, sandbox.NewServer(h.sandbox))
	sandboxv1.RegisterSandboxServer(s, sandbox.NewRunnerServer(confine.Owned{R: h.runner, Add: func(ctx context.Context) confine.Options {
		o := c.callerID()
		if sv, ok := serving.Of(ctx); ok {
			o = sv.Owner
		}
		return h.confineOptions(o)
	}}))
	approvalv1.RegisterApprovalServer(s, approval.NewServer(&consent.Service{Policy: h.approval, Caller: c.callerID(), Serving: h.approvalServing(c.callerID())}))
	terminalsv1.RegisterTerminalsServer(s, terminals.NewServer(&termsessions.Service{M: h.terms, Caller: termCaller{h: h, c: c}, Serving: serving}))
}

// coreInterceptors apply the capability check to the core services (the
// forwarded ones are checked by the hub).
func (h *Host) coreInterceptors(c caller) []grpc.ServerOption {
	check := func(method string) error {
		key := h.keyOfService(hub.ServiceOf(method))
		if key == "" || !isCore(key) {
			return nil
		}
		return h.authorize(c, key)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := check(info.FullMethod); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if strings.HasPrefix(info.FullMethod, "/") {
				if err := check(info.FullMethod); err != nil {
					return err
				}
			}
			return handler(srv, ss)
		}),
	}
}

// setSandbox applies an edited sandbox section. A changed policy is a new
// provision of its key: the plugins that inject it reload and read it
// again (a tool that advertises escalation registers its tools anew).
func (h *Host) setSandbox(section *composition.Sandbox) {
	h.runner.SetChoice(runnerOf(section))
	if !h.sandbox.Set(section) || h.core == nil {
		return
	}
	h.log.Info("sandbox policy changed", "policy", section.String())
	if _, err := h.core.Replace(sandbox.PolicyKey, coreValue{key: sandbox.PolicyKey}, registry.ReloadDependents); err != nil {
		h.log.Error("sandbox policy not provided anew", "error", err)
	}
}

// runnerOf is the runner a sandbox section chose.
func runnerOf(section *composition.Sandbox) string {
	if section == nil {
		return composition.RunnerAuto
	}
	return section.Runner
}

// confineOptions are what a command of owner's may see beside the policy:
// its own spill files (the model is told to read them) inside the hidden
// runtime directory, and the binaries the host runs kept read-only.
func (h *Host) confineOptions(owner string) confine.Options {
	spill := h.sub.OwnerSpillDir(owner)
	_ = os.MkdirAll(spill, 0o700) // a mount point before any file spills
	opt := confine.Options{Show: []string{spill}, Tmp: h.ownerTemp(owner), Owner: owner}
	if self := selfBinary(); self != "" {
		opt.ReadOnly = append(opt.ReadOnly, self)
	}
	if bins := h.binaries.Load(); bins != nil {
		opt.ReadOnly = append(opt.ReadOnly, *bins...)
	}
	return opt
}

// ctx.terminals reaches a session's backend in the slot of the plugin that
// registered it: whichever process holds the slot by then (a restarted one
// serves the same sessions), each call acting for the session's owner.

// termCaller is a plugin as ctx.terminals sees a backend that registers.
type termCaller struct {
	h *Host
	c caller
}

func (t termCaller) ID() string    { return t.c.callerID() }
func (t termCaller) Label() string { return t.c.callerLabel() }

func (t termCaller) Serving() (termsessions.Slot, bool) {
	ld := t.c.self()
	if ld == nil {
		return nil, false
	}
	return backendSlot{h: t.h, sl: ld.slot, id: ld.en.id}, true
}

func (t termCaller) AddEffect(label string, dispose func(context.Context) error) error {
	return t.c.addEffect(label, dispose)
}

// backendSlot is a backend plugin's slot.
type backendSlot struct {
	h  *Host
	sl *slot
	id string // the plugin's entry id
}

func (b backendSlot) Live() bool { return b.sl.live() }

// Reach makes a call id of owner's that reaches the backend plugin, so
// what it spawns through ctx.subprocess while serving is owner's.
func (b backendSlot) Reach(owner string) (grpc.ClientConnInterface, string, func()) {
	id, end := b.h.calls.begin(owner, b.id)
	return backendConn{b: b, call: id}, id, end
}

// backendConn is a connection to a backend plugin's current process, for
// calls of one owner's.
type backendConn struct {
	b    backendSlot
	call string
}

func (c backendConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	h := c.b.h
	ctx, cancel := context.WithTimeout(ctx, h.callTimeout())
	defer cancel()
	ld, err := c.b.sl.get(ctx, c.b.id, h.restartWait())
	if err != nil {
		return sdk.HostError(codes.Unavailable, sdk.ReasonProviderGone, err.Error())
	}
	ctx = metadata.AppendToOutgoingContext(ctx, sdk.MetaCaller, "host", sdk.MetaCall, c.call)
	// Counted, so a reload of the backend lets the call finish first.
	ld.inflight.begin()
	defer ld.inflight.end()
	if err := ld.proc.Conn().Invoke(ctx, method, args, reply, opts...); err != nil {
		return gone(ctx, ld, err)
	}
	return nil
}

func (c backendConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, sdk.HostError(codes.Unimplemented, sdk.ReasonUnknownService, "a terminal backend is called without streams")
}

// selfBinary is the dsh binary, looked up once.
var selfBinary = sync.OnceValue(func() string {
	self, _ := os.Executable()
	return self
})
