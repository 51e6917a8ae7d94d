package shell

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/internal/seam"
	"github.com/dshrun/dsh/plugins/shell/shellv1"
	"github.com/dshrun/dsh/sdk"
)

// Client is a consumer's view of the current ctx.shell provider, usually
// reached with sdk.Host.Conn(shell.Key).
type Client struct {
	c    shellv1.ShellClient
	mode SandboxMode
	// noExec is set once the provider answered Exec with UNIMPLEMENTED;
	// a provider replaced later gets one more try after execRetry.
	noExec atomic.Int64 // unix nanoseconds of that answer, 0 if none
}

// execRetry is how long a provider without Exec is not asked again.
const execRetry = time.Minute

// NewClient wraps a connection to ctx.shell. mode is the provider's
// sandboxMode fact ("" when it does not sandbox), from sdk.Host.Lookup.
func NewClient(conn grpc.ClientConnInterface, mode SandboxMode) *Client {
	return &Client{c: shellv1.NewShellClient(conn), mode: mode}
}

// SandboxMode is the executor's default sandbox mode, "" when it does not
// sandbox.
func (c *Client) SandboxMode() SandboxMode { return c.mode }

// Resolve fills and caps a request.
func (c *Client) Resolve(ctx context.Context, req *ExecRequest) (*ExecSpec, error) {
	spec, err := c.c.Resolve(ctx, req)
	if err != nil {
		return nil, clientError("shell resolve", err)
	}
	return spec, nil
}

// Run runs a resolved spec in the foreground; cancelling ctx aborts it.
func (c *Client) Run(ctx context.Context, spec *ExecSpec) (*RunResult, error) {
	res, err := c.c.Run(ctx, spec)
	if err != nil {
		return nil, clientError("shell run", err)
	}
	return res, nil
}

// Exec resolves and runs a request in the foreground in one round trip
// where the provider serves Exec, else with Resolve and Run. The result's
// Workdir is the resolved working directory.
func (c *Client) Exec(ctx context.Context, req *ExecRequest) (*RunResult, error) {
	if at := c.noExec.Load(); at == 0 || time.Since(time.Unix(0, at)) > execRetry {
		res, err := c.c.Exec(ctx, req)
		if err == nil {
			c.noExec.Store(0)
			return res, nil
		}
		// Only a provider that lacks the method falls back; an unknown
		// service or a gone provider is an error like any other.
		if !errors.Is(sdk.FromRPC(err), sdk.ErrUnimplemented) {
			return nil, clientError("shell exec", err)
		}
		c.noExec.Store(time.Now().UnixNano())
	}
	spec, err := c.Resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	res, err := c.Run(ctx, spec)
	if err != nil {
		return nil, err
	}
	if res.Workdir == "" {
		res.Workdir = spec.Workdir
	}
	return res, nil
}

// Start starts a resolved spec in the background.
func (c *Client) Start(ctx context.Context, spec *ExecSpec) (*Started, error) {
	resp, err := c.c.Start(ctx, spec)
	if err != nil {
		return nil, clientError("shell start", err)
	}
	return resp, nil
}

// StartProcess is Start, returning the process's handle.
func (c *Client) StartProcess(ctx context.Context, spec *ExecSpec) (*Process, error) {
	resp, err := c.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &Process{ID: resp.Id, Pid: int(resp.Pid), Sandbox: resp.Sandbox, c: c}, nil
}

// ReadOutput returns the output process id produced since the previous read.
func (c *Client) ReadOutput(ctx context.Context, id string) (*ProcessRead, error) {
	r, err := c.c.ReadOutput(ctx, &shellv1.ProcessRef{Id: id})
	if err != nil {
		return nil, clientError("shell read"+" "+id, err)
	}
	return r, nil
}

// Kill terminates process id's tree; false once it had finished.
func (c *Client) Kill(ctx context.Context, id string) (bool, error) {
	r, err := c.c.Kill(ctx, &shellv1.ProcessRef{Id: id})
	if err != nil {
		return false, clientError("shell kill"+" "+id, err)
	}
	return r.Killed, nil
}

// Wait blocks until process id has finished.
func (c *Client) Wait(ctx context.Context, id string) (*ProcessState, error) {
	r, err := c.c.Wait(ctx, &shellv1.ProcessRef{Id: id})
	if err != nil {
		return nil, clientError("shell wait"+" "+id, err)
	}
	return r, nil
}

// Limits are the provider's defaults and caps; DefaultLimits for a
// provider that does not say them (it answers UNIMPLEMENTED).
func (c *Client) Limits(ctx context.Context) (*Limits, error) {
	l, err := c.c.Limits(ctx, &shellv1.LimitsRequest{})
	if err == nil {
		return l, nil
	}
	// As for Exec: only a provider that lacks the method is assumed to
	// have the defaults; an unknown service or a gone provider is an error.
	if errors.Is(sdk.FromRPC(err), sdk.ErrUnimplemented) {
		return DefaultLimits(), nil
	}
	return nil, clientError("shell limits", err)
}

var _ Executor = (*Client)(nil)

// Attach returns the handle of a process started earlier, possibly
// through another executor instance.
func (c *Client) Attach(id string) *Process { return &Process{ID: id, c: c} }

// Process is the handle of a background process. Its id belongs to
// ctx.subprocess, so it stays valid across executor reloads.
type Process struct {
	ID      string
	Pid     int
	Sandbox *SandboxInfo
	c       *Client
}

// ReadOutput returns the output produced since the previous read.
func (p *Process) ReadOutput(ctx context.Context) (*ProcessRead, error) {
	return p.c.ReadOutput(ctx, p.ID)
}

// Kill terminates the process tree; false once it had finished.
func (p *Process) Kill(ctx context.Context) (bool, error) { return p.c.Kill(ctx, p.ID) }

// Wait blocks until the process has finished.
func (p *Process) Wait(ctx context.Context) (*ProcessState, error) { return p.c.Wait(ctx, p.ID) }

// clientError is a failed call in the seam's words: the seam's own errors
// (ErrInvalid, ErrCannotRun) come back as such, the rest in the sdk
// vocabulary, the operation named.
func clientError(op string, err error) error { return seam.CallError(op, err, kinds...) }
