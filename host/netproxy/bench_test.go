package netproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// The overhead of the proxy on a keep-alive GET of a small body: compare
// BenchmarkProxiedGET with BenchmarkDirectGET.

var smallBody = []byte("hello, a small body of some fifty bytes or so.....\n")

func benchGET(b *testing.B, proxied bool) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(smallBody) }))
	defer s.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	u := s.URL + "/"
	if proxied {
		tp := startProxy(b, Config{Rules: Rules{
			Allow: []string{"bench.test"},
			Hosts: map[string]string{"bench.test": "127.0.0.1"},
		}})
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: tp.httpAddr})
		u = fmt.Sprintf("http://bench.test:%d/", portOf(b, s.Listener.Addr().String()))
	}
	c := &http.Client{Transport: tr}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != int64(len(smallBody)) {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
}

func BenchmarkDirectGET(b *testing.B)  { benchGET(b, false) }
func BenchmarkProxiedGET(b *testing.B) { benchGET(b, true) }
