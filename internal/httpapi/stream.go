package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

// streamKeepAlive is the longest the event stream stays silent; an SSE
// comment keeps proxies from closing a connection that waits.
var streamKeepAlive = 15 * time.Second

type textDelta struct {
	Type  string `json:"type"`
	Delta string `json:"delta"`
}

type textDone struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type streamError struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

// sseWriter writes server-sent events as OpenAI's transcription stream
// does: data lines without event names, each event flushed at once.
type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	last time.Time
	// sent is the text given out in deltas so far.
	sent strings.Builder
}

func (s *sseWriter) event(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return err
	}
	s.last = time.Now()
	return s.rc.Flush()
}

func (s *sseWriter) keepAlive() error {
	if time.Since(s.last) < streamKeepAlive {
		return nil
	}
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	s.last = time.Now()
	return s.rc.Flush()
}

// segments sends one delta per segment of doc; deltas after the first
// start with a space, so that they add up to the text.
func (s *sseWriter) segments(doc transcript.Document) error {
	for _, seg := range doc.Segments {
		text := strings.TrimSpace(seg.Text)
		if text == "" {
			continue
		}
		if s.sent.Len() > 0 {
			text = " " + text
		}
		s.sent.WriteString(text)
		if err := s.event(textDelta{Type: "transcript.text.delta", Delta: text}); err != nil {
			return err
		}
	}
	return nil
}

func (s *sseWriter) fail(e *apiError) {
	typ := "invalid_request_error"
	if e.status >= 500 {
		typ = "server_error"
	}
	_ = s.event(streamError{Type: "error", Error: errorDetail{Code: e.code, Message: e.message, Type: typ}})
}

// streamTranscript answers stream=true: a transcript.text.delta per
// segment as the job recognises it (a split recording's chunks stream as
// they finish, in order; a whole one when it is done), then
// transcript.text.done with the whole text. A failure is an error event,
// which the SDKs raise. A client that goes away ends the stream, not the
// job.
func (a *API) streamTranscript(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	// nginx buffers responses unless told otherwise, which would hold the
	// deltas back until the end.
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), last: time.Now()}
	// A stream may stay open as long as the job runs.
	_ = s.rc.SetWriteDeadline(time.Time{})
	if err := s.rc.Flush(); err != nil {
		return
	}
	streamed, wait := 0, 50*time.Millisecond
	for {
		st, _, apiErr := a.ownJob(ctx, id)
		switch {
		case apiErr != nil && apiErr.code == "not_found":
			s.fail(apiErr)
			return
		case apiErr == nil:
			for streamed < len(st.Chunks) && st.Chunks[streamed].TranscriptKey != "" {
				doc, err := transcript.Load(ctx, a.opts.Blobs, st.Chunks[streamed].TranscriptKey)
				if err != nil {
					a.log.Error("chunk transcript unreadable", "job_id", id, "chunk", streamed, "error", err)
					s.fail(&apiError{status: http.StatusInternalServerError, code: "storage_error",
						message: fmt.Sprintf("a transcript of job %s cannot be read from this server's store", id)})
					return
				}
				if s.segments(doc) != nil {
					return
				}
				streamed++
			}
			if st.State.Settled() {
				a.finishStream(s, r, id, st.State, st, streamed)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.draining:
			s.fail(&apiError{status: http.StatusServiceUnavailable, code: "unavailable",
				message: fmt.Sprintf("the server is shutting down; job %s goes on, fetch its transcript from /v1/jobs/%s/transcript", id, id)})
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
		if s.keepAlive() != nil {
			return
		}
	}
}

func (a *API) finishStream(s *sseWriter, r *http.Request, id string, state job.State, st workflows.Status, streamed int) {
	switch state {
	case job.Done:
	case job.Cancelled:
		s.fail(&apiError{status: http.StatusConflict, code: "cancelled", message: fmt.Sprintf("job %s was cancelled", id)})
		return
	default:
		s.fail(failedError(id, st))
		return
	}
	doc, err := transcript.Load(r.Context(), a.opts.Blobs, st.TranscriptKey)
	if err != nil {
		a.log.Error("transcript unreadable", "job_id", id, "error", err)
		s.fail(&apiError{status: http.StatusInternalServerError, code: "storage_error",
			message: fmt.Sprintf("the transcript of job %s cannot be read from this server's store", id)})
		return
	}
	if streamed == 0 {
		if s.segments(doc) != nil {
			return
		}
	}
	_ = s.event(textDone{Type: "transcript.text.done", Text: doc.Text})
}
