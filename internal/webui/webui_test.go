package webui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/job"
)

func serve(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Mount(mux)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// Scenario: The page and its assets come from the binary with a Content-Security-Policy that allows no inline code
func TestPageHeaders(t *testing.T) {
	w := serve(t, "/")
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %q; want the page", w.Code, w.Header().Get("Content-Type"))
	}
	page := w.Body.String()
	assets := regexp.MustCompile(`(?:src|href)="(/assets/[^"?]+)\?v=([0-9a-f]+)"`).FindAllStringSubmatch(page, -1)
	if len(assets) != 3 {
		t.Fatalf("the page names %d assets; want its script, style and icon:\n%s", len(assets), page)
	}
	for _, path := range append([]string{"/"}, assets[0][1], assets[1][1], assets[2][1]) {
		w := serve(t, path)
		h := w.Header()
		csp := h.Get("Content-Security-Policy")
		if w.Code != http.StatusOK || csp == "" || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") ||
			!strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "style-src 'self'") ||
			!strings.Contains(csp, "media-src 'self' blob:") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s = %d, CSP %q; want 200 and a CSP of the page's own script and style", path, w.Code, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("GET %s: nosniff %q, Referrer-Policy %q", path, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
	// The CSP forbids inline code, so the page must have none.
	for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onload=", "javascript:"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q, which the CSP blocks", bad)
		}
	}
	for _, a := range assets {
		versioned := serve(t, a[1]+"?v="+a[2])
		if cc := versioned.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("GET %s?v=%s Cache-Control = %q; want immutable", a[1], a[2], cc)
		}
	}
	if w := serve(t, "/assets/app.js"); !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") || w.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("GET /assets/app.js = %q, %q; want JavaScript revalidated", w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"))
	}
	for _, path := range []string{"/assets/nope.js", "/assets/../index.html", "/elsewhere"} {
		if w := serve(t, path); w.Code == http.StatusOK {
			t.Errorf("GET %s = 200; want nothing there", path)
		}
	}
}

// Scenario: Every text of the page is there in English and in Russian
func TestStringsInBothLanguages(t *testing.T) {
	js, err := fs.ReadFile(files, "assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	html, err := fs.ReadFile(files, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	src := string(js)
	en, ru := dictionary(t, src, "en"), dictionary(t, src, "ru")
	if len(en) < 50 {
		t.Fatalf("English has %d strings; the dictionary was not read", len(en))
	}
	for _, k := range en {
		if !slices.Contains(ru, k) {
			t.Errorf("Russian lacks %q", k)
		}
	}
	for _, k := range ru {
		if !slices.Contains(en, k) {
			t.Errorf("English lacks %q", k)
		}
	}
	used := regexp.MustCompile(`data-i18n="([^"]+)"`).FindAllStringSubmatch(string(html), -1)
	used = append(used, regexp.MustCompile(`\bt\('([A-Za-z_]+)'[,)]`).FindAllStringSubmatch(src, -1)...)
	for _, s := range []job.State{job.Accepted, job.Fetching, job.Converting, job.Transcribing, job.Replying, job.Done, job.Failed, job.Dead, job.Cancelled} {
		used = append(used, []string{"", "state_" + string(s)})
	}
	// A failure is told in plain words, whatever its kind.
	for _, k := range job.Kinds() {
		used = append(used, []string{"", "kind_" + string(k)})
	}
	for _, m := range used {
		if !slices.Contains(en, m[1]) {
			t.Errorf("%q is used but has no text", m[1])
		}
	}
	// Text from the server and from files goes in as text, never as markup.
	if strings.Contains(src, "innerHTML") || strings.Contains(src, "insertAdjacentHTML") || strings.Contains(src, "document.write") {
		t.Error("app.js writes markup; build elements and set textContent instead")
	}
}

// dictionary returns the keys of one language's strings in app.js.
func dictionary(t *testing.T, src, lang string) []string {
	t.Helper()
	start := strings.Index(src, "\n  "+lang+": {")
	if start < 0 {
		t.Fatalf("no %s strings in app.js", lang)
	}
	end := strings.Index(src[start:], "\n  },")
	if end < 0 {
		t.Fatalf("the %s strings do not end", lang)
	}
	var keys []string
	for _, m := range regexp.MustCompile(`(?:^|[\s{,])([A-Za-z_]+): ['"]`).FindAllStringSubmatch(src[start:start+end], -1) {
		keys = append(keys, m[1])
	}
	return keys
}
