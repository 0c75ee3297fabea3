package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/job"
)

func withAccounts(o *APIOptions) { o.Tokens = []string{"alice:ta-secret", "bob:tb-secret"} }

func signInRequest(body, contentType string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/session", strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	r.RemoteAddr = "192.0.2.1:40000"
	return r
}

// signInAs signs in and returns the session cookie and its CSRF token.
func (h *harness) signInAs(t *testing.T, token string) (*http.Cookie, string) {
	t.Helper()
	w := h.do(t, signInRequest(`{"token":"`+token+`"}`, "application/json"))
	if w.Code != http.StatusOK {
		t.Fatalf("sign in = %d %s; want 200", w.Code, w.Body)
	}
	var c *http.Cookie
	for _, k := range w.Result().Cookies() {
		if k.Name == SessionCookie {
			c = k
		}
	}
	if c == nil {
		t.Fatalf("sign in set no %s cookie", SessionCookie)
	}
	return c, decode[sessionBody](t, w).CSRFToken
}

func withCookie(r *http.Request, c *http.Cookie) *http.Request {
	r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	return r
}

// Scenario: Signing in with an account's token sets an HttpOnly, SameSite=Strict session cookie
func TestSignIn(t *testing.T) {
	h := newHarness(t, withAccounts, func(o *APIOptions) { o.WebUIJobURL = "http://ui/namespaces/default/workflows/" })
	w := h.do(t, signInRequest(`{"token":"ta-secret"}`, "application/json"))
	if w.Code != http.StatusOK {
		t.Fatalf("sign in = %d %s; want 200", w.Code, w.Body)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies = %v; want one", cookies)
	}
	c := cookies[0]
	if c.Name != SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || c.MaxAge <= 0 {
		t.Errorf("cookie = %+v; want %s, HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP, with a Max-Age", c, SessionCookie)
	}
	if strings.Contains(c.Value, "ta-secret") {
		t.Errorf("cookie %q holds the token", c.Value)
	}
	body := decode[sessionBody](t, w)
	if !body.SignedIn || body.Account != "alice" || body.CSRFToken == "" || len(body.Engines) != 2 || body.WebUI == "" {
		t.Errorf("answer = %+v; want alice signed in with a CSRF token, the engines and the Web UI", body)
	}

	// The cookie now stands for alice where a bearer token would.
	w = h.do(t, withCookie(newRequest(http.MethodGet, "/v1/jobs"), c))
	if w.Code != http.StatusOK {
		t.Errorf("GET /v1/jobs with the cookie = %d %s; want 200", w.Code, w.Body)
	}
	got := decode[sessionBody](t, h.do(t, withCookie(newRequest(http.MethodGet, "/session"), c)))
	if !got.SignedIn || got.Account != "alice" || got.CSRFToken != body.CSRFToken {
		t.Errorf("GET /session = %+v; want alice with the same CSRF token", got)
	}

	// Over TLS the cookie is Secure.
	r := signInRequest("token=tb-secret", "application/x-www-form-urlencoded")
	r.TLS = &tls.ConnectionState{}
	w = h.do(t, r)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Errorf("form sign-in = %d to %q; want 303 to /", w.Code, w.Header().Get("Location"))
	}
	if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("cookies over TLS = %+v; want one Secure cookie", cs)
	}

	// A wrong token sets nothing.
	w = h.do(t, signInRequest(`{"token":"nope"}`, "application/json"))
	wantError(t, w, http.StatusUnauthorized, "unauthorized")
	if cs := w.Result().Cookies(); len(cs) != 0 {
		t.Errorf("cookies after a wrong token = %v; want none", cs)
	}
	for _, secret := range []string{"ta-secret", "tb-secret", c.Value} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, h.logs)
		}
	}
}

// Scenario: A session ends on sign-out, on expiry and when its account's token changes
func TestSessionEnds(t *testing.T) {
	h := newHarness(t, withAccounts)
	c, _ := h.signInAs(t, "ta-secret")

	w := h.do(t, withCookie(newRequest(http.MethodPost, "/session/end"), c))
	cs := w.Result().Cookies()
	if w.Code != http.StatusOK || len(cs) != 1 || cs[0].Name != SessionCookie || cs[0].Value != "" || cs[0].MaxAge >= 0 {
		t.Errorf("sign out = %d, cookies %+v; want 200 and the cookie cleared", w.Code, cs)
	}

	e, _ := h.api.accounts.byName("alice")
	expired := newSession(e, time.Now().Add(-sessionTTL-time.Minute))
	rotated := newHarness(t, func(o *APIOptions) { o.Tokens = []string{"alice:new-secret"} })
	name, rest, _ := strings.Cut(c.Value, "~")
	tests := []struct {
		name  string
		h     *harness
		value string
	}{
		{"expired", h, expired},
		{"the token changed", rotated, c.Value},
		{"another account's name", h, "bob~" + rest},
		{"a later expiry", h, name + "~" + strconv.FormatInt(time.Now().Add(48*time.Hour).Unix(), 10) + rest[strings.Index(rest, "~"):]},
		{"garbage", h, "alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.h.do(t, withCookie(newRequest(http.MethodGet, "/v1/jobs"), &http.Cookie{Name: SessionCookie, Value: tc.value}))
			wantError(t, w, http.StatusUnauthorized, "unauthorized")
			if got := decode[sessionBody](t, tc.h.do(t, withCookie(newRequest(http.MethodGet, "/session"), &http.Cookie{Name: SessionCookie, Value: tc.value}))); got.SignedIn {
				t.Errorf("GET /session = %+v; want signed out", got)
			}
		})
	}
}

// Scenario: A change from the page needs the session's CSRF token
func TestSessionCSRF(t *testing.T) {
	h := newHarness(t, withAccounts)
	c, csrf := h.signInAs(t, "ta-secret")
	_, bobCSRF := h.signInAs(t, "tb-secret")
	upload := func(header string) *httptest.ResponseRecorder {
		r := form(t, "/v1/jobs", &formFile{name: "voice.ogg", body: ogg}, nil)
		r.Header.Del("Authorization")
		withCookie(r, c)
		if header != "" {
			r.Header.Set(CSRFHeader, header)
		}
		return h.do(t, r)
	}
	wantError(t, upload(""), http.StatusForbidden, "csrf")
	wantError(t, upload("forged"), http.StatusForbidden, "csrf")
	wantError(t, upload(bobCSRF), http.StatusForbidden, "csrf")
	if len(h.jobs.jobs) != 0 {
		t.Errorf("jobs = %d; want none started without the CSRF token", len(h.jobs.jobs))
	}
	w := upload(csrf)
	if w.Code != http.StatusAccepted {
		t.Fatalf("upload with the CSRF token = %d %s; want 202", w.Code, w.Body)
	}
	id := decode[acceptedBody](t, w).ID
	r := withCookie(newRequest(http.MethodDelete, "/v1/jobs/"+id), c)
	wantError(t, h.do(t, r), http.StatusForbidden, "csrf")
	r.Header.Set(CSRFHeader, csrf)
	if w := h.do(t, r); w.Code != http.StatusAccepted {
		t.Errorf("cancel with the CSRF token = %d %s; want 202", w.Code, w.Body)
	}
	// A program with a bearer token needs none.
	r = form(t, "/v1/jobs", &formFile{name: "other.ogg", body: append(ogg, 1)}, nil)
	r.Header.Set("Authorization", "Bearer ta-secret")
	if w := h.do(t, r); w.Code != http.StatusAccepted {
		t.Errorf("bearer upload = %d %s; want 202", w.Code, w.Body)
	}
	// A wrong bearer token is not rescued by a valid cookie.
	r = withCookie(newRequest(http.MethodGet, "/v1/jobs"), c)
	r.Header.Set("Authorization", "Bearer wrong")
	wantError(t, h.do(t, r), http.StatusUnauthorized, "unauthorized")
}

// Scenario: Sign-in attempts are limited per client address
func TestSignInRateLimit(t *testing.T) {
	h := newHarness(t, withAccounts)
	for i := range signInBurst {
		if w := h.do(t, signInRequest(`{"token":"guess`+strconv.Itoa(i)+`"}`, "application/json")); w.Code != http.StatusUnauthorized {
			t.Fatalf("attempt %d = %d; want 401", i+1, w.Code)
		}
	}
	w := h.do(t, signInRequest(`{"token":"ta-secret"}`, "application/json"))
	wantError(t, w, http.StatusTooManyRequests, "too_many_attempts")
	if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || s < 1 || s > int(signInEvery.Seconds()) {
		t.Errorf("Retry-After = %q; want 1 to %v seconds", w.Header().Get("Retry-After"), signInEvery.Seconds())
	}
	if len(w.Result().Cookies()) != 0 {
		t.Error("a refused attempt set a cookie")
	}
	other := signInRequest(`{"token":"ta-secret"}`, "application/json")
	other.RemoteAddr = "198.51.100.7:5000"
	if w := h.do(t, other); w.Code != http.StatusOK {
		t.Errorf("another address = %d; want 200", w.Code)
	}

	var l signInLimiter
	now := time.Now()
	for range signInBurst {
		if d := l.wait("a", now); d != 0 {
			t.Fatalf("wait within the burst = %v; want 0", d)
		}
	}
	if d := l.wait("a", now); d <= 0 || d > signInEvery {
		t.Errorf("wait after the burst = %v; want up to %v", d, signInEvery)
	}
	if d := l.wait("a", now.Add(signInEvery)); d != 0 {
		t.Errorf("wait one interval later = %v; want 0", d)
	}
}

// Scenario: A sign-in posted from another site is refused
func TestSignInCrossOrigin(t *testing.T) {
	h := newHarness(t, withAccounts)
	r := signInRequest("token=ta-secret", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "https://evil.example")
	w := h.do(t, r)
	wantError(t, w, http.StatusForbidden, "cross_origin")
	if len(w.Result().Cookies()) != 0 {
		t.Error("a cross-site sign-in set a cookie")
	}
	r = signInRequest("token=ta-secret", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://"+r.Host)
	if w := h.do(t, r); w.Code != http.StatusSeeOther {
		t.Errorf("same-origin sign-in = %d; want 303", w.Code)
	}
}

// unseekable is an object store, whose readers cannot seek.
type unseekable struct{ BlobStore }

func (u unseekable) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := u.BlobStore.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{rc, rc}, nil
}

// Scenario: A job's recording streams to the page's player with Range support
func TestJobAudio(t *testing.T) {
	for _, store := range []string{"files", "object store"} {
		t.Run(store, func(t *testing.T) {
			h := newHarness(t, withAccounts, func(o *APIOptions) {
				if store == "object store" {
					o.Blobs = unseekable{o.Blobs}
				}
			})
			c, _ := h.signInAs(t, "ta-secret")
			r := form(t, "/v1/jobs", &formFile{name: "voice.ogg", body: ogg}, nil)
			r.Header.Set("Authorization", "Bearer ta-secret")
			id := decode[acceptedBody](t, h.do(t, r)).ID
			audio := "/v1/jobs/" + url.PathEscape(id) + "/audio"

			r = withCookie(newRequest(http.MethodGet, audio), c)
			r.Header.Set("Range", "bytes=0-3")
			w := h.do(t, r)
			if w.Code != http.StatusPartialContent || w.Body.String() != "OggS" || w.Header().Get("Content-Type") != "audio/ogg" ||
				w.Header().Get("Content-Range") != "bytes 0-3/"+strconv.Itoa(len(ogg)) {
				t.Errorf("range = %d %q %q %q; want 206 OggS audio/ogg", w.Code, w.Body.String(), w.Header().Get("Content-Type"), w.Header().Get("Content-Range"))
			}
			w = h.do(t, withCookie(newRequest(http.MethodGet, audio), c))
			if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), ogg) || w.Header().Get("Accept-Ranges") != "bytes" {
				t.Errorf("whole = %d, %d bytes, Accept-Ranges %q; want 200 with the recording", w.Code, w.Body.Len(), w.Header().Get("Accept-Ranges"))
			}
			if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q; want no-store, so that a shared browser keeps no account's recording", cc)
			}

			wantError(t, h.do(t, withCookie(newRequest(http.MethodGet, "/v1/jobs/nope/audio"), c)), http.StatusNotFound, "not_found")
			wantError(t, h.do(t, newRequest(http.MethodGet, audio)), http.StatusUnauthorized, "unauthorized")
			h.jobs.set(id, func(j *fakeJob) { j.status.RemovedAt, j.status.State = time.Now(), job.Done })
			wantError(t, h.do(t, withCookie(newRequest(http.MethodGet, audio), c)), http.StatusGone, "removed")
		})
	}
}
