package shell

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

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
		return nil, fmt.Errorf("shell resolve: %w", err)
	}
	return spec, nil
}

// Run runs a resolved spec in the foreground; cancelling ctx aborts it.
func (c *Client) Run(ctx context.Context, spec *ExecSpec) (*RunResult, error) {
	res, err := c.c.Run(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("shell run: %w", err)
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
			return nil, fmt.Errorf("shell exec: %w", err)
		}
		c.noExec.Store(time.Now().UnixNano())
	}
	spec, err := c.Resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	spec.DshEnv = req.DshEnv // the caller's trusted layer, whatever Resolve did with it
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
func (c *Client) Start(ctx context.Context, spec *ExecSpec) (*Process, error) {
	resp, err := c.c.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("shell start: %w", err)
	}
	return &Process{ID: resp.Id, Pid: int(resp.Pid), Sandbox: resp.Sandbox, c: c.c}, nil
}

// Attach returns the handle of a process started earlier, possibly
// through another executor instance.
func (c *Client) Attach(id string) *Process { return &Process{ID: id, c: c.c} }

// Process is the handle of a background process. Its id belongs to
// ctx.subprocess, so it stays valid across executor reloads.
type Process struct {
	ID      string
	Pid     int
	Sandbox *SandboxInfo
	c       shellv1.ShellClient
}

// ReadOutput returns the output produced since the previous read.
func (p *Process) ReadOutput(ctx context.Context) (*ProcessRead, error) {
	r, err := p.c.ReadOutput(ctx, &shellv1.ProcessRef{Id: p.ID})
	if err != nil {
		return nil, fmt.Errorf("shell read %s: %w", p.ID, err)
	}
	return r, nil
}

// Kill terminates the process tree; false once it had finished.
func (p *Process) Kill(ctx context.Context) (bool, error) {
	r, err := p.c.Kill(ctx, &shellv1.ProcessRef{Id: p.ID})
	if err != nil {
		return false, fmt.Errorf("shell kill %s: %w", p.ID, err)
	}
	return r.Killed, nil
}

// Wait blocks until the process has finished.
func (p *Process) Wait(ctx context.Context) (*ProcessState, error) {
	r, err := p.c.Wait(ctx, &shellv1.ProcessRef{Id: p.ID})
	if err != nil {
		return nil, fmt.Errorf("shell wait %s: %w", p.ID, err)
	}
	return r, nil
}
