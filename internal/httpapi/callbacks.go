package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/workflows"
)

// ErrJobNotRunning is what EngineCallbacks.Notify returns for a job that
// has closed or never existed.
var ErrJobNotRunning = errors.New("the job is not running")

// EngineCallbacks receives the calls an engine makes when one of its
// operations finishes (AssemblyAI's webhooks) at /v1/callbacks/{engine},
// and wakes the job waiting for it. The call only says "look now": the job
// still checks the operation itself, so a repeated, stale or forged call
// cannot change a result.
type EngineCallbacks struct {
	// Engines check the calls, by engine name; an engine not here is 404.
	Engines map[string]engine.CallbackReceiver
	// Notify signals the job; ErrJobNotRunning when it is not running.
	Notify func(ctx context.Context, jobID string, cb workflows.EngineCallback) error
	Logger *slog.Logger
}

func (c *EngineCallbacks) mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/callbacks/{engine}", c.receive)
}

func (c *EngineCallbacks) receive(w http.ResponseWriter, r *http.Request) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := r.PathValue("engine")
	rec, ok := c.Engines[name]
	if !ok {
		writeError(w, &apiError{status: http.StatusNotFound, code: "not_found", message: "no engine here takes callbacks by that name"})
		return
	}
	call, err := rec.ReadCallback(r)
	switch {
	case errors.Is(err, engine.ErrCallbackToken):
		// A 4xx ends the provider's retries, which is right for a call that
		// will never be accepted.
		writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized", message: err.Error()})
		return
	case err != nil:
		writeError(w, errBadRequest("invalid_callback", err.Error()))
		return
	}
	err = c.Notify(r.Context(), call.JobID, workflows.EngineCallback{OperationID: call.OperationID, Status: call.Status})
	switch {
	case errors.Is(err, ErrJobNotRunning):
		// The job closed (done, cancelled, timed out) before the call came;
		// nothing waits for it. Answering 2xx stops the retries.
		log.Info("engine callback dropped: the job is not running", "engine", name, "job_id", call.JobID, "operation_id", call.OperationID)
	case err != nil:
		log.Warn("engine callback not passed on; the engine will call again", "engine", name, "job_id", call.JobID, "error", err)
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "unavailable", message: "the job could not be told; try again"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"received": true})
}
