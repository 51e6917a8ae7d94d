package sdk

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
)

// Serve runs p as a dsh plugin and does not return. It must be called from
// main; started by hand (not by a dsh host) it prints a short explanation and
// exits with status 1.
func Serve(p Plugin) {
	noDump()
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1) // see the package doc
	}
	desc := p.Describe()
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       desc.Name,
		Level:      logLevel(),
		Output:     os.Stderr,
		JSONFormat: true, // the host parses these lines and re-logs them
	})
	// Read once the process is non-dumpable (noDump): it holds the key.
	tlsConfig, err := handedTLS()
	if err != nil {
		logger.Error("TLS hand-over from the host", "error", err)
		os.Exit(1)
	}
	var tlsProvider func() (*tls.Config, error) // nil: go-plugin's AutoMTLS
	if tlsConfig != nil {
		tlsProvider = func() (*tls.Config, error) { return tlsConfig, nil }
	}
	stopProfile := startCPUProfile(logger.Warn)
	srv := newLifecycle(p, logger)
	go watchHost(logger, srv)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {PluginName: &gpPlugin{srv: srv}},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, ServerOptions()...)
			return plugin.DefaultGRPCServer(append(opts,
				grpc.ChainUnaryInterceptor(srv.gateUnary),
				grpc.ChainStreamInterceptor(srv.gateStream)))
		},
		TLSProvider: tlsProvider,
		Logger:      logger,
	})
	srv.dispose(context.Background()) // the host went away without Dispose
	stopProfile()
	os.Exit(0)
}

// EnvLogLevel is the level of the host's log of this plugin, which the
// host sets: a line below it would be parsed by the host only to be
// dropped (tool-bash logs every command at info, for instance).
const EnvLogLevel = "DSH_LOG_LEVEL"

// logLevel is EnvLogLevel's level; without one (a host that does not say),
// everything is sent and the host filters.
func logLevel() hclog.Level {
	if l := hclog.LevelFromString(os.Getenv(EnvLogLevel)); l != hclog.NoLevel {
		return l
	}
	return hclog.Debug
}

// gpPlugin is the go-plugin glue; it only registers services.
type gpPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *lifecycle
}

func (g *gpPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	g.srv.dial = func(id uint32) (*grpc.ClientConn, error) { return broker.DialWithOptions(id, DialOptions()...) }
	_ = g.srv.register(s) // a mismatch is Describe's answer
	return nil
}

func (g *gpPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("the dsh sdk serves plugins; hosts use package host/pluginproc")
}

// disposeAfterFailedApply bounds the Dispose the SDK runs itself when Apply
// fails: the host's own bound on Apply is 10 s.
const disposeAfterFailedApply = 5 * time.Second

type applyState int

const (
	notApplied applyState = iota
	applying
	applied
	applyFailed
)

// lifecycle serves dsh.plugin.v1.Lifecycle for one plugin process.
//
// No lock is held across the plugin's Apply or Dispose: Health and Release
// answer while a slow Apply runs, and a Dispose that arrives meanwhile
// cancels Apply's context and runs the plugin's Dispose once Apply returns.
type lifecycle struct {
	pluginv1.UnimplementedLifecycleServer
	impl   Plugin
	logger hclog.Logger
	dial   func(id uint32) (*grpc.ClientConn, error)

	// reg is what the plugin's Register put on the server.
	reg registered

	mu          sync.Mutex
	state       applyState
	disposed    bool // Dispose was asked for (or the host is gone)
	cancelApply context.CancelFunc
	applyDone   chan struct{} // closed when the running Apply returns
	host        *Host
	failed      atomic.Bool // Apply failed; read on every call, so no lock

	releaseOnce sync.Once
	releaseErr  error
}

func newLifecycle(p Plugin, logger hclog.Logger) *lifecycle {
	return &lifecycle{impl: p, logger: logger, reg: registered{}}
}

// register serves Lifecycle and the plugin's services on s, and checks the
// description against what the plugin registered. A mismatch is logged
// here and answered to every Describe, the host's first call: failing the
// handshake instead would reach the host only as "not a dsh plugin".
func (l *lifecycle) register(s *grpc.Server) error {
	pluginv1.RegisterLifecycleServer(s, l)
	if r, ok := l.impl.(Registrar); ok {
		l.reg = registeredBy(r, s)
	}
	if _, err := l.impl.Describe().proto(l.reg); err != nil {
		l.logger.Error("the description does not match the registered services", "error", err)
		return err
	}
	return nil
}

func (l *lifecycle) Describe(context.Context, *pluginv1.DescribeRequest) (*pluginv1.Description, error) {
	d, err := l.impl.Describe().proto(l.reg)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return d, nil
}

func (l *lifecycle) Apply(ctx context.Context, req *pluginv1.ApplyRequest) (*pluginv1.ApplyResponse, error) {
	l.mu.Lock()
	if l.disposed {
		l.mu.Unlock()
		return nil, status.Error(codes.FailedPrecondition, "apply: plugin is disposed")
	}
	if l.state != notApplied {
		l.mu.Unlock()
		return nil, status.Error(codes.FailedPrecondition, "apply: already applied; the host starts a new process to re-apply")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	l.state, l.cancelApply, l.applyDone = applying, cancel, done
	l.mu.Unlock()

	conn, err := l.dial(req.HostBrokerId)
	if err != nil {
		l.mu.Lock()
		l.state = notApplied // nothing was made: the host may try again
		close(done)
		l.mu.Unlock()
		return nil, status.Errorf(codes.Unavailable, "apply: dial host broker %d: %v", req.HostBrokerId, err)
	}
	host := &Host{
		id:         req.Id,
		runtimeDir: req.RuntimeDir,
		conn:       conn,
		client:     pluginv1.NewHostClient(conn),
		logger:     l.logger,
	}
	l.mu.Lock()
	l.host = host
	l.mu.Unlock()

	cfg := json.RawMessage(req.ConfigJson)
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	applyErr := l.impl.Apply(ctx, host, cfg)

	l.mu.Lock()
	disposed := l.disposed
	if applyErr != nil || disposed {
		l.state = applyFailed
		l.failed.Store(true)
	} else {
		l.state = applied
	}
	close(done)
	l.mu.Unlock()

	if applyErr != nil || disposed {
		// Release what a half-done Apply made; the process then refuses
		// its services until the host stops it (it does not exit by
		// itself, which the host would read as a crash).
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), disposeAfterFailedApply)
		defer dcancel()
		l.mu.Lock()
		l.disposed = true
		l.mu.Unlock()
		if err := l.release(dctx); err != nil {
			l.logger.Warn("dispose after a failed apply", "error", err)
		}
		if applyErr == nil {
			applyErr = errors.New("disposed while applying")
		}
		return nil, status.Error(codes.FailedPrecondition, applyErr.Error())
	}
	resp := &pluginv1.ApplyResponse{}
	if fr, ok := l.impl.(FactsReporter); ok {
		resp.Facts = map[string]*pluginv1.Facts{}
		for key, values := range fr.Facts() {
			resp.Facts[key] = &pluginv1.Facts{Values: values}
		}
	}
	return resp, nil
}

// Check answers what Apply would refuse in the same words (a plugin that
// is no Checker has nothing more to check).
func (l *lifecycle) Check(ctx context.Context, req *pluginv1.CheckRequest) (*pluginv1.CheckResponse, error) {
	if c, ok := l.impl.(Checker); ok {
		cfg := json.RawMessage(req.ConfigJson)
		if len(cfg) == 0 {
			cfg = json.RawMessage("{}")
		}
		if err := c.Check(ctx, cfg); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
	}
	return &pluginv1.CheckResponse{}, nil
}

func (l *lifecycle) Dispose(ctx context.Context, _ *pluginv1.DisposeRequest) (*pluginv1.DisposeResponse, error) {
	if err := l.dispose(ctx); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.DisposeResponse{}, nil
}

// dispose marks the plugin disposed and releases it. An Apply still running
// is cancelled and waited for (within ctx); if ctx ends first, that Apply
// releases the plugin itself when it returns.
func (l *lifecycle) dispose(ctx context.Context) error {
	l.mu.Lock()
	l.disposed = true
	state, done := l.state, l.applyDone
	if state == applying {
		l.cancelApply()
	}
	l.mu.Unlock()
	if state == applying {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("dispose: apply is still running (cancelled); it is disposed when apply returns: %w", ctx.Err())
		}
	}
	return l.release(ctx)
}

// release runs the plugin's Dispose once, if Apply ever ran, and closes the
// host connection.
func (l *lifecycle) release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.mu.Lock()
		ran, host := l.state != notApplied, l.host
		l.mu.Unlock()
		if d, ok := l.impl.(Disposer); ok && ran {
			l.releaseErr = d.Dispose(ctx)
		}
		if host != nil {
			_ = host.conn.Close()
		}
	})
	return l.releaseErr
}

// gateUnary and gateStream refuse calls to the plugin's own services once
// its Apply failed: what they would use is released. (After a Dispose of a
// working plugin calls still run, as a reload's last calls may arrive
// then.)
func (l *lifecycle) gateUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := l.gate(info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (l *lifecycle) gateStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := l.gate(info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

func (l *lifecycle) gate(method string) error {
	service, _, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if _, own := l.reg[service]; !own {
		return nil
	}
	if l.failed.Load() {
		return status.Errorf(codes.Unavailable, "plugin %q failed to apply and serves no calls; the host stops it", l.impl.Describe().Name)
	}
	return nil
}

func (l *lifecycle) Health(ctx context.Context, _ *pluginv1.HealthRequest) (*pluginv1.HealthResponse, error) {
	if h, ok := l.impl.(HealthChecker); ok {
		if err := h.Health(ctx); err != nil {
			return &pluginv1.HealthResponse{Ok: false, Detail: err.Error()}, nil
		}
	}
	return &pluginv1.HealthResponse{Ok: true}, nil
}

func (l *lifecycle) Release(ctx context.Context, req *pluginv1.ReleaseRequest) (*pluginv1.ReleaseResponse, error) {
	if r, ok := l.impl.(Releaser); ok {
		if err := r.Release(ctx, req.Caller); err != nil {
			return nil, status.Error(codes.Internal, fmt.Sprintf("release %q: %v", req.Caller, err))
		}
	}
	return &pluginv1.ReleaseResponse{}, nil
}

// onHostGone disposes the plugin (bounded) and exits: a plugin never outlives
// its host.
func (l *lifecycle) onHostGone(logger hclog.Logger) {
	logger.Warn("host process is gone; disposing and exiting")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.dispose(ctx)
	os.Exit(1)
}
