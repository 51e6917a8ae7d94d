package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// dist is the built page (host/console/web builds it: make console).
//
//go:embed dist
var dist embed.FS

var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".map":   "application/json",
	".json":  "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
}

// page serves the console's page to a logged-in browser, and a page that
// says how to log in to any other.
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if _, ok := c.who(r, false); !ok {
		htmlPage(w, http.StatusUnauthorized, "login-required", "Log in to the dsh console",
			"This console needs a login. Open the login URL dsh serve printed, or run <code>dsh console</code> as the user who runs the host for a fresh one (each is good once, for 10 minutes).")
		return
	}
	b, err := dist.ReadFile("dist/index.html")
	if err != nil {
		http.Error(w, "dsh console: the page is missing from this build (make console)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentTypes[".html"])
	_, _ = w.Write(b)
}

// login trades a one-time code for a session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c.opts.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	id := c.auth.login(r.URL.Query().Get("code"))
	if id == "" {
		c.log.Warn("console login refused: the code is unknown, used or expired", "from", r.RemoteAddr)
		htmlPage(w, http.StatusUnauthorized, "login-refused", "Login refused",
			"This login code is unknown, used or expired: each code logs in once, within 10 minutes. Run <code>dsh console</code> as the user who runs the host for a fresh one.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(r.Host), Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	c.log.Info("console login", "from", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// asset serves the page's scripts, styles and images: the same for every
// visitor, so no login is needed; the ETag spares a refetch.
func (c *Console) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ct, known := contentTypes[path.Ext(name)]
	b, err := fs.ReadFile(dist, "dist/"+name)
	if !known || err != nil || name == "index.html" || strings.HasPrefix(name, ".") {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "dsh console: no such file", http.StatusNotFound)
		return
	}
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(b)
}

// favicon is the page's icon when the build has one, else nothing.
func (c *Console) favicon(w http.ResponseWriter, r *http.Request) {
	if _, err := fs.Stat(dist, "dist/favicon.ico"); err != nil {
		w.Header().Set("Cache-Control", "max-age=86400")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.SetPathValue("file", "favicon.ico")
	c.asset(w, r)
}

// htmlPage answers a short page; body is trusted HTML.
func htmlPage(w http.ResponseWriter, code int, testid, title, body string) {
	w.Header().Set("Content-Type", contentTypes[".html"])
	w.WriteHeader(code)
	_, _ = w.Write([]byte(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>` + html.EscapeString(title) + `</title><link rel="stylesheet" href="/console/app.css"></head>
<body><main class="notice" data-testid="` + testid + `"><h1>` + html.EscapeString(title) + `</h1><p>` + body + `</p></main></body></html>
`))
}
