// Package webui is the page people use at /: a small app without a
// framework that signs in with an account's token and then speaks to the
// job API under /v1 like any other client, so the API's rules (whose jobs
// one sees, what may change) hold for the page too. Every asset is
// embedded, so the page works offline and needs no build step.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets index.html
var files embed.FS

// ContentSecurityPolicy lets the page run only its own script and style:
// no inline code, so an injected tag does nothing; media may be the
// server's or a blob the page made; no site may frame it.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"media-src 'self' blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// SecureHeaders sets the headers every answer of the page carries.
func SecureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}

// Handler serves the page at / and its assets under /assets/.
type Handler struct {
	index []byte
	// versions are the assets' content hashes: the page names each asset
	// with its hash, so a browser may keep it for good and still never
	// runs a stale one after an upgrade.
	versions map[string]string
	assets   fs.FS
}

// New renders the page once; it is the same for everyone until the
// script asks the server who is signed in.
func New() (*Handler, error) {
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	h := &Handler{versions: map[string]string{}, assets: assets}
	err = fs.WalkDir(assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.versions[p] = hex.EncodeToString(sum[:6])
		return nil
	})
	if err != nil {
		return nil, err
	}
	tpl, err := template.ParseFS(files, "index.html")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	asset := func(name string) string { return "/assets/" + name + "?v=" + h.versions[name] }
	if err := tpl.Execute(&buf, map[string]any{"CSS": asset("app.css"), "JS": asset("app.js"), "Icon": asset("icon.svg")}); err != nil {
		return nil, err
	}
	h.index = buf.Bytes()
	return h, nil
}

// Mount adds the page's routes to mux.
func (h *Handler) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", h.serveIndex)
	mux.HandleFunc("GET /assets/", h.serveAsset)
}

func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	SecureHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(h.index)
}

func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request) {
	SecureHeaders(w.Header())
	name := strings.TrimPrefix(r.URL.Path, "/assets/")
	v, ok := h.versions[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.URL.Query().Get("v") == v {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+v+`"`)
	if t, ok := types[path.Ext(name)]; ok {
		w.Header().Set("Content-Type", t)
	}
	http.ServeFileFS(w, r, h.assets, name)
}

var types = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}
