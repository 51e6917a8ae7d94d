// Package pluginproc starts and stops one dsh plugin process. It owns the
// host side of the go-plugin handshake (gRPC only, mutual TLS with
// certificates from the host's own CA, or AutoMTLS for plugins that do not
// take them: tls.go; the sha256 pin through SecureConfig; a bounded start),
// the Lifecycle client, exit detection, and a stop that always ends: Dispose
// under a deadline, then go-plugin's Kill under a deadline of our own (it
// can hang), then SIGKILL of the plugin's process group.
//
// What is OS-specific lives in exit_*.go and proc_*.go. On Linux a plugin
// gets a parent-death signal and its exit is seen through a pidfd; other
// Unix systems (macOS) have neither, so the exit is polled and an orphaned
// plugin relies on the SDK's watch of the host. On Windows a plugin gets its
// own console process group and the final kill reaches the plugin only, not
// what it started, until a Job Object holds its tree.
//
// It knows nothing of compositions, the registry or other plugins.
package pluginproc

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/sdk"
)

// Config says which binary to start and how.
type Config struct {
	ID     string // composition entry id, used in logs and errors
	Binary string // absolute path of the executable
	// SHA256, when set (lowercase hex), must match the binary's checksum;
	// go-plugin checks it right before the exec.
	SHA256 string
	// StartTimeout bounds the handshake; 0 means 10s.
	StartTimeout time.Duration
	// Env is the plugin's whole environment; the host's is never inherited.
	Env []string
	// SocketDir is where the plugin creates its sockets (a per-host
	// directory the host sweeps).
	SocketDir string
	Logger    hclog.Logger
}

// Process is one running plugin. Methods are safe for concurrent use.
type Process struct {
	cfg       Config
	client    *plugin.Client
	conn      *grpc.ClientConn
	broker    *plugin.GRPCBroker
	life      *lifecycle.Client
	desc      *lifecycle.Description
	tlsConfig *tls.Config // the host's side of this plugin's mutual TLS
	pid       int
	exited    chan struct{}
	exitWatch // the kernel's word on the exit, where it has one (exit_*.go)
	*exitNote // go-plugin's word on it

	stopOnce sync.Once
	stopErr  error
}

// Error is a failure to start or talk to a plugin; it names the entry and
// the binary.
type Error struct {
	ID     string
	Binary string
	Op     string
	Err    error
}

func (e *Error) Error() string {
	var pe *ProtocolError
	if errors.As(e.Err, &pe) {
		// One sentence: the plugin, both versions and what to do.
		return fmt.Sprintf("plugin %q (%s) %v", e.ID, e.Binary, pe)
	}
	return fmt.Sprintf("plugin %q (%s): %s: %v", e.ID, e.Binary, e.Op, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrChecksum is wrapped when the binary does not match its sha256 pin.
var ErrChecksum = errors.New("checksum mismatch")

// ProtocolError is a plugin that speaks no dsh plugin protocol version this
// host speaks.
type ProtocolError struct {
	Plugin int // the newest version the plugin speaks
	Host   int // the version this host speaks
}

func (e *ProtocolError) Error() string {
	if e.Plugin < e.Host {
		return fmt.Sprintf("speaks dsh plugin protocol %d; this dsh speaks %d: rebuild the plugin against a current dsh sdk, or run it with a dsh release that speaks protocol %d", e.Plugin, e.Host, e.Plugin)
	}
	return fmt.Sprintf("speaks dsh plugin protocol %d; this dsh speaks %d: upgrade dsh to a release that speaks protocol %d, or use a build of the plugin for protocol %d", e.Plugin, e.Host, e.Plugin, e.Host)
}

// Start launches the plugin, completes the handshake and reads its
// description. On any failure nothing is left running.
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	fail := func(op string, err error) (*Process, error) {
		return nil, &Error{ID: cfg.ID, Binary: cfg.Binary, Op: op, Err: err}
	}
	var secure *plugin.SecureConfig
	if cfg.SHA256 != "" {
		sum, err := hex.DecodeString(cfg.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return fail("start", fmt.Errorf("sha256 pin %q is not 64 hex digits", cfg.SHA256))
		}
		secure = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	// A start the caller cancels must end at once; go-plugin holds its lock
	// through the whole handshake, so its Kill cannot interrupt it. The
	// command's own context can: it is cancelled only then (never after a
	// successful start), and kills the process group.
	startCtx, abortStart := context.WithCancel(context.Background())
	started := false
	// failed ends the forking thread of a start that did not succeed.
	failed := make(chan struct{})
	defer func() {
		if !started {
			abortStart()
			close(failed)
		}
	}()
	cmd := exec.CommandContext(startCtx, cfg.Binary)
	cmd.Cancel = func() error {
		killGroup(cmd.Process.Pid)
		return nil
	}
	cmd.Env = append([]string(nil), cfg.Env...)
	if cfg.SocketDir != "" {
		cmd.Env = append(cmd.Env, plugin.EnvUnixSocketDir+"="+cfg.SocketDir)
	}
	cmd.SysProcAttr = sysProcAttr()
	ptls, err := newPluginTLS(cfg.ID)
	if err != nil {
		return fail("start", err)
	}
	// The certificate only: an AutoMTLS plugin trusts the host by it.
	cmd.Env = append(cmd.Env, "PLUGIN_CLIENT_CERT="+string(ptls.hostPEM))
	closeHandOver, err := handOver(cmd, ptls.handover)
	if err != nil {
		return fail("start", fmt.Errorf("TLS hand-over: %w", err))
	}
	// Start returns only once the handshake is over, whatever its outcome.
	defer closeHandOver()
	note := &exitNote{said: make(chan struct{})}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: sdk.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			sdk.ProtocolVersion: {sdk.PluginName: &hostPlugin{}},
		},
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		TLSConfig:        ptls.config,
		StartTimeout:     cfg.StartTimeout,
		SkipHostEnv:      true,
		GRPCDialOptions:  sdk.DialOptions(),
		Logger:           quietStops{cfg.Logger, filepath.Base(cfg.Binary), note},
	})
	p := &Process{cfg: cfg, client: client, tlsConfig: ptls.config, exited: make(chan struct{}), exitNote: note}

	type result struct {
		raw any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The plugin's parent-death signal fires when the thread that
		// forked it ends, not the host: fork it from a locked thread that
		// lives as long as the plugin does (the runtime ends a locked
		// thread with its goroutine, as it does the threads that start
		// confined commands).
		runtime.LockOSThread()
		defer func() {
			select {
			case <-p.exited:
			case <-failed:
			}
		}()
		rpc, err := client.Client()
		if err != nil {
			ch <- result{err: err}
			return
		}
		raw, err := rpc.Dispense(sdk.PluginName)
		ch <- result{raw, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		// Kill cannot stop a start that has not begun: end the process,
		// wait for the start to end either way, then make sure nothing it
		// started survives.
		abortStart()
		client.Kill()
		<-ch
		p.killHard()
		return fail("start", ctx.Err())
	}
	if r.err != nil {
		p.killHard()
		return fail("start", explainStartError(r.err))
	}
	c := r.raw.(*hostSide)
	p.conn, p.broker = c.conn, c.broker
	p.life = lifecycle.NewClient(c.conn)
	if rc := client.ReattachConfig(); rc != nil {
		p.pid = rc.Pid
	}
	go p.watchExit()

	dctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	desc, err := p.life.Describe(dctx)
	if err != nil {
		p.killHard()
		return fail("describe", err)
	}
	p.desc = desc
	started = true
	go func() {
		<-p.exited
		abortStart() // nothing left to cancel: release the context
	}()
	return p, nil
}

// explainStartError turns go-plugin's start errors into what a user can act on.
func explainStartError(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return fmt.Errorf("%w: the binary does not match its sha256 pin", ErrChecksum)
	case strings.Contains(msg, "ncompatible API version"):
		if v, ok := pluginVersion(msg); ok {
			return &ProtocolError{Plugin: v, Host: sdk.ProtocolVersion}
		}
		return fmt.Errorf("this dsh speaks dsh plugin protocol %d and the plugin another: %w", sdk.ProtocolVersion, err)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return fmt.Errorf("not a dsh plugin, or it wrote to stdout before its handshake: %w", err)
	case strings.Contains(msg, "plugin exited before we could connect"):
		// go-plugin's own words add nothing here, and the sentence can
		// reach a model (a tool whose plugin is down names its last error).
		return errors.New("it exited while starting, before it was ready: it crashed at start, or it is not a dsh plugin")
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return fmt.Errorf("no handshake within the start timeout: %w", err)
	}
	return err
}

// pluginVersion reads the plugin's protocol version from go-plugin's
// refusal, "incompatible API version with plugin. Plugin version: N,
// Client versions: [...]". go-plugin gives it in this text only (an
// fmt.Errorf, no error type), and the host learns it nowhere else: the
// plugin names its version in the handshake line go-plugin reads and
// refuses. Its test holds go-plugin's wording to account.
func pluginVersion(msg string) (int, bool) {
	const mark = "Plugin version: "
	i := strings.Index(msg, mark)
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len(mark):]
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	v, err := strconv.Atoi(rest[:end])
	return v, err == nil
}

// watchExit closes p.exited when the process ends, however it ends.
func (p *Process) watchExit() {
	defer close(p.exited)
	if p.pid <= 0 {
		return
	}
	if p.waitKernel(p.pid) {
		return
	}
	for !p.client.Exited() {
		time.Sleep(50 * time.Millisecond)
	}
}

// ExitReason says how the process ended ("signal: killed", "exit status
// 1"), waiting up to wait for the word once it has exited; "" when it is
// not known by then.
func (p *Process) ExitReason(wait time.Duration) string {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.said:
	case <-t.C:
		return ""
	}
	return p.text
}

// Gone reports whether the process has exited, asking the kernel rather
// than waiting for Exited to be closed: a call made after a crash must not
// be sent to the dead process.
func (p *Process) Gone() bool {
	select {
	case <-p.exited:
		return true
	default:
	}
	return p.kernelSaysGone()
}

// Description is what the plugin said of itself at start.
func (p *Process) Description() *lifecycle.Description { return p.desc }

// Binary is the executable the process runs.
func (p *Process) Binary() string { return p.cfg.Binary }

// Pid is the plugin's process id.
func (p *Process) Pid() int { return p.pid }

// Conn is the gRPC connection to the plugin's own server (Lifecycle and the
// services it provides).
func (p *Process) Conn() *grpc.ClientConn { return p.conn }

// Broker is the go-plugin broker shared with the plugin.
func (p *Process) Broker() *plugin.GRPCBroker { return p.broker }

// Lifecycle is the plugin's Lifecycle client.
func (p *Process) Lifecycle() *lifecycle.Client { return p.life }

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Apply sends the effective config and the broker id on which the host
// serves it; it returns the capability facts the plugin reported.
func (p *Process) Apply(ctx context.Context, req *lifecycle.ApplyRequest) (*lifecycle.ApplyResponse, error) {
	resp, err := p.life.Apply(ctx, req)
	if err != nil {
		return nil, &Error{ID: p.cfg.ID, Binary: p.cfg.Binary, Op: "apply", Err: err}
	}
	return resp, nil
}

// Check asks the plugin what Apply would refuse of req's config, without
// applying it. Its error reads as Apply's would (the same Op), since it is
// the one serve would meet; a plugin that predates Check has nothing to
// check.
func (p *Process) Check(ctx context.Context, req *lifecycle.CheckRequest) error {
	if err := p.life.Check(ctx, req); err != nil {
		return &Error{ID: p.cfg.ID, Binary: p.cfg.Binary, Op: "apply", Err: err}
	}
	return nil
}

// Stop disposes the plugin and ends its process within ctx's deadline (or
// 5s): Dispose, then go-plugin's Kill, then SIGKILL of its process group.
// It is idempotent and always returns once the process is gone.
func (p *Process) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(ctx) })
	return p.stopErr
}

func (p *Process) stop(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var errs []error
	select {
	case <-p.exited:
	default:
		deadline, _ := ctx.Deadline()
		// Dispose gets half the budget; the rest is for the process to exit.
		dctx, cancel := context.WithTimeout(ctx, time.Until(deadline)/2)
		if err := p.life.Dispose(dctx); err != nil {
			errs = append(errs, &Error{ID: p.cfg.ID, Binary: p.cfg.Binary, Op: "dispose", Err: err})
		}
		cancel()
	}
	killed := make(chan struct{})
	go func() { p.client.Kill(); close(killed) }()
	select {
	case <-killed:
	case <-ctx.Done():
		p.killGroup()
		select {
		case <-killed:
		case <-time.After(2 * time.Second):
			// go-plugin can block on a grandchild holding its pipes; the
			// process itself is gone, which is what matters.
		}
	}
	p.killGroup() // children the plugin left behind in its group
	<-p.waitExited(2 * time.Second)
	return errors.Join(errs...)
}

// Kill ends the process and its group at once (SIGKILL), without Dispose:
// for a process that no longer answers. Its exit shows on Exited.
func (p *Process) Kill() { p.killGroup() }

func (p *Process) waitExited(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		select {
		case <-p.exited:
		case <-time.After(d):
		}
	}()
	return ch
}

func (p *Process) killGroup() {
	if p.pid > 0 {
		killGroup(p.pid)
	}
}

// killHard ends a process that failed during start.
func (p *Process) killHard() {
	if rc := p.client.ReattachConfig(); rc != nil && rc.Pid > 0 {
		killGroup(rc.Pid)
	}
	done := make(chan struct{})
	go func() { p.client.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
}

// hostPlugin is the go-plugin glue of the host side.
type hostPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

type hostSide struct {
	conn   *grpc.ClientConn
	broker *plugin.GRPCBroker
}

func (hostPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("the host does not serve plugins")
}

func (hostPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &hostSide{conn: conn, broker: broker}, nil
}
