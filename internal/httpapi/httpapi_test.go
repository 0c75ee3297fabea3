package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func serve(t *testing.T, h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHealthz(t *testing.T) {
	tests := []struct {
		name, method string
		wantBody     bool
	}{
		{name: "GET", method: http.MethodGet, wantBody: true},
		{name: "HEAD", method: http.MethodHead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHandler(Options{Gatherer: prometheus.NewRegistry()})
			w := serve(t, h, httptest.NewRequest(tc.method, "/healthz", nil))
			if w.Code != http.StatusOK {
				t.Errorf("status = %d; want %d", w.Code, http.StatusOK)
			}
			if got := w.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q; want %q", got, "application/json")
			}
			if !tc.wantBody {
				return
			}
			var body map[string]string
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v; want JSON", w.Body, err)
			}
			if want := map[string]string{"status": "ok"}; !reflect.DeepEqual(body, want) {
				t.Errorf("body = %v; want %v", body, want)
			}
		})
	}
}

type readyBody struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"`
}

func ok(context.Context) error { return nil }

func failing(msg string) Check {
	return func(context.Context) error { return errors.New(msg) }
}

func TestReadyz(t *testing.T) {
	tests := []struct {
		name       string
		checks     map[string]Check
		wantStatus int
		want       readyBody
	}{
		{
			name:       "no checks",
			wantStatus: http.StatusOK,
			want:       readyBody{Ready: true, Checks: map[string]string{}},
		},
		{
			name:       "all pass",
			checks:     map[string]Check{"temporal": ok, "blobs": ok},
			wantStatus: http.StatusOK,
			want:       readyBody{Ready: true, Checks: map[string]string{"temporal": "ok", "blobs": "ok"}},
		},
		{
			name:       "one fails",
			checks:     map[string]Check{"temporal": failing("connection refused"), "blobs": ok},
			wantStatus: http.StatusServiceUnavailable,
			want:       readyBody{Ready: false, Checks: map[string]string{"temporal": "connection refused", "blobs": "ok"}},
		},
		{
			name:       "all fail",
			checks:     map[string]Check{"temporal": failing("down"), "blobs": failing("disk full")},
			wantStatus: http.StatusServiceUnavailable,
			want:       readyBody{Ready: false, Checks: map[string]string{"temporal": "down", "blobs": "disk full"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHandler(Options{Gatherer: prometheus.NewRegistry(), Ready: tc.checks})
			w := serve(t, h, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if w.Code != tc.wantStatus {
				t.Errorf("status = %d; want %d", w.Code, tc.wantStatus)
			}
			if got := w.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q; want %q", got, "application/json")
			}
			var got readyBody
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v; want JSON", w.Body, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("body = %+v; want %+v", got, tc.want)
			}
		})
	}
}

// blocking is a check that answers only when its context ends, like a
// dependency that accepts the connection and never replies.
func blocking(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestReadyzBlockingCheckTimesOut(t *testing.T) {
	tests := []struct {
		name string
		// ctx is the request's context; the handler's own 3 s limit
		// applies when the client waits longer.
		ctx        func() (context.Context, context.CancelFunc)
		checks     map[string]Check
		maxElapsed time.Duration
	}{
		{
			name:       "handler limit",
			ctx:        func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			checks:     map[string]Check{"stuck": blocking, "fine": ok},
			maxElapsed: 10 * time.Second,
		},
		{
			name:       "limit shared by several stuck checks",
			ctx:        func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			checks:     map[string]Check{"stuck": blocking, "also stuck": blocking, "fine": ok},
			maxElapsed: 5 * time.Second,
		},
		{
			name: "client gives up first",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			},
			checks:     map[string]Check{"stuck": blocking, "fine": ok},
			maxElapsed: 2 * time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := tc.ctx()
			defer cancel()
			h := NewHandler(Options{Gatherer: prometheus.NewRegistry(), Ready: tc.checks})
			r := httptest.NewRequest(http.MethodGet, "/readyz", nil).WithContext(ctx)

			done := make(chan *httptest.ResponseRecorder, 1)
			start := time.Now()
			go func() { done <- serve(t, h, r) }()
			var w *httptest.ResponseRecorder
			select {
			case w = <-done:
			case <-time.After(tc.maxElapsed):
				t.Fatalf("/readyz still running after %v; want it to give up on stuck checks", tc.maxElapsed)
			}
			elapsed := time.Since(start)
			if elapsed > tc.maxElapsed {
				t.Errorf("/readyz took %v; want at most %v", elapsed, tc.maxElapsed)
			}
			if w.Code != http.StatusServiceUnavailable {
				t.Errorf("status = %d; want %d", w.Code, http.StatusServiceUnavailable)
			}
			var got readyBody
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v; want JSON", w.Body, err)
			}
			if got.Ready {
				t.Errorf("ready = true; want false")
			}
			if len(got.Checks) != len(tc.checks) {
				t.Errorf("checks = %v; want one entry per check (%d)", got.Checks, len(tc.checks))
			}
			for name := range tc.checks {
				msg, listed := got.Checks[name]
				switch {
				case !listed:
					t.Errorf("checks = %v; want %q listed", got.Checks, name)
				case name == "fine" && msg != "ok":
					// The other check may run after the deadline; it
					// passes because it ignores its context.
					t.Errorf("checks[%q] = %q; want %q", name, msg, "ok")
				case name != "fine" && msg == "ok":
					t.Errorf("checks[%q] = %q; want the context error", name, msg)
				}
			}
		})
	}
}

func TestReadyzCheckDeadline(t *testing.T) {
	// Checks pass their context to network calls, so it must carry the
	// deadline and not just be cancelled at the end.
	var deadline time.Time
	var hasDeadline bool
	h := NewHandler(Options{Gatherer: prometheus.NewRegistry(), Ready: map[string]Check{
		"probe": func(ctx context.Context) error {
			deadline, hasDeadline = ctx.Deadline()
			return nil
		},
	}})
	start := time.Now()
	serve(t, h, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if !hasDeadline {
		t.Fatalf("check context has no deadline; want one about 3s away")
	}
	if d := deadline.Sub(start); d <= 0 || d > 3*time.Second+time.Second {
		t.Errorf("check deadline %v after the request; want about 3s", d)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_requests_total", Help: "Requests in a test."}, []string{"code"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_temperature", Help: "A gauge."})
	reg.MustRegister(c, g)
	c.WithLabelValues("200").Add(3)
	g.Set(21.5)

	h := NewHandler(Options{Gatherer: reg})
	w := serve(t, h, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d; want %d", w.Code, http.StatusOK)
	}
	if got := w.Header().Get("Content-Type"); !strings.HasPrefix(got, "text/plain") {
		t.Errorf("Content-Type = %q; want the Prometheus text format (text/plain)", got)
	}
	body, _ := io.ReadAll(w.Body)
	for _, want := range []string{
		"# HELP test_requests_total Requests in a test.",
		"# TYPE test_requests_total counter",
		`test_requests_total{code="200"} 3`,
		"# TYPE test_temperature gauge",
		"test_temperature 21.5",
	} {
		t.Run(want, func(t *testing.T) {
			if !strings.Contains(string(body), want+"\n") {
				t.Errorf("/metrics body =\n%s\nwant a line %q", body, want)
			}
		})
	}
	// Only the given gatherer is served, not the process-wide default.
	if strings.Contains(string(body), "go_goroutines") {
		t.Errorf("/metrics body has go_goroutines; want only the given registry's series")
	}
}

func TestWrongMethod(t *testing.T) {
	tests := []struct{ method, path string }{
		{http.MethodPost, "/healthz"},
		{http.MethodPut, "/healthz"},
		{http.MethodDelete, "/healthz"},
		{http.MethodPost, "/readyz"},
		{http.MethodPost, "/metrics"},
		{http.MethodPatch, "/metrics"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			h := NewHandler(Options{Gatherer: prometheus.NewRegistry(), Ready: map[string]Check{"x": ok}})
			w := serve(t, h, httptest.NewRequest(tc.method, tc.path, strings.NewReader("{}")))
			if w.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s status = %d; want %d", tc.method, tc.path, w.Code, http.StatusMethodNotAllowed)
			}
			if allow := w.Header().Get("Allow"); !strings.Contains(allow, http.MethodGet) {
				t.Errorf("%s %s Allow = %q; want it to list GET", tc.method, tc.path, allow)
			}
		})
	}
}

func TestUnknownPath(t *testing.T) {
	for _, path := range []string{"/", "/health", "/healthz/extra", "/ready", "/metricsz", "/metrics/x", "/api/jobs"} {
		t.Run(path, func(t *testing.T) {
			h := NewHandler(Options{Gatherer: prometheus.NewRegistry()})
			w := serve(t, h, httptest.NewRequest(http.MethodGet, path, nil))
			if w.Code != http.StatusNotFound {
				t.Errorf("GET %s status = %d; want %d", path, w.Code, http.StatusNotFound)
			}
		})
	}
}
