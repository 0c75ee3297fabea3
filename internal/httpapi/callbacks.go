package httpapi

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/workflows"
)

// ErrJobNotRunning is what EngineCallbacks.Notify returns for a job that
// has closed or never existed.
var ErrJobNotRunning = errors.New("the job is not running")

// EngineCallbacks receives the calls an engine makes when one of its
// operations finishes (AssemblyAI's webhooks), and wakes the job waiting
// for it. The call only says "look now": the job still checks the operation
// itself, so a repeated, stale or forged call cannot change a result.
type EngineCallbacks struct {
	// Secret derives each job's callback token (engine.CallbackToken).
	Secret string
	// Notify signals the job; ErrJobNotRunning when it is not running.
	Notify func(ctx context.Context, jobID string, cb workflows.EngineCallback) error
	Logger *slog.Logger
}

// maxCallbackBody bounds a callback's body: AssemblyAI's is two short
// fields.
const maxCallbackBody = 64 << 10

func (c *EngineCallbacks) mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/callbacks/assemblyai", c.assemblyAI)
}

func (c *EngineCallbacks) assemblyAI(w http.ResponseWriter, r *http.Request) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	jobID := r.URL.Query().Get("job")
	want := engine.CallbackToken(c.Secret, jobID)
	if jobID == "" || len(jobID) > 1000 || !hmac.Equal([]byte(r.Header.Get(engine.CallbackHeader)), []byte(want)) {
		// A 4xx ends AssemblyAI's retries, which is right for a call that
		// will never be accepted.
		writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized", message: "the callback token does not match the job"})
		return
	}
	var body struct {
		TranscriptID string `json:"transcript_id"`
		Status       string `json:"status"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxCallbackBody+1))
	if err != nil || len(data) > maxCallbackBody || json.Unmarshal(data, &body) != nil || body.TranscriptID == "" {
		writeError(w, errBadRequest("invalid_callback", `the body must be {"transcript_id": "...", "status": "..."}`))
		return
	}
	err = c.Notify(r.Context(), jobID, workflows.EngineCallback{OperationID: body.TranscriptID, Status: body.Status})
	switch {
	case errors.Is(err, ErrJobNotRunning):
		// The job closed (done, cancelled, timed out) before the call came;
		// nothing waits for it. Answering 2xx stops the retries.
		log.Info("engine callback dropped: the job is not running", "job_id", jobID, "operation_id", body.TranscriptID)
	case err != nil:
		log.Warn("engine callback not passed on; the engine will call again", "job_id", jobID, "error", err)
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "unavailable", message: "the job could not be told; try again"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"received": true})
}
