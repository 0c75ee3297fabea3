// Package assemblyaitest is a stand-in for AssemblyAI's asynchronous
// transcription API (POST /v2/upload, POST /v2/transcript and
// GET /v2/transcript/{id}) for tests. It checks requests the way the service
// does and answers with the documented shapes; tests choose the outcome.
package assemblyaitest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// DefaultProcessingPolls is how many checks answer "processing" after the
// first "queued" one.
const DefaultProcessingPolls = 2

// Word is one recognised word, with its times in milliseconds as the API
// reports them.
type Word struct {
	Text       string  `json:"text"`
	Start      int     `json:"start"`
	End        int     `json:"end"`
	Confidence float64 `json:"confidence"`
	// Speaker is who said the word ("A", "B"), reported only for a
	// transcript created with speaker_labels; empty is "A".
	Speaker string `json:"-"`
}

// Server is an httptest server speaking AssemblyAI's wire format. It is safe
// for concurrent use.
type Server struct {
	srv    *httptest.Server
	apiKey string

	mu              sync.Mutex
	text            string
	languageCode    string
	words           []Word
	processingPolls int
	failMessage     string
	neverFinish     bool
	failures        []*failure
	issued          map[string]bool
	transcripts     map[string]*transcript
	uploads         [][]byte
	created         []map[string]any
	checks          int
	requests        int
	delivered       []delivery
}

type failure struct {
	prefix     string
	remaining  int
	status     int
	body       string
	retryAfter string
}

type transcript struct {
	id       string
	audioURL string
	params   map[string]any
	checks   int
	// final is the answer once the transcript completed or failed; it no
	// longer changes, whatever the server is told afterwards.
	final *transcriptJSON
}

// New starts a server that accepts apiKey; t's cleanup closes it.
func New(t testing.TB, apiKey string) *Server {
	t.Helper()
	s := &Server{
		apiKey:          apiKey,
		processingPolls: DefaultProcessingPolls,
		issued:          map[string]bool{},
		transcripts:     map[string]*transcript{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the API root to configure as the engine's base URL.
func (s *Server) URL() string { return s.srv.URL }

// SetResult chooses what a completed transcript reports. An empty
// languageCode reports the requested language_code, or "en_us" when the
// request asked for language detection.
func (s *Server) SetResult(text, languageCode string, words []Word) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.text, s.languageCode = text, languageCode
	s.words = append([]Word(nil), words...)
}

// SetProcessingPolls sets how many checks answer "processing" after the
// first, "queued" one.
func (s *Server) SetProcessingPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.processingPolls = max(n, 0)
}

// FailWith makes transcripts end in status "error" with message instead of
// completing.
func (s *Server) FailWith(message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failMessage = message
}

// NeverFinish keeps transcripts "processing" forever.
func (s *Server) NeverFinish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.neverFinish = true
}

// Finish lets transcripts complete again after NeverFinish.
func (s *Server) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.neverFinish = false
}

// FailNext makes the next n requests whose path starts with path (e.g.
// "/v2/upload", "/v2/transcript") answer status with body, and with a
// Retry-After header when retryAfter is not empty. It applies before the
// credentials are checked, like a failure in front of the service.
func (s *Server) FailNext(path string, n int, status int, body string, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &failure{prefix: path, remaining: n, status: status, body: body, retryAfter: retryAfter})
}

// Uploads are the bodies of all requests received by POST /v2/upload, in
// order, including refused ones.
func (s *Server) Uploads() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.uploads))
	copy(out, s.uploads)
	return out
}

// Created are the JSON object bodies received by POST /v2/transcript, in
// order, including refused ones.
func (s *Server) Created() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, len(s.created))
	copy(out, s.created)
	return out
}

// Checks counts the GET /v2/transcript/{id} requests received.
func (s *Server) Checks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checks
}

// Requests counts all requests received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

const transcriptPrefix = "/v2/transcript/"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Reading the whole body first keeps the client's upload from racing
	// an early answer.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// The client went away in the middle of its request.
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		return
	}

	rep := s.answer(r, body)
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body) // a client that cannot read it fails on its own
}

// reply is an answer computed under the lock and written after it, so that
// a slow client does not hold up other requests.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (s *Server) answer(r *http.Request, body []byte) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	switch {
	case r.URL.Path == "/v2/upload" && r.Method == http.MethodPost:
		s.uploads = append(s.uploads, body)
	case r.URL.Path == "/v2/transcript" && r.Method == http.MethodPost:
		var m map[string]any
		if json.Unmarshal(body, &m) == nil && m != nil {
			s.created = append(s.created, m)
		}
	case strings.HasPrefix(r.URL.Path, transcriptPrefix) && r.Method == http.MethodGet:
		s.checks++
	}

	if f := s.takeFailure(r.URL.Path); f != nil {
		rep := reply{status: f.status, header: http.Header{}, body: []byte(f.body)}
		if f.retryAfter != "" {
			rep.header.Set("Retry-After", f.retryAfter)
		}
		ct := "text/plain; charset=utf-8"
		if t := strings.TrimSpace(f.body); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			ct = "application/json"
		}
		rep.header.Set("Content-Type", ct)
		return rep
	}
	if r.Header.Get("Authorization") != s.apiKey || s.apiKey == "" {
		return errorReply(http.StatusUnauthorized, "Authentication error, API token missing/invalid")
	}

	switch {
	case r.URL.Path == "/v2/upload":
		if r.Method != http.MethodPost {
			return errorReply(http.StatusMethodNotAllowed, "Method not allowed")
		}
		return s.upload(body)
	case r.URL.Path == "/v2/transcript":
		if r.Method != http.MethodPost {
			return errorReply(http.StatusMethodNotAllowed, "Method not allowed")
		}
		return s.create(body)
	case strings.HasPrefix(r.URL.Path, transcriptPrefix):
		if r.Method != http.MethodGet {
			return errorReply(http.StatusMethodNotAllowed, "Method not allowed")
		}
		return s.check(strings.TrimPrefix(r.URL.Path, transcriptPrefix))
	}
	return errorReply(http.StatusNotFound, "Not found")
}

func (s *Server) takeFailure(path string) *failure {
	for _, f := range s.failures {
		if f.remaining > 0 && strings.HasPrefix(path, f.prefix) {
			f.remaining--
			return f
		}
	}
	return nil
}

func (s *Server) upload(body []byte) reply {
	if len(body) == 0 {
		return errorReply(http.StatusBadRequest, "Upload failed: the request body is empty")
	}
	u := s.srv.URL + "/cdn/upload/" + newID()
	s.issued[u] = true
	return jsonReply(http.StatusOK, map[string]string{"upload_url": u})
}

func (s *Server) create(body []byte) reply {
	var params map[string]any
	if err := json.Unmarshal(body, &params); err != nil || params == nil {
		return errorReply(http.StatusBadRequest, "Invalid JSON in the request body")
	}
	audioURL, _ := params["audio_url"].(string)
	switch {
	case audioURL == "":
		return errorReply(http.StatusBadRequest, "audio_url is required")
	case !s.issued[audioURL]:
		return errorReply(http.StatusBadRequest, "Transcoding failed. The audio_url is not a file uploaded to this server.")
	}
	for _, name := range []string{"punctuate", "format_text", "language_detection", "speaker_labels"} {
		if v, ok := params[name]; ok && v != nil {
			if _, isBool := v.(bool); !isBool {
				return errorReply(http.StatusBadRequest, fmt.Sprintf("%s must be a boolean", name))
			}
		}
	}
	lang, hasLang := params["language_code"]
	if hasLang && lang != nil {
		code, ok := lang.(string)
		if !ok || code == "" {
			return errorReply(http.StatusBadRequest, "language_code must be a non-empty string")
		}
		if params["language_detection"] == true {
			return errorReply(http.StatusBadRequest, "language_code cannot be combined with language_detection")
		}
	}
	if v, ok := params["speakers_expected"]; ok && v != nil {
		n, isNumber := v.(float64)
		if !isNumber || n != float64(int(n)) || n < 1 {
			return errorReply(http.StatusBadRequest, "speakers_expected must be a positive integer")
		}
		if params["speaker_labels"] != true {
			return errorReply(http.StatusBadRequest, "speakers_expected requires speaker_labels to be true")
		}
	}
	t := &transcript{id: newID(), audioURL: audioURL, params: params}
	s.transcripts[t.id] = t
	return jsonReply(http.StatusOK, s.render(t, "queued"))
}

func (s *Server) check(id string) reply {
	t, ok := s.transcripts[id]
	if !ok {
		return errorReply(http.StatusNotFound, "Transcript not found")
	}
	if t.final != nil {
		return jsonReply(http.StatusOK, t.final)
	}
	t.checks++
	switch {
	case t.checks == 1:
		return jsonReply(http.StatusOK, s.render(t, "queued"))
	case s.neverFinish || t.checks <= 1+s.processingPolls:
		return jsonReply(http.StatusOK, s.render(t, "processing"))
	case s.failMessage != "":
		t.final = s.render(t, "error")
	default:
		t.final = s.render(t, "completed")
	}
	return jsonReply(http.StatusOK, t.final)
}

// transcriptJSON is the documented transcript object, reduced to the fields
// a transcription without extra models has.
type transcriptJSON struct {
	ID                string     `json:"id"`
	Status            string     `json:"status"`
	AudioURL          string     `json:"audio_url"`
	Text              *string    `json:"text"`
	Words             []wordJSON `json:"words"`
	Confidence        *float64   `json:"confidence"`
	AudioDuration     *int       `json:"audio_duration"`
	LanguageCode      *string    `json:"language_code"`
	LanguageDetection bool       `json:"language_detection"`
	Punctuate         *bool      `json:"punctuate"`
	FormatText        *bool      `json:"format_text"`
	WebhookURL        *string    `json:"webhook_url"`
	SpeakerLabels     bool       `json:"speaker_labels"`
	SpeakersExpected  *int       `json:"speakers_expected"`
	// Utterances are the turns of the speakers, null unless the
	// transcript was created with speaker_labels.
	Utterances []utteranceJSON `json:"utterances"`
	Error      *string         `json:"error,omitempty"`
}

type wordJSON struct {
	Word
	Speaker *string `json:"speaker"`
}

// utteranceJSON is one uninterrupted stretch of one speaker.
type utteranceJSON struct {
	Speaker    string     `json:"speaker"`
	Start      int        `json:"start"`
	End        int        `json:"end"`
	Text       string     `json:"text"`
	Confidence float64    `json:"confidence"`
	Words      []wordJSON `json:"words"`
}

func (s *Server) render(t *transcript, status string) *transcriptJSON {
	out := &transcriptJSON{ID: t.id, Status: status, AudioURL: t.audioURL}
	requested, _ := t.params["language_code"].(string)
	out.LanguageDetection, _ = t.params["language_detection"].(bool)
	if v, ok := t.params["punctuate"].(bool); ok {
		out.Punctuate = &v
	}
	if v, ok := t.params["format_text"].(bool); ok {
		out.FormatText = &v
	}
	if requested != "" {
		out.LanguageCode = &requested
	}
	out.SpeakerLabels, _ = t.params["speaker_labels"].(bool)
	if n, ok := t.params["speakers_expected"].(float64); ok {
		expected := int(n)
		out.SpeakersExpected = &expected
	}
	switch status {
	case "error":
		msg := s.failMessage
		out.Error = &msg
	case "completed":
		text := s.text
		out.Text = &text
		out.Words = []wordJSON{}
		var sum float64
		for _, w := range s.words {
			wj := wordJSON{Word: w}
			if out.SpeakerLabels {
				speaker := w.Speaker
				if speaker == "" {
					speaker = "A"
				}
				wj.Speaker = &speaker
			}
			out.Words = append(out.Words, wj)
			sum += w.Confidence
		}
		if out.SpeakerLabels {
			out.Utterances = utterances(out.Words)
		}
		if n := len(s.words); n > 0 {
			conf := sum / float64(n)
			out.Confidence = &conf
			secs := (s.words[n-1].End + 999) / 1000
			out.AudioDuration = &secs
		} else {
			zero := 0
			out.AudioDuration = &zero
		}
		lang := s.languageCode
		switch {
		case lang == "" && requested != "":
			lang = requested
		case lang == "":
			lang = "en_us"
		}
		out.LanguageCode = &lang
	}
	return out
}

// utterances groups consecutive words of one speaker, as AssemblyAI's
// utterances are.
func utterances(words []wordJSON) []utteranceJSON {
	out := []utteranceJSON{}
	for _, w := range words {
		n := len(out)
		if n == 0 || out[n-1].Speaker != *w.Speaker {
			out = append(out, utteranceJSON{Speaker: *w.Speaker, Start: w.Start, Text: w.Text, Words: []wordJSON{w}})
		} else {
			out[n-1].Text += " " + w.Text
			out[n-1].Words = append(out[n-1].Words, w)
		}
		u := &out[len(out)-1]
		u.End = w.End
		u.Confidence = (u.Confidence*float64(len(u.Words)-1) + w.Confidence) / float64(len(u.Words))
	}
	return out
}

func jsonReply(status int, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"Internal server error"}`)
	}
	return reply{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: b}
}

// errorReply is AssemblyAI's error shape.
func errorReply(status int, message string) reply {
	return jsonReply(status, map[string]string{"error": message})
}

// newID returns a random UUID-like id.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// delivery is one webhook call: where, with which header, what.
type delivery struct {
	url, header, value string
	body               []byte
}

// Complete finishes every transcript still running, as "completed" (or
// "error" after FailWith), and calls the webhook of each that asked for one
// the way AssemblyAI does: a POST of {"transcript_id", "status"} with the
// requested authentication header. It returns the status of each call.
// With NeverFinish set, checks keep answering "processing" until then.
func (s *Server) Complete() []int {
	s.mu.Lock()
	var calls []delivery
	for _, t := range s.transcripts {
		if t.final != nil {
			continue
		}
		status := "completed"
		if s.failMessage != "" {
			status = "error"
		}
		t.final = s.render(t, status)
		if d, ok := webhookOf(t, status); ok {
			calls = append(calls, d)
		}
	}
	s.delivered = append(s.delivered, calls...)
	s.mu.Unlock()
	return deliver(calls)
}

// Redeliver repeats every webhook call made so far, as AssemblyAI does when
// it did not see an answer in time.
func (s *Server) Redeliver() []int {
	s.mu.Lock()
	calls := append([]delivery(nil), s.delivered...)
	s.mu.Unlock()
	return deliver(calls)
}

func webhookOf(t *transcript, status string) (delivery, bool) {
	u, _ := t.params["webhook_url"].(string)
	if u == "" {
		return delivery{}, false
	}
	name, _ := t.params["webhook_auth_header_name"].(string)
	value, _ := t.params["webhook_auth_header_value"].(string)
	body, _ := json.Marshal(map[string]string{"transcript_id": t.id, "status": status})
	return delivery{url: u, header: name, value: value, body: body}, true
}

func deliver(calls []delivery) []int {
	statuses := make([]int, 0, len(calls))
	for _, d := range calls {
		req, err := http.NewRequest(http.MethodPost, d.url, bytes.NewReader(d.body))
		if err != nil {
			statuses = append(statuses, 0)
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		if d.header != "" {
			req.Header.Set(d.header, d.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			statuses = append(statuses, 0)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	return statuses
}
