package nettest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// GitServer serves one bare repository over HTTPS with git's dumb HTTP
// protocol, under a certificate of its own certificate authority.
type GitServer struct {
	server
	CAFile  string // the authority's certificate, PEM: give it to git as http.sslCAInfo
	Repo    string // the repository's path on the server: /repo.git
	File    string // the one file of its one commit
	Content string // and what it holds
}

// URL is the repository's address under host, as a client clones it.
func (g *GitServer) URL(host string) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(g.Port)) + g.Repo
}

// GitHTTPS starts a GitServer whose certificate names names (and
// 127.0.0.1). The repository is made with git init --bare and a commit
// pushed from a clone, then git update-server-info, so a plain file server
// serves it; git fetches over dumb HTTP through an HTTPS proxy (CONNECT)
// as over smart HTTP. Fails the test when git is missing.
func GitHTTPS(t testing.TB, names ...string) *GitServer {
	t.Helper()
	g := &GitServer{Repo: "/repo.git", File: "README.md", Content: "served by nettest over HTTPS\n"}
	dir := t.TempDir()
	bare := filepath.Join(dir, "repo.git")
	work := filepath.Join(dir, "work")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=nettest", "-c", "user.email=nettest@example.invalid", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "--bare", bare)
	run("init", "-q", work)
	if err := os.WriteFile(filepath.Join(work, g.File), []byte(g.Content), 0o644); err != nil {
		t.Fatal(err)
	}
	run("-C", work, "add", g.File)
	run("-C", work, "commit", "-q", "-m", "the one commit")
	run("-C", work, "push", "-q", bare, "HEAD:refs/heads/main")
	run("-C", bare, "update-server-info")

	caCert, caKey := newCA(t)
	g.CAFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(g.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	leaf := newLeaf(t, caCert, caKey, names)
	g.start(t, http.StripPrefix(g.Repo, http.FileServer(http.Dir(bare))), func(ts *httptest.Server) {
		ts.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12}
	})
	return g
}

// newCA makes a self-signed ECDSA certificate authority.
func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nettest CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// newLeaf makes a server certificate for names and 127.0.0.1, signed by ca.
func newLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "nettest server"},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
