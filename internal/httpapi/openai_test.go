package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: The OpenAI-compatible endpoint answers in the requested format, or with the job id when it takes too long
func TestOpenAITranscription(t *testing.T) {
	h := newHarness(t)
	post := func(fields map[string]string, body []byte) *http.Request {
		if fields["model"] == "" && fields["no_model"] == "" {
			fields["model"] = "whisper-1"
		}
		return form(t, "/v1/audio/transcriptions", &formFile{name: "voice.ogg", body: body}, fields)
	}
	// The "worker": every job the endpoint starts is done a moment later.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			h.jobs.mu.Lock()
			var ids []string
			for id, j := range h.jobs.jobs {
				if j.status.State == job.Accepted && !strings.Contains(id, "slow") {
					ids = append(ids, id)
				}
			}
			h.jobs.mu.Unlock()
			for _, id := range ids {
				h.done(t, id)
			}
		}
	}()
	tests := []struct {
		format, contentType, want string
	}{
		{"", "application/json", `{"text":"go forward ten meters","usage":{"type":"duration","seconds":2.79}}`},
		{"json", "application/json", `{"text":"go forward ten meters","usage":{"type":"duration","seconds":2.79}}`},
		{"text", "text/plain; charset=utf-8", "go forward ten meters\n"},
		{"srt", "application/x-subrip; charset=utf-8", "1\n00:00:00,300 --> 00:00:01,200\ngo forward\n"},
		{"vtt", "text/vtt; charset=utf-8", "WEBVTT\n"},
		{"verbose_json", "application/json", `"segments":[{"id":0,"seek":0,"start":0.3,"end":1.2,"text":"go forward","tokens":[]`},
	}
	for _, tc := range tests {
		t.Run("format "+tc.format, func(t *testing.T) {
			w := h.do(t, post(map[string]string{"response_format": tc.format, "language": "en", "prompt": "ignored"}, ogg))
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != tc.contentType || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("= %d %q %q; want 200 %q containing %q", w.Code, w.Header().Get("Content-Type"), w.Body, tc.contentType, tc.want)
			}
		})
	}
	t.Run("model naming an engine picks it", func(t *testing.T) {
		body := append(append([]byte{}, ogg...), "engine"...)
		w := h.do(t, post(map[string]string{"model": "openai"}, body))
		if w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
		for _, j := range h.jobs.jobs {
			if j.in.Original.Size == int64(len(body)) && j.in.Engine != "openai" {
				t.Errorf("engine = %q; want openai", j.in.Engine)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		wantError(t, h.do(t, post(map[string]string{"response_format": "xml"}, ogg)), http.StatusBadRequest, "invalid_response_format")
		wantError(t, h.do(t, post(map[string]string{"no_model": "1"}, ogg)), http.StatusBadRequest, "missing_model")
		wantError(t, h.do(t, post(map[string]string{"stream": "yes"}, ogg)), http.StatusBadRequest, "invalid_stream")
		wantError(t, h.do(t, post(map[string]string{"temperature": "2"}, ogg)), http.StatusBadRequest, "invalid_temperature")
		wantError(t, h.do(t, post(map[string]string{"speakers": "many"}, ogg)), http.StatusBadRequest, "invalid_speakers")
		wantError(t, h.do(t, post(map[string]string{"timestamp_granularities[]": "char"}, ogg)), http.StatusBadRequest, "invalid_timestamp_granularities")
		w := h.do(t, func() *http.Request { r := raw(ogg, ""); r.URL.Path = "/v1/audio/transcriptions"; return r }())
		wantError(t, w, http.StatusBadRequest, "invalid_request")
		if w.Header().Get("X-Should-Retry") != "false" {
			t.Errorf("X-Should-Retry = %q; want false, so SDKs do not send it again", w.Header().Get("X-Should-Retry"))
		}
	})
}

// Scenario: The OpenAI-compatible endpoint answers in the requested format, or with the job id when it takes too long
func TestOpenAIFailuresAndTimeout(t *testing.T) {
	h := newHarness(t, func(o *APIOptions) { o.Wait = 300 * time.Millisecond })
	// Nobody works: the wait runs out and the answer is the job's id.
	w := h.do(t, form(t, "/v1/audio/transcriptions", &formFile{name: "a.ogg", body: ogg}, map[string]string{"model": "whisper-1"}))
	if w.Code != http.StatusAccepted {
		t.Fatalf("status = %d %s; want 202", w.Code, w.Body)
	}
	id := decode[acceptedBody](t, w).ID
	if id == "" || w.Header().Get("Location") != "/v1/jobs/"+id {
		t.Errorf("202 = %s, Location %q", w.Body, w.Header().Get("Location"))
	}
	// The SDK's announced timeout decides the wait, longer or shorter.
	waits := []struct {
		name    string
		headers map[string]string
		wait    time.Duration
		async   bool
	}{
		{name: "none announced", wait: 300 * time.Millisecond},
		{name: "longer timeout", headers: map[string]string{"X-Stainless-Timeout": "100"}, wait: 90 * time.Second},
		{name: "shorter timeout", headers: map[string]string{"X-Stainless-Timeout": "0.1"}, wait: 90 * time.Millisecond},
		{name: "respond-async", headers: map[string]string{"Prefer": "respond-async"}, async: true},
		{name: "respond-async with wait", headers: map[string]string{"Prefer": "respond-async, wait=5", "X-Stainless-Timeout": "600"}, wait: 5 * time.Second, async: true},
		{name: "wait alone does not cut the wait short", headers: map[string]string{"Prefer": "wait=5", "X-Stainless-Timeout": "600"}, wait: 540 * time.Second},
	}
	for _, tc := range waits {
		r := form(t, "/v1/audio/transcriptions", &formFile{name: "a.ogg", body: ogg}, map[string]string{"model": "whisper-1"})
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		if wait, async := h.api.waitFor(r); wait != tc.wait || async != tc.async {
			t.Errorf("%s: wait = %v, %v; want %v, %v", tc.name, wait, async, tc.wait, tc.async)
		}
	}

	tests := []struct {
		state  job.State
		kind   job.Kind
		status int
	}{
		{job.Failed, job.UnsupportedFormat, http.StatusBadRequest},
		{job.Failed, job.EngineUnauthorized, http.StatusBadGateway},
		{job.Dead, job.ServiceError, http.StatusBadGateway},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			h.jobs.set(id, func(j *fakeJob) {
				j.status.State = tc.state
				j.status.Failure = &job.Failure{Kind: tc.kind, Step: job.Converting, Message: "why"}
			})
			w := h.do(t, form(t, "/v1/audio/transcriptions", &formFile{name: "a.ogg", body: ogg}, map[string]string{"model": "whisper-1"}))
			e := wantError(t, w, tc.status, string(tc.kind))
			if !strings.Contains(e.Message, id) || !strings.Contains(e.Message, "why") {
				t.Errorf("message %q lacks the job id or the reason", e.Message)
			}
			if w.Header().Get("X-Should-Retry") != "false" {
				t.Errorf("X-Should-Retry = %q; want false", w.Header().Get("X-Should-Retry"))
			}
		})
	}
}
