package pluginproc

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/dshrun/dsh/sdk"
)

// Mutual TLS without go-plugin's AutoMTLS key generation: AutoMTLS makes a
// P-521 key on each side of every plugin, which cost ~10 ms of CPU per side
// and dominated a composition's start. Instead the host makes one P-256 CA
// per process, whose key never leaves its memory, and one certificate of its
// own, and for each plugin issues a certificate and key for the plugin,
// which it hands over on an inherited descriptor (sdk.EnvTLSFD).
//
// A plugin that does not read the hand-over (not built on this SDK, or on
// Windows where there is none) does go-plugin's AutoMTLS as it always did:
// it trusts the host certificate it finds in PLUGIN_CLIENT_CERT and prints
// its own in the handshake line, which go-plugin then puts in place of the
// CA in the host's config. The plugin chooses by what it prints; the host
// needs no setting per entry.

// caValidity bounds the CA and all it issues. The CA lives only as long as
// the host process; the bound is long so that a host running for months
// can still start plugins, and it is renewed before half of it is used.
const caValidity = 365 * 24 * time.Hour

type hostCA struct {
	key      *ecdsa.PrivateKey
	cert     *x509.Certificate
	pool     *x509.CertPool
	notAfter time.Time

	// The host's own certificate, the same for every plugin: a plugin
	// pins it (sdk.PluginTLSConfig) and no plugin holds its key, so one
	// per plugin bought nothing and cost a key, a signature and its check
	// at every start.
	hostCert *tls.Certificate
	hostPEM  []byte
}

var (
	caMu      sync.Mutex
	currentCA *hostCA
)

// theCA returns the host's CA, making it on first use (and again once half
// its validity is gone).
func theCA() (*hostCA, error) {
	caMu.Lock()
	defer caMu.Unlock()
	if ca := currentCA; ca != nil && time.Until(ca.notAfter) > caValidity/2 {
		return ca, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "dsh host CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ca := &hostCA{key: key, cert: cert, pool: pool, notAfter: tmpl.NotAfter}
	hostKey, hostDER, err := ca.issue("dsh host")
	if err != nil {
		return nil, fmt.Errorf("host certificate: %w", err)
	}
	ca.hostCert = &tls.Certificate{Certificate: [][]byte{hostDER}, PrivateKey: hostKey}
	ca.hostPEM = pem.EncodeToMemory(&pem.Block{Type: sdk.PEMCertificate, Bytes: hostDER})
	currentCA = ca
	return currentCA, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// issue makes a P-256 key and a certificate for it signed by the CA. Both
// ends use their certificate as server and as client (the broker serves on
// either side), hence both usages.
func (ca *hostCA) issue(cn string) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{sdk.TLSServerName},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     ca.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, err
	}
	return key, der, nil
}

// pluginTLS is what one plugin's start needs: the host's config, the host
// certificate for PLUGIN_CLIENT_CERT and the plugin's hand-over.
type pluginTLS struct {
	config   *tls.Config
	hostPEM  []byte
	handover []byte
}

func newPluginTLS(id string) (*pluginTLS, error) {
	ca, err := theCA()
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	hostCert, hostDER := ca.hostCert, ca.hostCert.Certificate[0]
	plugKey, plugDER, err := ca.issue("dsh plugin " + id)
	if err != nil {
		return nil, fmt.Errorf("TLS plugin certificate: %w", err)
	}
	plugPKCS8, err := x509.MarshalPKCS8PrivateKey(plugKey)
	if err != nil {
		return nil, err
	}
	var handover bytes.Buffer
	for _, b := range []*pem.Block{
		{Type: sdk.PEMPrivateKey, Bytes: plugPKCS8},
		{Type: sdk.PEMCertificate, Bytes: plugDER},
		{Type: sdk.PEMCertificate, Bytes: hostDER},
		{Type: sdk.PEMCertificate, Bytes: ca.cert.Raw},
	} {
		_ = pem.Encode(&handover, b) // a bytes.Buffer does not fail
	}
	caRaw := ca.cert.Raw
	cfg := &tls.Config{
		Certificates: []tls.Certificate{*hostCert},
		// Always this certificate: an AutoMTLS plugin asks for one issued
		// by the host certificate itself (its only trusted one), which
		// Certificates alone would answer with none.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return hostCert, nil },
		// go-plugin replaces both pools with the plugin's own certificate
		// when the plugin prints one (AutoMTLS).
		RootCAs:    ca.pool,
		ClientCAs:  ca.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, // the broker's server side
		ServerName: sdk.TLSServerName,
		MinVersion: tls.VersionTLS12, // what go-plugin's AutoMTLS asks of its side
		// As the SDK's side (sdk.PluginTLSConfig): no post-quantum hybrid.
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
		// Runs after the chain is verified. A chain to the CA must end in
		// this plugin's certificate, not another plugin's; a chain to the
		// certificate an AutoMTLS plugin printed is that plugin's.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || len(cs.VerifiedChains) == 0 {
				return errors.New("no verified peer certificate")
			}
			for _, chain := range cs.VerifiedChains {
				if !bytes.Equal(chain[len(chain)-1].Raw, caRaw) {
					return nil // AutoMTLS: pinned to what the plugin printed
				}
			}
			if !bytes.Equal(cs.PeerCertificates[0].Raw, plugDER) {
				return errors.New("the peer's certificate was issued to another plugin")
			}
			return nil
		},
	}
	return &pluginTLS{
		config:   cfg,
		hostPEM:  ca.hostPEM,
		handover: handover.Bytes(),
	}, nil
}
