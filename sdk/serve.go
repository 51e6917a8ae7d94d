package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshrun/dsh/sdk/pluginv1"
)

// Serve runs p as a dsh plugin and does not return. It must be called from
// main; started by hand (not by a dsh host) it prints a short explanation and
// exits with status 1.
func Serve(p Plugin) {
	desc := p.Describe()
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       desc.Name,
		Level:      hclog.Debug,
		Output:     os.Stderr,
		JSONFormat: true, // the host parses these lines and re-logs them
	})
	srv := &lifecycle{impl: p, logger: logger}
	go watchHost(logger, srv)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			ProtocolVersion: {PluginName: &gpPlugin{srv: srv}},
		},
		GRPCServer: plugin.DefaultGRPCServer,
		Logger:     logger,
	})
	srv.dispose(context.Background()) // the host went away without Dispose
	os.Exit(0)
}

// gpPlugin is the go-plugin glue; it only registers services.
type gpPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *lifecycle
}

func (g *gpPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	g.srv.broker = broker
	pluginv1.RegisterLifecycleServer(s, g.srv)
	if r, ok := g.srv.impl.(Registrar); ok {
		r.Register(s)
	}
	return nil
}

func (g *gpPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("the dsh sdk serves plugins; hosts use package host/pluginproc")
}

// lifecycle serves dsh.plugin.v1.Lifecycle for one plugin process.
type lifecycle struct {
	pluginv1.UnimplementedLifecycleServer
	impl   Plugin
	logger hclog.Logger
	broker *plugin.GRPCBroker

	mu       sync.Mutex
	applied  bool
	disposed bool
	host     *Host
}

func (l *lifecycle) Describe(context.Context, *pluginv1.DescribeRequest) (*pluginv1.Description, error) {
	return l.impl.Describe().proto(), nil
}

func (l *lifecycle) Apply(ctx context.Context, req *pluginv1.ApplyRequest) (*pluginv1.ApplyResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.applied {
		return nil, status.Error(codes.FailedPrecondition, "apply: already applied; the host starts a new process to re-apply")
	}
	if l.disposed {
		return nil, status.Error(codes.FailedPrecondition, "apply: plugin is disposed")
	}
	conn, err := l.broker.Dial(req.HostBrokerId)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "apply: dial host broker %d: %v", req.HostBrokerId, err)
	}
	host := &Host{
		id:         req.Id,
		runtimeDir: req.RuntimeDir,
		conn:       conn,
		client:     pluginv1.NewHostClient(conn),
		logger:     l.logger,
	}
	cfg := json.RawMessage(req.ConfigJson)
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	if err := l.impl.Apply(ctx, host, cfg); err != nil {
		_ = conn.Close()
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	l.applied, l.host = true, host
	resp := &pluginv1.ApplyResponse{}
	if fr, ok := l.impl.(FactsReporter); ok {
		resp.Facts = map[string]*pluginv1.Facts{}
		for key, values := range fr.Facts() {
			resp.Facts[key] = &pluginv1.Facts{Values: values}
		}
	}
	return resp, nil
}

func (l *lifecycle) Dispose(ctx context.Context, _ *pluginv1.DisposeRequest) (*pluginv1.DisposeResponse, error) {
	if err := l.dispose(ctx); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.DisposeResponse{}, nil
}

// dispose runs the plugin's Dispose once and closes the host connection.
func (l *lifecycle) dispose(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.disposed {
		return nil
	}
	l.disposed = true
	var err error
	if d, ok := l.impl.(Disposer); ok && l.applied {
		err = d.Dispose(ctx)
	}
	if l.host != nil {
		_ = l.host.conn.Close()
	}
	return err
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
