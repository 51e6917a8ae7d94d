package sdk

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"

	"github.com/dshrun/dsh/core/lifecycle/pluginv1"
)

// Plugin is the one interface every dsh plugin implements.
type Plugin interface {
	// Describe returns what the plugin is, provides and needs. It must have
	// no side effects: the host calls it to validate compositions and may stop
	// the process right after.
	Describe() Description
	// Apply configures the plugin. config is the effective config object
	// (the settings namespace overlaid with the entry's config), already
	// validated against Description.ConfigSchema. host reaches the services
	// the plugin injects. Apply runs once per process.
	Apply(ctx context.Context, host *Host, config json.RawMessage) error
}

// Description is a plugin's answer to Describe.
type Description struct {
	Name    string // short name; the binary is dsh-<Name>
	Version string
	Summary string
	// Provides lists the keys this plugin provides; the plugin serves their
	// gRPC services through Registrar.
	Provides []Provide
	// Inject lists every key the plugin may call. The host refuses calls to
	// any other key.
	Inject []Inject
	// ConfigSchema is a JSON Schema document for the config object; empty
	// accepts anything. SchemaOf derives it from the config's Go type, which
	// DecodeConfig then decodes.
	ConfigSchema string
	// SettingsNamespace names a composition settings section merged under
	// the entry's config (for example "shell").
	SettingsNamespace string
	// Tools names the model-facing tools the plugin registers.
	Tools []string
	// ToolsFromConfig lists config keys whose string values name further
	// tools the plugin registers: the key's value in the resolved config,
	// or the config schema's default for it when the config does not set
	// it. A tool named by config can then sit beside another plugin's tool
	// of the usual name.
	ToolsFromConfig []string
}

// Provide declares one provided key.
type Provide struct {
	Key string
	// Services are the fully-qualified gRPC service names that implement
	// the key. Left empty, they are what Register registers (the SDK asks
	// the server); a plugin that provides several keys, or also serves a
	// service that is no key's (a tool handler), names them. Names given
	// must be registered: the plugin refuses to start otherwise.
	Services []string
	// CallerState says the provider keeps state per caller (registrations);
	// consumers are then reloaded when it is replaced, to register again.
	CallerState bool
}

// Inject declares one key the plugin uses.
type Inject struct {
	Key      string
	Optional bool
}

// Registrar is implemented by plugins that serve gRPC services (providers).
// Register is called once, before the handshake, on the plugin's server.
type Registrar interface {
	Register(s *grpc.Server)
}

// Checker is implemented by plugins whose Apply reads more than its config
// (files named by it, say): Check reads them as Apply would and returns
// the error Apply would, without acting on anything. The host calls it for
// dsh validate, on a process that is never applied, so a composition that
// would not start does not pass. config is as Apply's. It must have no
// side effects.
type Checker interface {
	Check(ctx context.Context, config json.RawMessage) error
}

// Disposer is implemented by plugins with something to release when they
// are unloaded. Dispose runs before the process is stopped, under a
// deadline, and also after an Apply that failed (so what a half-done Apply
// made is released) and after one the host gave up on; never while Apply
// runs (a Dispose that arrives then cancels Apply's context and waits for it).
type Disposer interface {
	Dispose(ctx context.Context) error
}

// Releaser is implemented by providers that keep state per caller. Release
// runs when the caller plugin goes away; the provider drops what it owns.
type Releaser interface {
	Release(ctx context.Context, caller string) error
}

// HealthChecker is implemented by plugins that can tell whether they work.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// FactsReporter is implemented by providers whose capability facts are
// only known after Apply (for example a sandboxing executor's mode).
type FactsReporter interface {
	Facts() map[string]map[string]string
}

// proto is the wire form of d, with each key's services and method kinds
// taken from what the plugin registered.
func (d Description) proto(reg registered) (*pluginv1.Description, error) {
	provides, err := d.provides(reg)
	if err != nil {
		return nil, err
	}
	out := &pluginv1.Description{
		Provides:          provides,
		Name:              d.Name,
		Version:           d.Version,
		Summary:           d.Summary,
		ConfigSchema:      d.ConfigSchema,
		SettingsNamespace: d.SettingsNamespace,
		Tools:             d.Tools,
		ToolsFromConfig:   d.ToolsFromConfig,
	}
	for _, i := range d.Inject {
		out.Inject = append(out.Inject, &pluginv1.Inject{Key: i.Key, Optional: i.Optional})
	}
	return out, nil
}
