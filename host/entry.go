package host

import (
	"context"
	"fmt"
	"sync"

	"github.com/dshrun/dsh/core/lifecycle"
	"github.com/dshrun/dsh/host/composition"
	"github.com/dshrun/dsh/host/pluginproc"
	"github.com/dshrun/dsh/registry"
	"github.com/dshrun/dsh/sdk"
)

// entry is one plugin of the composition and what the host knows of it.
type entry struct {
	h      *Host
	id     string // e.ID, which never changes: readable without mu
	e      composition.Entry
	binary string
	desc   *lifecycle.Description
	config []byte // effective config JSON, validated
	// tools are the tools it may register, resolved by the plan from desc
	// and config.
	tools []string
	scope *registry.Scope

	mu   sync.Mutex
	load *load // the current process, while loaded
	sup  supervision
	gen  int // reloads so far: names the registry scope of each
}

func (en *entry) label() string {
	if bin := en.bin(); bin != "" {
		return fmt.Sprintf("%q (%s)", en.id, bin)
	}
	return fmt.Sprintf("%q", en.id)
}

// bin is the entry's binary; reloads onto another binary change it.
func (en *entry) bin() string {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.binary
}

// view is the entry's composition entry, binary and description at one
// moment, for readers that run alongside reloads.
func (en *entry) view() (composition.Entry, string, *lifecycle.Description) {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.e, en.binary, en.desc
}

// procTarget is what a scope's processes start from: a binary, its pin and
// the config to apply, with the tools that config lets them register.
type procTarget struct {
	binary, sha256 string
	config         []byte
	tools          []string
}

func (en *entry) errorf(format string, args ...any) error {
	e, _, _ := en.view()
	return &EntryError{Pos: e.Pos, ID: en.id, Err: fmt.Errorf(format, args...)}
}

func (en *entry) current() *load {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.load
}

// moveCurrent makes ld current in place of old, unless another load (a
// reload's new scope) became current meanwhile.
func (en *entry) moveCurrent(old, ld *load) {
	defer en.h.changed()
	defer en.h.boundCalls() // once en.mu is released
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.load == old || en.load == nil {
		en.load = ld
	}
}

func (en *entry) setCurrent(ld *load) {
	defer en.h.changed()
	defer en.h.boundCalls() // once en.mu is released
	en.mu.Lock()
	defer en.mu.Unlock()
	en.load = ld
}

func (en *entry) getScope() *registry.Scope {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.scope
}

func (en *entry) configJSON() []byte {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.config
}

func (en *entry) toolNames() []string {
	en.mu.Lock()
	defer en.mu.Unlock()
	return en.tools
}

// clearCurrent forgets ld unless a newer load already replaced it.
func (en *entry) clearCurrent(ld *load) {
	defer en.h.changed()
	defer en.h.boundCalls() // once en.mu is released
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.load == ld {
		en.load = nil
	}
}

// startProcess starts a process of entry id from bin (checked against
// sha256 when set).
func (h *Host) startProcess(ctx context.Context, id, bin, sha256 string) (*pluginproc.Process, error) {
	return pluginproc.Start(ctx, pluginproc.Config{
		ID:           id,
		Binary:       bin,
		SHA256:       sha256,
		StartTimeout: h.startTimeout(),
		Env:          append(PluginEnv(h.opts.LookupEnv, id), sdk.EnvLogLevel+"="+h.opts.PluginLogger.GetLevel().String()),
		SocketDir:    h.rt.sockets(),
		Logger:       h.opts.PluginLogger.Named(id),
	})
}
