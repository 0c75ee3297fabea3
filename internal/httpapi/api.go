package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/workflows"
)

// Jobs is what the API asks of Temporal; *jobctl.Service implements it.
type Jobs interface {
	Lookup(ctx context.Context, id string) (jobctl.Existing, error)
	Start(ctx context.Context, req jobctl.StartRequest) (existing bool, err error)
	Get(ctx context.Context, id string) (workflows.Status, []jobctl.Pending, error)
	Await(ctx context.Context, id string, unanswered func(error)) (workflows.Status, error)
	List(ctx context.Context, f jobctl.Filter, pageSize int, token []byte) ([]jobctl.Summary, []byte, error)
	Revive(ctx context.Context, id string) (jobctl.Revival, error)
	Cancel(ctx context.Context, id string) error
	// RetryPending retries the pending jobs of owner, of everyone when
	// owner is empty.
	RetryPending(ctx context.Context, owner string) ([]jobctl.Revival, error)
}

// BlobStore keeps uploads and holds transcripts.
type BlobStore interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	Size(ctx context.Context, key string) (int64, error)
	Delete(ctx context.Context, key string) error
}

// APIOptions configure the job API.
type APIOptions struct {
	// Tokens are the bearer tokens accepted, each "name:token" or a bare
	// token; none turns the job endpoints off.
	Tokens []string
	// Admins names the accounts that see every job.
	Admins []string
	Jobs   Jobs
	Blobs  BlobStore
	// SpoolDir holds uploads while they arrive; empty is the system's
	// temporary directory.
	SpoolDir string
	// MaxUploadBytes is the largest recording accepted.
	MaxUploadBytes int64
	// Wait is how long the OpenAI-compatible endpoint waits for a
	// transcript before it answers with the job's id instead.
	Wait time.Duration
	// Engines are the engine names a request may ask for; Translators
	// those of them that translate speech into English.
	Engines     []string
	Translators []string
	// Engine picks a job's engine, and the one that takes over when it
	// gives up, from the engine asked for (empty when none was) and the
	// language.
	Engine func(requested, language string) (engine, fallback string)
	// Policy is the persistence given to every job.
	Policy workflows.Policy
	// Webhooks says whether webhooks can be signed, that is whether a job
	// may name a webhook URL.
	Webhooks bool
	// WebhookAllowLoopback accepts webhook URLs on this machine, for local
	// testing.
	WebhookAllowLoopback bool
	// WebUIJobURL is a job's address in the Temporal Web UI without the
	// job's id at its end, for the page to link to; empty when no Web UI
	// is known.
	WebUIJobURL string
	Logger      *slog.Logger
}

// API serves the job endpoints under /v1.
type API struct {
	opts     APIOptions
	accounts accounts
	log      *slog.Logger
	signIns  signInLimiter

	drainOnce sync.Once
	draining  chan struct{}
	// started dates the models /v1/models lists.
	started time.Time
}

// DefaultMaxUploadBytes is the default limit of one upload: 1 GiB.
const DefaultMaxUploadBytes = 1 << 30

// NewAPI checks the options and returns the API.
func NewAPI(opts APIOptions) (*API, error) {
	if opts.Jobs == nil || opts.Blobs == nil || opts.Engine == nil {
		return nil, errors.New("httpapi: Jobs, Blobs and Engine are required")
	}
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if opts.SpoolDir == "" {
		opts.SpoolDir = os.TempDir()
	}
	if err := os.MkdirAll(opts.SpoolDir, 0o750); err != nil {
		return nil, fmt.Errorf("httpapi: spool dir: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	accs, err := parseAccounts(opts.Tokens, opts.Admins)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	return &API{opts: opts, accounts: accs, log: opts.Logger, draining: make(chan struct{}), started: time.Now()}, nil
}

// Enabled reports whether any token is configured.
func (a *API) Enabled() bool { return len(a.accounts) > 0 }

// Drain makes requests that wait for a transcript answer at once with the
// job's id; the server calls it when it shuts down.
func (a *API) Drain() { a.drainOnce.Do(func() { close(a.draining) }) }

// route is one endpoint. The router and the OpenAPI document are both
// checked against this table.
type route struct {
	method, path string
	// open endpoints need no token.
	open    bool
	handler func(a *API, w http.ResponseWriter, r *http.Request)
}

var apiRoutes = []route{
	{method: http.MethodGet, path: "/v1/openapi.json", open: true, handler: (*API).openAPI},
	{method: http.MethodPost, path: "/v1/jobs", handler: (*API).createJob},
	{method: http.MethodGet, path: "/v1/jobs", handler: (*API).listJobs},
	{method: http.MethodGet, path: "/v1/jobs/{id}", handler: (*API).getJob},
	{method: http.MethodDelete, path: "/v1/jobs/{id}", handler: (*API).cancelJob},
	{method: http.MethodGet, path: "/v1/jobs/{id}/transcript", handler: (*API).getTranscript},
	{method: http.MethodGet, path: "/v1/jobs/{id}/audio", handler: (*API).getAudio},
	{method: http.MethodPost, path: "/v1/jobs/{id}/revive", handler: (*API).reviveJob},
	{method: http.MethodPost, path: "/v1/jobs/retry-pending", handler: (*API).retryPending},
	{method: http.MethodPost, path: "/v1/audio/transcriptions", handler: (*API).openAITranscription},
	{method: http.MethodPost, path: "/v1/audio/translations", handler: (*API).openAITranslation},
	{method: http.MethodGet, path: "/v1/models", handler: (*API).listModels},
	{method: http.MethodGet, path: "/v1/models/{id}", handler: (*API).getModel},
}

// mount adds the API's routes to mux.
func (a *API) mount(mux *http.ServeMux) {
	for _, rt := range apiRoutes {
		h := func(w http.ResponseWriter, r *http.Request) { rt.handler(a, w, r) }
		if !rt.open {
			h = a.guard(h)
		}
		mux.Handle(rt.method+" "+rt.path, a.logged(http.HandlerFunc(h)))
	}
}

// guard answers for the endpoints that need a token: off without tokens,
// 401 without a right one; it hands on the request with its account. A
// request without an Authorization header may be the page's, signed in by
// its session cookie.
func (a *API) guard(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.Enabled() {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "api_disabled",
				message: "the job API is off: set TRANSCRIBER_API_TOKENS to one or more comma-separated bearer tokens and restart"})
			return
		}
		token, given := bearer(r)
		acc, ok := a.accounts.find(token)
		if !given {
			var apiErr *apiError
			if acc, ok, apiErr = a.sessionAccount(r); apiErr != nil {
				writeError(w, apiErr)
				return
			}
		}
		if !ok {
			challenge := `Bearer realm="transcriber"`
			msg := "send an API token in the header Authorization: Bearer TOKEN"
			if given {
				challenge += `, error="invalid_token"`
				msg = "the API token is not valid"
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized", message: msg})
			return
		}
		next(w, r.WithContext(withAccount(r.Context(), acc)))
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(token), true
}

// logged records each request at debug level: the route, never the query
// (a webhook URL may carry a secret) nor any header.
func (a *API) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		a.log.Debug("api request", "method", r.Method, "route", r.Pattern, "status", sw.status,
			"took", time.Since(start).Round(time.Millisecond))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// apiError is every error the API answers, as
// {"error":{"code","message","type"}}; type is the OpenAI error type, so
// OpenAI clients read the same body.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errBadRequest(code, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: msg}
}

func errNotFound(msg string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "not_found", message: msg}
}

func errUnavailable(err error) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "unavailable",
		message: "the job service cannot be reached right now: " + err.Error()}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

func writeError(w http.ResponseWriter, e *apiError) {
	typ := "invalid_request_error"
	retry := "false"
	switch {
	case e.status == http.StatusUnauthorized:
		typ = "authentication_error"
	case e.status >= 500:
		typ = "server_error"
		if e.code == "unavailable" {
			retry = "true"
		}
	}
	// OpenAI's SDKs retry 409 and 5xx unless told otherwise; an answer that
	// will not change must not be asked again.
	w.Header().Set("X-Should-Retry", retry)
	writeJSON(w, e.status, errorBody{Error: errorDetail{Code: e.code, Message: e.message, Type: typ}})
}

// jsonErrors rewrites the router's own plain-text answers under /v1 (404
// for a path it does not know, 405 for a method a path does not take) as
// JSON errors.
func jsonErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&plainErrorWriter{ResponseWriter: w, path: r.URL.Path}, r)
	})
}

type plainErrorWriter struct {
	http.ResponseWriter
	path    string
	swallow bool
}

func (p *plainErrorWriter) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.swallow = true
		p.Header().Del("X-Content-Type-Options")
		text := strings.ToLower(http.StatusText(code))
		msg := text
		switch code {
		case http.StatusMethodNotAllowed:
			msg = p.path + " takes only " + p.Header().Get("Allow")
		case http.StatusNotFound:
			msg = "no endpoint " + p.path + "; GET /v1/openapi.json lists them"
		}
		writeError(p.ResponseWriter, &apiError{status: code, code: strings.ReplaceAll(text, " ", "_"), message: msg})
		return
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *plainErrorWriter) Write(b []byte) (int, error) {
	if p.swallow {
		return len(b), nil
	}
	return p.ResponseWriter.Write(b)
}

func (p *plainErrorWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
