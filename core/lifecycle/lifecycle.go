// Package lifecycle is the contract every plugin serves and the host
// calls: dsh.plugin.v1 (the generated package pluginv1), its messages by
// their Go names, and [Client], the host's typed view of one plugin's
// Lifecycle service (Describe, Apply, Check, Dispose, Health, Release),
// whose errors are the sdk vocabulary. The plugin's side is served by
// sdk.Serve, on pluginv1 itself (this package builds on the sdk's
// errors); the contract's Host service, which a plugin calls back on, is
// served by the host and called through sdk.Host.
package lifecycle

import "github.com/dshrun/dsh/core/lifecycle/pluginv1"

// The messages of the contract: what a plugin says of itself, what Apply
// and Check send and answer, a health answer, and the lookup of the Host
// service.
type (
	Description    = pluginv1.Description
	Provide        = pluginv1.Provide
	Method         = pluginv1.Method
	Inject         = pluginv1.Inject
	ApplyRequest   = pluginv1.ApplyRequest
	ApplyResponse  = pluginv1.ApplyResponse
	Facts          = pluginv1.Facts
	CheckRequest   = pluginv1.CheckRequest
	HealthResponse = pluginv1.HealthResponse
	LookupRequest  = pluginv1.LookupRequest
	LookupResponse = pluginv1.LookupResponse
)

// Provides reports whether d describes a provider of key.
func Provides(d *Description, key string) bool {
	for _, p := range d.GetProvides() {
		if p.GetKey() == key {
			return true
		}
	}
	return false
}
