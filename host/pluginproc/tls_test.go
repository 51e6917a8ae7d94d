//go:build unix

package pluginproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshrun/dsh/sdk"
)

func healthy(t *testing.T, p *Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if h, err := p.Lifecycle().Health(ctx); err != nil || !h.Ok {
		t.Fatalf("health: %v %v", h, err)
	}
}

// dialPlugin opens a TLS connection of its own to p's socket with cfg and
// reports whether the plugin accepted it: in TLS 1.3 a server's refusal of
// the client's certificate arrives on the first read, after the client's
// handshake; an accepted connection reads the gRPC server's settings.
func dialPlugin(t *testing.T, p *Process, cfg *tls.Config) error {
	t.Helper()
	rc := p.client.ReattachConfig()
	if rc == nil || rc.Addr == nil {
		t.Fatal("no plugin address")
	}
	raw, err := net.DialTimeout(rc.Addr.Network(), rc.Addr.String(), wait)
	if err != nil {
		t.Fatalf("dial %s: %v", rc.Addr, err)
	}
	defer raw.Close()
	cfg.NextProtos = []string{"h2"} // gRPC refuses connections without it
	conn := tls.Client(raw, cfg)
	_ = conn.SetDeadline(time.Now().Add(wait))
	if err := conn.Handshake(); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 64))
	return err
}

func TestHandedOverMutualTLS(t *testing.T) {
	p := start(t, Config{ID: "n", Binary: bin("noop")})
	ca, err := theCA()
	if err != nil {
		t.Fatal(err)
	}
	if p.tlsConfig.RootCAs != ca.pool {
		t.Fatal("the plugin printed a certificate of its own: it did AutoMTLS, not the hand-over")
	}
	healthy(t, p)
	apply(t, p) // the plugin dials the host's broker: the other direction

	// The host's own config is accepted (the check of the check).
	if err := dialPlugin(t, p, p.tlsConfig.Clone()); err != nil {
		t.Fatalf("the host's certificate was refused: %v", err)
	}
	// No client certificate.
	noCert := &tls.Config{RootCAs: ca.pool, ServerName: sdk.TLSServerName}
	if err := dialPlugin(t, p, noCert); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a connection without a client certificate: %v", err)
	}
	// A certificate and key from the same CA, handed to another plugin
	// (the host's own certificate is one for all plugins; no plugin has
	// its key).
	other, err := newPluginTLS("other")
	if err != nil {
		t.Fatal(err)
	}
	otherPlugin, err := sdk.PluginTLSConfig(other.handover)
	if err != nil {
		t.Fatal(err)
	}
	otherCert := &tls.Config{RootCAs: ca.pool, ServerName: sdk.TLSServerName, Certificates: otherPlugin.Certificates}
	if err := dialPlugin(t, p, otherCert); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client certificate issued for another plugin: %v", err)
	}
	healthy(t, p) // refusals leave the plugin serving
}

// The host refuses a plugin that presents another plugin's certificate,
// though the same CA signed it.
func TestHostRefusesAnotherPluginsCertificate(t *testing.T) {
	a, err := newPluginTLS("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := newPluginTLS("b")
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(host *pluginTLS, plugin *pluginTLS) error {
		pcfg, err := sdk.PluginTLSConfig(plugin.handover)
		if err != nil {
			t.Fatal(err)
		}
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		srv := make(chan error, 1)
		go func() { srv <- tls.Server(c1, pcfg).Handshake() }()
		cerr := tls.Client(c2, host.config.Clone()).Handshake()
		c2.Close()
		return errors.Join(cerr, <-srv)
	}
	if err := handshake(a, a); err != nil {
		t.Fatalf("a with its own plugin: %v", err)
	}
	err = handshake(a, b)
	if err == nil || !strings.Contains(err.Error(), "issued to another plugin") {
		t.Fatalf("a with b's plugin: %v", err)
	}
}

func TestAutoMTLSFallback(t *testing.T) {
	cfg, _ := roleConfig(t, "automtls")
	p := start(t, cfg)
	ca, err := theCA()
	if err != nil {
		t.Fatal(err)
	}
	if p.tlsConfig.RootCAs == ca.pool {
		t.Fatal("the host still trusts its CA: the plugin's AutoMTLS certificate was not taken")
	}
	healthy(t, p)
	apply(t, p)
	noCert := &tls.Config{RootCAs: p.tlsConfig.RootCAs, ServerName: sdk.TLSServerName}
	if err := dialPlugin(t, p, noCert); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an AutoMTLS plugin, a connection without a client certificate: %v", err)
	}
}

func TestKeyNotInTheEnvironment(t *testing.T) {
	p := start(t, Config{ID: "n", Binary: bin("noop")})
	env, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/environ")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no /proc")
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(env, []byte(sdk.EnvTLSFD+"=")) {
		t.Fatalf("no %s in the plugin's environment", sdk.EnvTLSFD)
	}
	if bytes.Contains(env, []byte("PRIVATE KEY")) {
		t.Fatal("a private key is in the plugin's environment")
	}
	healthy(t, p)
}
