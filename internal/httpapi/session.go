package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/transcriber/transcriber/internal/webui"
)

// SessionCookie names the cookie that signs the page in.
const SessionCookie = "transcriber_session"

// CSRFHeader carries the page's CSRF token on every change it asks for.
const CSRFHeader = "X-CSRF-Token"

// sessionTTL is how long a sign-in lasts: a working day, so that a page
// left open overnight asks for the token again.
const sessionTTL = 12 * time.Hour

// Sign-in attempts per client address: a burst for typos, then one every
// few seconds, which makes guessing a token hopeless.
const (
	signInBurst = 5
	signInEvery = 6 * time.Second
)

// A session is stateless: the account's name, an expiry and an HMAC of
// both keyed by the digest of the account's token. Every replica of the
// API verifies it without shared state, and a new token for the account
// ends its sessions, since the key changes with it.
func (as accounts) byName(name string) (accountEntry, bool) {
	for _, e := range as {
		if e.account.Name == name {
			return e, true
		}
	}
	return accountEntry{}, false
}

func sessionMAC(e accountEntry, purpose, value string) []byte {
	m := hmac.New(sha256.New, e.digest[:])
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(value))
	return m.Sum(nil)
}

// newSession is the cookie value of a sign-in: name~expiry~mac. Account
// names hold no "~".
func newSession(e accountEntry, now time.Time) string {
	payload := e.account.Name + "~" + strconv.FormatInt(now.Add(sessionTTL).Unix(), 10)
	return payload + "~" + base64.RawURLEncoding.EncodeToString(sessionMAC(e, "session", payload))
}

// checkSession returns the account of a cookie value that this server
// signed, for the account's current token, and that has not expired.
func (as accounts) checkSession(value string, now time.Time) (accountEntry, bool) {
	name, rest, ok := strings.Cut(value, "~")
	if !ok {
		return accountEntry{}, false
	}
	exp, mac, ok := strings.Cut(rest, "~")
	if !ok {
		return accountEntry{}, false
	}
	until, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= until {
		return accountEntry{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil {
		return accountEntry{}, false
	}
	e, ok := as.byName(name)
	if !ok || !hmac.Equal(got, sessionMAC(e, "session", name+"~"+exp)) {
		return accountEntry{}, false
	}
	return e, true
}

// csrfToken binds the CSRF token to one session: a page on another site
// can make the browser send the cookie, but cannot read this token.
func csrfToken(e accountEntry, session string) string {
	return base64.RawURLEncoding.EncodeToString(sessionMAC(e, "csrf", session))
}

// sessionAccount is the account of a request signed in by its cookie; a
// change also needs the session's CSRF token. ok is false without a valid
// cookie; a valid cookie without the CSRF token a change needs is an
// error.
func (a *API) sessionAccount(r *http.Request) (acc Account, ok bool, apiErr *apiError) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return Account{}, false, nil
	}
	e, ok := a.accounts.checkSession(c.Value, time.Now())
	if !ok {
		return Account{}, false, nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		got := r.Header.Get(CSRFHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(e, c.Value))) != 1 {
			return Account{}, false, &apiError{status: http.StatusForbidden, code: "csrf",
				message: "a change from the page needs its " + CSRFHeader + " header; reload the page"}
		}
	}
	return e.account, true, nil
}

// signInLimiter allows each client address a few sign-in attempts and
// then one every signInEvery.
type signInLimiter struct {
	mu      sync.Mutex
	clients map[string]*rate.Limiter
}

// maxTrackedClients bounds the limiter's memory; beyond it the clients
// whose allowance is full again are forgotten.
const maxTrackedClients = 4096

// wait is zero when the client may try now, else how long until it may.
func (l *signInLimiter) wait(client string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients == nil {
		l.clients = map[string]*rate.Limiter{}
	}
	lim, ok := l.clients[client]
	if !ok {
		if len(l.clients) >= maxTrackedClients {
			for c, cl := range l.clients {
				if cl.TokensAt(now) >= signInBurst {
					delete(l.clients, c)
				}
			}
		}
		lim = rate.NewLimiter(rate.Every(signInEvery), signInBurst)
		l.clients[client] = lim
	}
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// clientAddress is the peer's IP. Forwarding headers are not trusted: any
// client can write them, and one that could would sidestep the limit.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// sameOrigin reports whether a request that a browser sent came from a
// page of this server. Browsers send Origin with every POST; programs that
// send none are no browser that another site could drive.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// sessionBody is what the page learns about its sign-in and the server.
type sessionBody struct {
	SignedIn  bool   `json:"signed_in"`
	Account   string `json:"account,omitempty"`
	Admin     bool   `json:"admin,omitempty"`
	CSRFToken string `json:"csrf_token,omitempty"`
	// Engines are the engine names a job may ask for.
	Engines        []string `json:"engines"`
	MaxUploadBytes int64    `json:"max_upload_bytes"`
	// WebUI is the address of a job in the Temporal Web UI, without the
	// job's id at its end; empty when no Web UI is known.
	WebUI string `json:"web_ui,omitempty"`
}

func (a *API) sessionInfo(e accountEntry, session string) sessionBody {
	b := sessionBody{Engines: a.opts.Engines, MaxUploadBytes: a.opts.MaxUploadBytes, WebUI: a.opts.WebUIJobURL}
	if b.Engines == nil {
		b.Engines = []string{}
	}
	if session != "" {
		b.SignedIn, b.Account, b.Admin, b.CSRFToken = true, e.account.Name, e.account.Admin, csrfToken(e, session)
	}
	return b
}

// getSession tells the page whether its cookie signs it in, and gives it
// the CSRF token of that session.
func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c, err := r.Cookie(SessionCookie); err == nil {
		if e, ok := a.accounts.checkSession(c.Value, time.Now()); ok {
			writeJSON(w, http.StatusOK, a.sessionInfo(e, c.Value))
			return
		}
	}
	writeJSON(w, http.StatusOK, a.sessionInfo(accountEntry{}, ""))
}

// maxSignInBody bounds a sign-in request: a token and little else.
const maxSignInBody = 8 << 10

// signIn takes an account's token, as a form field or JSON, and sets the
// session cookie.
func (a *API) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !a.Enabled() {
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "api_disabled",
			message: "signing in is off: set TRANSCRIBER_API_TOKENS to one or more name:token accounts and restart"})
		return
	}
	if !sameOrigin(r) {
		// Another site could otherwise sign the browser into an account of
		// its choosing, and read what the person uploads there.
		writeError(w, &apiError{status: http.StatusForbidden, code: "cross_origin", message: "sign in from this server's own page"})
		return
	}
	if d := a.signIns.wait(clientAddress(r), time.Now()); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
		writeError(w, &apiError{status: http.StatusTooManyRequests, code: "too_many_attempts",
			message: "too many sign-in attempts from this address; wait a few seconds and try again"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	var token string
	form := true
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		form = false
		var body struct {
			Token string `json:"token"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeError(w, errBadRequest("invalid_request", `send {"token":"..."} as JSON, or the form field token`))
			return
		}
		token = body.Token
	} else {
		token = r.PostFormValue("token")
	}
	acc, ok := a.accounts.find(strings.TrimSpace(token))
	if !ok {
		writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized", message: "this token opens no account"})
		return
	}
	e, _ := a.accounts.byName(acc.Name)
	session := newSession(e, time.Now())
	http.SetCookie(w, a.sessionCookie(r, session, int(sessionTTL.Seconds())))
	a.log.Info("signed in", "account", acc.Name)
	if form {
		// A page without JavaScript posts the form and lands on the page.
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	writeJSON(w, http.StatusOK, a.sessionInfo(e, session))
}

// signOut clears the cookie. It needs no CSRF token: the worst another
// site can do with it is sign the page out.
func (a *API) signOut(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, a.sessionCookie(r, "", -1))
	writeJSON(w, http.StatusOK, sessionBody{Engines: []string{}})
}

func (a *API) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		// Behind a proxy that ends TLS the request arrives in plain HTTP;
		// only the proxy could say, and its headers can be forged.
		Secure: r.TLS != nil,
	}
}

// mountSession adds the sign-in endpoints; the page calls them.
func (a *API) mountSession(mux *http.ServeMux) {
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /session": a.getSession, "POST /session": a.signIn, "POST /session/end": a.signOut,
	} {
		mux.Handle(pattern, a.logged(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			webui.SecureHeaders(w.Header())
			h(w, r)
		})))
	}
}
