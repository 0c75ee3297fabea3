package httpapi

import (
	"fmt"
	"net/http"
	"slices"
)

// modelAliases are OpenAI's transcription model names. Clients send them
// unchanged, so each is listed and stands for the default engine; a
// diarize model also asks for speakers.
var modelAliases = []string{"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-4o-transcribe-diarize"}

// model is one entry of /v1/models in OpenAI's shape.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

// models are the names a request may give as model: the engines first,
// then the aliases of the default one.
func (a *API) models() []model {
	var out []model
	for _, name := range a.opts.Engines {
		out = append(out, model{ID: name, Object: "model", Created: a.started.Unix(), OwnedBy: "transcriber"})
	}
	for _, name := range modelAliases {
		if !slices.Contains(a.opts.Engines, name) {
			out = append(out, model{ID: name, Object: "model", Created: a.started.Unix(), OwnedBy: "transcriber"})
		}
	}
	return out
}

func (a *API) listModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: a.models()})
}

func (a *API) getModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, m := range a.models() {
		if m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	writeError(w, &apiError{status: http.StatusNotFound, code: "model_not_found",
		message: fmt.Sprintf("the model %q does not exist; GET /v1/models lists them", id)})
}
