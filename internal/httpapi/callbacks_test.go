package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/assemblyai"
	"github.com/transcriber/transcriber/workflows"
)

// Scenario: Every engine that takes callbacks is served at /v1/callbacks/{engine}
func TestEngineCallbacks(t *testing.T) {
	const secret, job = "callback-secret", "tg-42-7"
	var (
		logs     bytes.Buffer
		notified []workflows.EngineCallback
		notify   error
	)
	cb := &EngineCallbacks{
		Engines: map[string]engine.CallbackReceiver{assemblyai.Name: assemblyai.NewCallbacks(secret)},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Notify: func(_ context.Context, jobID string, c workflows.EngineCallback) error {
			if jobID != job {
				t.Errorf("notified job %q; want %q", jobID, job)
			}
			notified = append(notified, c)
			return notify
		},
	}
	h := NewHandler(Options{Gatherer: prometheus.NewRegistry(), Callbacks: cb})
	call := func(engineName, token, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/callbacks/"+engineName+"?job="+job, strings.NewReader(body))
		r.Header.Set(engine.CallbackHeader, token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	token := engine.CallbackToken(secret, job)
	const body = `{"transcript_id":"tr-1","status":"completed"}`

	if w := call("assemblyai", token, body); w.Code != http.StatusOK || len(notified) != 1 ||
		notified[0] != (workflows.EngineCallback{OperationID: "tr-1", Status: "completed"}) {
		t.Errorf("a good call: %d %s, notified %+v; want 200 and the job told about tr-1", w.Code, w.Body, notified)
	}
	if w := call("assemblyai", "guess", body); w.Code != http.StatusUnauthorized {
		t.Errorf("a forged call: %d; want 401", w.Code)
	}
	if w := call("assemblyai", engine.CallbackToken(secret, "tg-1-1"), body); w.Code != http.StatusUnauthorized {
		t.Errorf("another job's token: %d; want 401", w.Code)
	}
	if w := call("assemblyai", token, `{"status":"completed"}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "invalid_callback") {
		t.Errorf("a call without a transcript: %d %s; want 400 invalid_callback", w.Code, w.Body)
	}
	if w := call("speechkit", token, body); w.Code != http.StatusNotFound {
		t.Errorf("an engine without callbacks: %d; want 404", w.Code)
	}
	if len(notified) != 1 {
		t.Errorf("refused calls reached the job: %+v", notified)
	}

	notify = ErrJobNotRunning
	if w := call("assemblyai", token, body); w.Code != http.StatusOK || !strings.Contains(logs.String(), "engine callback dropped: the job is not running") ||
		!strings.Contains(logs.String(), "level=INFO") {
		t.Errorf("a call for a closed job: %d, log %q; want 200 and an INFO that it was dropped", w.Code, logs.String())
	}
	notify = errors.New("temporal: connection refused")
	if w := call("assemblyai", token, body); w.Code != http.StatusServiceUnavailable {
		t.Errorf("a call while Temporal is down: %d; want 503, so the provider calls again", w.Code)
	}
	if strings.Contains(logs.String(), secret) || strings.Contains(logs.String(), token) {
		t.Errorf("the log holds the secret or a token: %s", logs.String())
	}
}
