package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

// openAIFormats are the response_format values of OpenAI's endpoint.
var openAIFormats = []string{"json", "text", "srt", "vtt", "verbose_json"}

// openAITranscription is POST /v1/audio/transcriptions as OpenAI serves
// it: a multipart form with file and model, the transcript in the answer.
// A job that takes longer than the configured wait is answered with 202
// and its id, to be fetched from /v1/jobs.
func (a *API) openAITranscription(w http.ResponseWriter, r *http.Request) {
	key, apiErr := checkKey(r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	u, apiErr := a.receive(w, r, true)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	defer u.remove()
	format := u.fields["response_format"]
	if format == "" {
		format = "json"
	}
	if !slices.Contains(openAIFormats, format) {
		writeError(w, errBadRequest("invalid_response_format",
			fmt.Sprintf("response_format %q is not one of %s", format, strings.Join(openAIFormats, ", "))))
		return
	}
	if v := u.fields["stream"]; v == "true" {
		writeError(w, errBadRequest("unsupported_stream", "streaming transcription is not supported; leave stream unset"))
		return
	}
	if u.fields["model"] == "" {
		writeError(w, errBadRequest("missing_model", "the form has no field model; any model name is accepted, and an engine name (such as local) picks that engine"))
		return
	}
	s := submission{key: key, language: u.fields["language"], prompt: u.fields["prompt"]}
	// OpenAI model names mean nothing here; an engine's name picks it.
	if slices.Contains(a.opts.Engines, u.fields["model"]) {
		s.engine = u.fields["model"]
	}
	if apiErr := a.checkSubmission(s); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	id, _, apiErr := a.accept(r.Context(), u, s)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), a.waitFor(r))
	defer cancel()
	go func() {
		select {
		case <-a.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	st, err := a.opts.Jobs.Await(ctx, id, nil)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		// Still running: the job goes on, and its id says where to look.
		a.writeAccepted(w, id, false, st.State)
		return
	}
	switch st.State {
	case job.Done:
		doc, err := transcript.Load(r.Context(), a.opts.Blobs, st.TranscriptKey)
		if err != nil {
			a.log.Error("transcript unreadable", "job_id", id, "error", err)
			writeError(w, &apiError{status: http.StatusInternalServerError, code: "storage_error",
				message: fmt.Sprintf("the transcript of job %s cannot be read from this server's store", id)})
			return
		}
		writeOpenAI(w, doc, format, s.language)
	case job.Cancelled:
		writeError(w, &apiError{status: http.StatusConflict, code: "cancelled", message: fmt.Sprintf("job %s was cancelled", id)})
	default:
		writeError(w, failedError(id, st))
	}
}

// waitFor is the configured wait, shortened to end before the client's own
// timeout when an OpenAI SDK announces it.
func (a *API) waitFor(r *http.Request) time.Duration {
	wait := a.opts.Wait
	if s, err := strconv.Atoi(r.Header.Get("X-Stainless-Timeout")); err == nil && s > 0 {
		wait = min(wait, time.Duration(s)*time.Second*9/10)
	}
	return wait
}

func failedError(id string, st workflows.Status) *apiError {
	e := &apiError{status: http.StatusBadGateway, code: string(job.Internal),
		message: fmt.Sprintf("job %s is %s", id, st.State)}
	if f := st.Failure; f != nil {
		e.code = string(f.Kind)
		e.message = fmt.Sprintf("job %s is %s (%s at %s): %s", id, st.State, f.Kind, f.Step, f.Message)
		// OpenAI answers a recording at fault with 400.
		if f.Kind.BlamesInput() {
			e.status = http.StatusBadRequest
		}
	}
	return e
}

type openAISegment struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int   `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
}

type openAIVerbose struct {
	Task     string          `json:"task"`
	Language string          `json:"language"`
	Duration float64         `json:"duration"`
	Text     string          `json:"text"`
	Segments []openAISegment `json:"segments"`
}

func writeOpenAI(w http.ResponseWriter, doc transcript.Document, format, language string) {
	switch format {
	case "json":
		writeJSON(w, http.StatusOK, map[string]string{"text": doc.Text})
	case "verbose_json":
		v := openAIVerbose{Task: "transcribe", Language: doc.Language, Duration: doc.Duration.Seconds(), Text: doc.Text,
			Segments: make([]openAISegment, 0, len(doc.Segments))}
		if v.Language == "" {
			v.Language = language
		}
		for i, s := range doc.Segments {
			v.Segments = append(v.Segments, openAISegment{ID: i, Start: s.Start, End: s.End, Text: s.Text, Tokens: []int{}})
		}
		writeJSON(w, http.StatusOK, v)
	default:
		f := format
		if f == "text" {
			f = "txt"
		}
		mediaType, _ := transcript.MediaType(f)
		w.Header().Set("Content-Type", mediaType)
		_ = transcript.Render(w, doc, f)
	}
}
