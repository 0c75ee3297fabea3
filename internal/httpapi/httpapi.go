// Package httpapi serves transcriber's HTTP endpoints: liveness, readiness
// and Prometheus metrics for every role, and for the roles that accept
// work the job API under /v1: uploads that become jobs, their status and
// transcripts, revive and cancel, and an OpenAI-compatible transcription
// endpoint; beside them the web page at / and the session that signs it
// in.
package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/transcriber/transcriber/internal/webui"
)

// Check reports whether a dependency is usable; nil means ready.
type Check func(ctx context.Context) error

// Options configure the handler.
type Options struct {
	// Gatherer is the registry served on /metrics.
	Gatherer prometheus.Gatherer
	// Ready are the checks behind /readyz, by name.
	Ready map[string]Check
	// API, when set, is served under /v1.
	API *API
	// Callbacks, when set, receives engines' calls under /v1/callbacks.
	Callbacks *EngineCallbacks
}

// NewHandler returns the router of the HTTP server.
func NewHandler(opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		status, checks := http.StatusOK, map[string]string{}
		for name, check := range opts.Ready {
			if err := check(ctx); err != nil {
				status, checks[name] = http.StatusServiceUnavailable, err.Error()
				continue
			}
			checks[name] = "ok"
		}
		writeJSON(w, status, map[string]any{"ready": status == http.StatusOK, "checks": checks})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	if opts.Callbacks != nil {
		opts.Callbacks.mount(mux)
	}
	if opts.API == nil {
		return mux
	}
	opts.API.mount(mux)
	// The page is a client of the API: it is served wherever the API is.
	page, err := webui.New()
	if err != nil {
		// The page is embedded in the binary: only a broken build fails.
		panic(fmt.Sprintf("httpapi: the page: %v", err))
	}
	page.Mount(mux)
	opts.API.mountSession(mux)
	return jsonErrors(mux)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
