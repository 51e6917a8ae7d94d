// Command dsh-probe is a test consumer: it injects ctx.shellEnv, registers a
// fact from its config, and serves dsh.probe.v1.Probe so tests and
// benchmarks can make it call the provider through the host.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/internal/testplugins/probev1"
	"github.com/dshrun/dsh/plugins/shellenv"
	"github.com/dshrun/dsh/sdk"
)

type config struct {
	Fact      string `json:"fact"`
	FailApply bool   `json:"failApply"`
	Provide   string `json:"provideKey"`
	// SlowApplyMs delays Apply while the file SlowApplyIf exists: a
	// restart that takes long, as on a loaded machine.
	SlowApplyIf string `json:"slowApplyIf"`
	SlowApplyMs int    `json:"slowApplyMs"`
}

type probe struct {
	probev1.UnimplementedProbeServer
	env *shellenv.Client
}

// Describe depends only on the entry id the host gave the process, so one
// binary can play several roles in graph tests: an id "cyc-x-y" provides x
// and injects y (and "policy-x", below).
func (p *probe) Describe() sdk.Description {
	provides := []sdk.Provide{{Key: "probe"}}
	inject := []sdk.Inject{{Key: shellenv.Key}, {Key: "nobody", Optional: true}}
	id := os.Getenv(sdk.EnvPluginID)
	if parts := strings.Split(id, "-"); len(parts) == 3 && parts[0] == "cyc" {
		provides = []sdk.Provide{{Key: parts[1]}}
		inject = []sdk.Inject{{Key: parts[2]}}
	}
	// "policy-x" provides x and injects ctx.sandboxPolicy; "policy-owner"
	// tries to provide ctx.sandboxPolicy itself.
	if key, ok := strings.CutPrefix(id, "policy-"); ok {
		provides, inject = []sdk.Provide{{Key: key}}, []sdk.Inject{{Key: "sandboxPolicy"}}
		if key == "owner" {
			provides, inject = []sdk.Provide{{Key: "sandboxPolicy"}}, nil
		}
	}
	return sdk.Description{
		Name:         "probe",
		Version:      "0.0.1",
		Summary:      "test consumer of ctx.shellEnv",
		Provides:     provides,
		Inject:       inject,
		ConfigSchema: sdk.SchemaOf[config](),
	}
}

func (p *probe) Register(s *grpc.Server) { probev1.RegisterProbeServer(s, p) }

func (p *probe) Apply(ctx context.Context, host *sdk.Host, raw json.RawMessage) error {
	cfg, err := sdk.DecodeConfig[config](raw)
	if err != nil {
		return err
	}
	if cfg.SlowApplyIf != "" {
		if _, err := os.Stat(cfg.SlowApplyIf); err == nil {
			select {
			case <-time.After(time.Duration(cfg.SlowApplyMs) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if cfg.FailApply {
		return errors.New("probe refuses to apply (failApply is set)")
	}
	p.env = shellenv.NewClient(host.Conn(shellenv.Key))
	if cfg.Fact != "" {
		if err := p.env.Register(ctx, "DSH_PROBE", cfg.Fact); err != nil {
			return err
		}
	}
	return nil
}

func (p *probe) Collect(ctx context.Context, _ *probev1.CollectRequest) (*probev1.CollectResponse, error) {
	snap, err := p.env.Collect(ctx)
	if err != nil {
		return nil, err
	}
	return &probev1.CollectResponse{Env: snap.Env}, nil
}

func (p *probe) Bench(ctx context.Context, req *probev1.BenchRequest) (*probev1.BenchResponse, error) {
	resp := &probev1.BenchResponse{}
	for i := int32(0); i < req.N; i++ {
		t := time.Now()
		if _, err := p.env.Collect(ctx); err != nil {
			return nil, err
		}
		resp.Nanos = append(resp.Nanos, time.Since(t).Nanoseconds())
	}
	return resp, nil
}

func (p *probe) Echo(_ context.Context, req *probev1.EchoRequest) (*probev1.EchoResponse, error) {
	return &probev1.EchoResponse{Data: req.Data}, nil
}

func main() { sdk.Serve(&probe{}) }
