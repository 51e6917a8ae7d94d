package host

import (
	"context"
	"os"
	"strings"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/core/approval/approvalv1"
	"github.com/dshrun/dsh/core/jobs"
	"github.com/dshrun/dsh/core/jobs/jobsv1"
	"github.com/dshrun/dsh/core/sandbox"
	"github.com/dshrun/dsh/core/sandbox/sandboxv1"
	"github.com/dshrun/dsh/core/subprocess"
	"github.com/dshrun/dsh/core/subprocess/subprocessv1"
	"github.com/dshrun/dsh/core/tools"
	"github.com/dshrun/dsh/core/tools/toolsv1"
	"github.com/dshrun/dsh/host/composition"
	happroval "github.com/dshrun/dsh/host/core/approval"
	hjobs "github.com/dshrun/dsh/host/core/jobs"
	hsandbox "github.com/dshrun/dsh/host/core/sandbox"
	hsub "github.com/dshrun/dsh/host/core/subprocess"
	"github.com/dshrun/dsh/registry"
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
	owner := h.ownerFor(c.callerID())
	call := func(ctx context.Context) string {
		id := callOf(ctx)
		if _, ok := h.calls.owner(id, c.callerID()); !ok {
			return ""
		}
		return id
	}
	subprocessv1.RegisterSubprocessServer(s, subprocess.NewServer(&hsub.Service{M: h.sub, Caller: c.callerID(), Owner: owner, Call: call, Confinement: h.runner.Confinement}))
	jobsv1.RegisterJobsServer(s, jobs.NewServer(&hjobs.Service{M: h.jobs, Caller: c.callerID(), Owner: owner, Reaches: func(key string) error { return h.authorize(c, key) }}))
	toolsv1.RegisterToolsServer(s, tools.NewServer(h.tools.For(toolCaller{c})))
	sandboxv1.RegisterSandboxPolicyServer(s, sandbox.NewServer(h.sandbox))
	sandboxv1.RegisterSandboxServer(s, sandbox.NewRunnerServer(hsandbox.Owned{R: h.runner, Add: func(ctx context.Context) hsandbox.Options {
		o, ok := owner(ctx)
		if !ok {
			o = c.callerID()
		}
		return h.confineOptions(o)
	}}))
	approvalv1.RegisterApprovalServer(s, approval.NewServer(&happroval.Service{Policy: h.approval, Caller: c.callerID(), Owner: owner, Asker: h.askerFor(c.callerID())}))
}

// coreInterceptors apply the capability check to the core services (the
// forwarded ones are checked in forward).
func (h *Host) coreInterceptors(c caller) []grpc.ServerOption {
	check := func(method string) error {
		key := h.keyOfService(serviceOf(method))
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
func (h *Host) confineOptions(owner string) hsandbox.Options {
	spill := h.sub.OwnerSpillDir(owner)
	_ = os.MkdirAll(spill, 0o700) // a mount point before any file spills
	opt := hsandbox.Options{Show: []string{spill}}
	if self, err := os.Executable(); err == nil {
		opt.ReadOnly = append(opt.ReadOnly, self)
	}
	if bins := h.binaries.Load(); bins != nil {
		opt.ReadOnly = append(opt.ReadOnly, *bins...)
	}
	return opt
}
