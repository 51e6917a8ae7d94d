package nettest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// NPMRegistry serves one package the way registry.npmjs.org does: its
// packument at /NAME and its tarball at /NAME/-/NAME-VERSION.tgz.
type NPMRegistry struct {
	server
	Package string // dsh-left-pad
	Version string // 1.0.0
	// IndexJS is package/index.js in the tarball: what an install puts in
	// node_modules/Package/index.js.
	IndexJS string
}

// TarballPath is the path the tarball is served at.
func (r *NPMRegistry) TarballPath() string {
	return "/" + r.Package + "/-/" + r.Package + "-" + r.Version + ".tgz"
}

// Registry starts an npm registry serving dsh-left-pad 1.0.0. The
// packument's dist.tarball names the host the client asked for (its Host
// header), so a client that reaches it as registry.test:PORT fetches the
// tarball from there too; dist.shasum and dist.integrity are the tarball's.
func Registry(t testing.TB) *NPMRegistry {
	t.Helper()
	r := &NPMRegistry{Package: "dsh-left-pad", Version: "1.0.0",
		IndexJS: "module.exports = (s, n, c = ' ') => String(s).padStart(n, c);\n"}
	tgz := r.tarball(t)
	sha1sum := sha1.Sum(tgz)
	sha512sum := sha512.Sum512(tgz)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /"+r.Package, func(w http.ResponseWriter, req *http.Request) {
		doc := map[string]any{
			"name":      r.Package,
			"dist-tags": map[string]string{"latest": r.Version},
			"versions": map[string]any{r.Version: map[string]any{
				"name": r.Package, "version": r.Version, "main": "index.js",
				"dist": map[string]string{
					"tarball":   "http://" + req.Host + r.TarballPath(),
					"shasum":    hex.EncodeToString(sha1sum[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
				},
			}},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("GET "+r.TarballPath(), func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(tgz)
	})
	r.start(t, mux, nil)
	return r
}

// tarball is the package as npm packs it: everything under package/.
func (r *NPMRegistry) tarball(t testing.TB) []byte {
	t.Helper()
	manifest, err := json.Marshal(map[string]string{"name": r.Package, "version": r.Version, "main": "index.js", "license": "MIT"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{{"package/package.json", string(manifest)}, {"package/index.js", r.IndexJS}} {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(499162500, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
