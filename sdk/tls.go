package sdk

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// EnvTLSFD names the file descriptor on which a host hands its plugin the
// TLS material: PEM blocks, in order, the plugin's private key ("PRIVATE
// KEY", PKCS #8), the plugin's certificate, the host's certificate and the
// CA certificate that signed both. The number is not a secret; what it
// reads is never put in the environment, where other tools can read it.
//
// Without it (an older host, or one on Windows) the plugin does go-plugin's
// AutoMTLS: a fresh key of its own and the host's certificate from
// PLUGIN_CLIENT_CERT.
const EnvTLSFD = "DSH_PLUGIN_TLS_FD"

// PEM block types of the hand-over, in order.
const (
	PEMPrivateKey  = "PRIVATE KEY"
	PEMCertificate = "CERTIFICATE"
)

// handedTLS reads the TLS material the host handed over, if it did, and
// returns the plugin's server config; nil means none was handed over.
func handedTLS() (*tls.Config, error) {
	v := os.Getenv(EnvTLSFD)
	if v == "" {
		return nil, nil
	}
	// Nothing the plugin starts needs it (the descriptor is closed below).
	_ = os.Unsetenv(EnvTLSFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not a file descriptor", EnvTLSFD, v)
	}
	f := os.NewFile(uintptr(fd), "dsh-tls")
	// The descriptor was inherited without close-on-exec: close it so the
	// plugin's own children do not inherit it.
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("read the TLS hand-over: %w", err)
	}
	return PluginTLSConfig(data)
}

// PluginTLSConfig builds the plugin side of mutual TLS from the hand-over
// (see [EnvTLSFD]). The plugin serves with its certificate and, as a client
// of the host's broker, presents it; either way the peer must present
// exactly the host's certificate, signed by the CA: another plugin's
// certificate from the same CA is refused.
func PluginTLSConfig(handover []byte) (*tls.Config, error) {
	var blocks []*pem.Block
	for rest := handover; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != 4 || blocks[0].Type != PEMPrivateKey ||
		blocks[1].Type != PEMCertificate || blocks[2].Type != PEMCertificate || blocks[3].Type != PEMCertificate {
		return nil, errors.New("TLS hand-over: want a private key and three certificates")
	}
	key, err := x509.ParsePKCS8PrivateKey(blocks[0].Bytes)
	if err != nil {
		return nil, fmt.Errorf("TLS hand-over: key: %w", err)
	}
	own, hostDER := blocks[1].Bytes, blocks[2].Bytes
	ca, err := x509.ParseCertificate(blocks[3].Bytes)
	if err != nil {
		return nil, fmt.Errorf("TLS hand-over: CA: %w", err)
	}
	leaf, err := x509.ParseCertificate(own)
	if err != nil {
		return nil, fmt.Errorf("TLS hand-over: certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{own}, PrivateKey: key, Leaf: leaf}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		RootCAs:      pool,
		ServerName:   TLSServerName,
		MinVersion:   tls.VersionTLS13,
		// Without the default post-quantum hybrid: it costs a start more CPU
		// than the rest of the handshake, for keys that live no longer than
		// the plugin, on a socket only the user can reach.
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
		// Runs after the chain is verified against the CA, on both sides.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, hostDER) {
				return errors.New("the peer is not this plugin's host")
			}
			return nil
		},
	}, nil
}

// TLSServerName is the name in every certificate a host issues (the
// plugin's socket has no other name; go-plugin dials with it).
const TLSServerName = "localhost"
