// Package speechkittest is a stand-in for Yandex SpeechKit's asynchronous
// recognition, API v3 over REST, for tests. It runs two servers, as the
// real service has two hosts: the recognition API (POST
// /stt/v3/recognizeFileAsync, GET /stt/v3/getRecognition?operationId=) and
// the operation service (GET /operations/{id}). It checks requests the way
// the documentation describes them and answers with the documented shapes;
// tests choose the outcome.
package speechkittest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultRunningChecks is how many checks of an operation answer "not done".
const DefaultRunningChecks = 2

// MaxBody is the largest request body the recognition API takes: SpeechKit
// documents 60 MB for audio in the body of a v3 request. The stand-in
// applies it to the whole body, base64 included, the strict reading.
const MaxBody = 60_000_000

// Languages are the codes the documentation lists for recognition, and
// "auto" for detection.
var Languages = []string{"auto", "de-DE", "en-US", "es-ES", "fi-FI", "fr-FR", "it-IT", "kk-KK",
	"nl-NL", "pl-PL", "pt-PT", "pt-BR", "ru-RU", "sv-SE", "tr-TR"}

// Models are the documented model tags.
var Models = []string{"general", "general:rc", "general:deprecated", "deferred-general"}

// Credentials are what the stand-in accepts. An IAM token stands for a user
// account: with FolderID set, its requests must name that folder.
type Credentials struct {
	APIKey   string
	IAMToken string
	FolderID string
}

// Word is a recognised word with its times in milliseconds.
type Word struct {
	Text    string
	StartMs int64
	EndMs   int64
}

// Utterance is one final of the results.
type Utterance struct {
	// Text is the raw recognition ("final").
	Text string
	// Normalized is sent as the final's refinement when the request asked
	// for normalisation; empty sends none.
	Normalized string
	Words      []Word
	// StartMs and EndMs bound the alternative; the service often reports
	// 0 and the end of the audio.
	StartMs, EndMs int64
	// Language is reported with a probability of 0.93 when not empty, such
	// as "ru-RU"; the service leaves the list empty otherwise.
	Language string
	// Channel is the channel tag, "0" when empty.
	Channel string
}

// Recognition is a request received by recognizeFileAsync.
type Recognition struct {
	Authorization string
	FolderID      string
	// Model is the "recognitionModel" object as sent.
	Model map[string]any
	// Content is the decoded audio.
	Content []byte
	// Fields are the top-level keys of the body.
	Fields []string
}

// Server is the stand-in. It is safe for concurrent use.
type Server struct {
	stt, ops *httptest.Server
	creds    Credentials

	mu            sync.Mutex
	utterances    []Utterance
	runningChecks int
	neverFinish   bool
	failCode      int
	failMessage   string
	failures      []*failure
	operations    map[string]*operation
	recognitions  []Recognition
	checks        int
	fetches       int
	requests      int
}

type failure struct {
	prefix     string
	remaining  int
	status     int
	body       string
	retryAfter string
}

type operation struct {
	id        string
	created   time.Time
	checks    int
	normalize bool
	// fail is the error the operation ends with, if it does.
	failCode    int
	failMessage string
	// utterances are fixed when the operation is created.
	utterances []Utterance
	done       bool
}

// New starts the two servers; t's cleanup closes them.
func New(t testing.TB, creds Credentials) *Server {
	t.Helper()
	s := &Server{creds: creds, runningChecks: DefaultRunningChecks, operations: map[string]*operation{}}
	s.stt = httptest.NewServer(s.handler(true))
	s.ops = httptest.NewServer(s.handler(false))
	t.Cleanup(s.stt.Close)
	t.Cleanup(s.ops.Close)
	return s
}

// URL is the recognition API root.
func (s *Server) URL() string { return s.stt.URL }

// OperationsURL is the operation service root.
func (s *Server) OperationsURL() string { return s.ops.URL }

// SetResult chooses the utterances of operations created from now on.
func (s *Server) SetResult(utterances ...Utterance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.utterances = append([]Utterance(nil), utterances...)
}

// SetRunningChecks sets how many checks answer "not done" before the
// operation is done.
func (s *Server) SetRunningChecks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runningChecks = max(n, 0)
}

// NeverFinish keeps operations running forever.
func (s *Server) NeverFinish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.neverFinish = true
}

// FailWith makes operations created from now on end with a google.rpc.Status
// error instead of results.
func (s *Server) FailWith(code int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failMessage = code, message
}

// FailNext makes the next n requests whose path starts with path (e.g.
// "/stt/v3/recognizeFileAsync", "/operations/", "/stt/v3/getRecognition")
// answer status with body, and with a Retry-After header when retryAfter
// is not empty. It applies before the credentials are checked, like a
// failure in front of the service.
func (s *Server) FailNext(path string, n int, status int, body string, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &failure{prefix: path, remaining: n, status: status, body: body, retryAfter: retryAfter})
}

// Recognitions are the recognizeFileAsync requests whose body was a JSON
// object, in order, including refused ones.
func (s *Server) Recognitions() []Recognition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recognition(nil), s.recognitions...)
}

// Checks counts the GET /operations/{id} requests.
func (s *Server) Checks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checks
}

// Fetches counts the getRecognition requests.
func (s *Server) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// Requests counts all requests to both servers.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

const (
	recognizePath = "/stt/v3/recognizeFileAsync"
	resultsPath   = "/stt/v3/getRecognition"
	opsPrefix     = "/operations/"
)

// handler serves the recognition API (stt) or the operation service.
func (s *Server) handler(stt bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, stt) })
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, onSTT bool) {
	// Reading the body first keeps the client's upload from racing an
	// early answer; the bound keeps a runaway client from filling memory.
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		// The client went away in the middle of its request.
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		return
	}
	var rep reply
	if len(body) > MaxBody {
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		rep = statusReply(http.StatusRequestEntityTooLarge, 8, "request body is larger than the 60 MB limit")
		// The rest of the body is not read; the connection cannot be reused.
		w.Header().Set("Connection", "close")
	} else {
		rep = s.answer(r, body, onSTT)
	}
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body) // a client that cannot read it fails on its own
}

// reply is an answer computed under the lock and written after it.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (s *Server) answer(r *http.Request, body []byte, onSTT bool) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	switch {
	case onSTT && r.URL.Path == recognizePath && r.Method == http.MethodPost:
		s.record(r, body)
	case !onSTT && strings.HasPrefix(r.URL.Path, opsPrefix) && r.Method == http.MethodGet:
		s.checks++
	case onSTT && r.URL.Path == resultsPath && r.Method == http.MethodGet:
		s.fetches++
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
	if rep, ok := s.authorize(r); !ok {
		return rep
	}

	switch {
	case onSTT && r.URL.Path == recognizePath:
		if r.Method != http.MethodPost {
			return statusReply(http.StatusNotImplemented, 12, "Method Not Allowed")
		}
		return s.recognize(body)
	case onSTT && r.URL.Path == resultsPath:
		if r.Method != http.MethodGet {
			return statusReply(http.StatusNotImplemented, 12, "Method Not Allowed")
		}
		return s.results(r.URL.Query().Get("operationId"))
	case !onSTT && strings.HasPrefix(r.URL.Path, opsPrefix):
		if r.Method != http.MethodGet {
			return statusReply(http.StatusNotImplemented, 12, "Method Not Allowed")
		}
		return s.check(strings.TrimPrefix(r.URL.Path, opsPrefix))
	}
	return statusReply(http.StatusNotFound, 5, "Not Found")
}

func (s *Server) record(r *http.Request, body []byte) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return
	}
	rec := Recognition{Authorization: r.Header.Get("Authorization"), FolderID: r.Header.Get("x-folder-id")}
	for k := range m {
		rec.Fields = append(rec.Fields, k)
	}
	// Recorded as far as it decodes; answer refuses a malformed one with 400
	// in checkModel.
	_ = json.Unmarshal(m["recognitionModel"], &rec.Model)
	var content string
	if json.Unmarshal(m["content"], &content) == nil {
		rec.Content, _ = decodeBytes(content)
	}
	s.recognitions = append(s.recognitions, rec)
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

// authorize checks the Authorization header, "Api-Key <key>" or "Bearer
// <IAM token>", and the folder a request names.
func (s *Server) authorize(r *http.Request) (reply, bool) {
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	bearer := strings.EqualFold(scheme, "Bearer") && s.creds.IAMToken != "" && cred == s.creds.IAMToken
	apiKey := strings.EqualFold(scheme, "Api-Key") && s.creds.APIKey != "" && cred == s.creds.APIKey
	if !bearer && !apiKey {
		return statusReply(http.StatusUnauthorized, 16, "The token is invalid"), false
	}
	folder := r.Header.Get("x-folder-id")
	switch {
	case folder != "" && folder != s.creds.FolderID:
		return statusReply(http.StatusForbidden, 7, "Permission to [resource-manager.folder "+folder+"] denied"), false
	case bearer && s.creds.FolderID != "" && folder == "":
		return statusReply(http.StatusBadRequest, 3, "folder_id is required for a user account: pass x-folder-id"), false
	}
	return reply{}, true
}

func (s *Server) recognize(body []byte) reply {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		return statusReply(http.StatusBadRequest, 3, "invalid JSON in the request body")
	}
	for k := range req {
		switch k {
		case "content", "uri", "recognitionModel", "recognitionClassifier", "speechAnalysis", "speakerLabeling", "summarization":
		default:
			return statusReply(http.StatusBadRequest, 3, fmt.Sprintf("unknown field %q in RecognizeFileRequest", k))
		}
	}
	_, hasContent := req["content"]
	_, hasURI := req["uri"]
	if hasContent == hasURI {
		return statusReply(http.StatusBadRequest, 3, "exactly one of content and uri is required")
	}
	var audioBytes []byte
	if hasContent {
		var content string
		if json.Unmarshal(req["content"], &content) != nil {
			return statusReply(http.StatusBadRequest, 3, "content must be a base64 string")
		}
		b, err := decodeBytes(content)
		if err != nil {
			return statusReply(http.StatusBadRequest, 3, "content is not valid base64")
		}
		if len(b) == 0 {
			return statusReply(http.StatusBadRequest, 3, "content is empty")
		}
		audioBytes = b
	}
	container, normalize, msg := checkModel(req["recognitionModel"])
	if msg != "" {
		return statusReply(http.StatusBadRequest, 3, msg)
	}
	op := &operation{id: newID(), created: time.Now().UTC(), normalize: normalize,
		failCode: s.failCode, failMessage: s.failMessage, utterances: s.utterances}
	if op.failCode == 0 && audioBytes != nil && !looksLike(container, audioBytes) {
		// The service only decodes the audio once the operation runs.
		op.failCode, op.failMessage = 3, "audio could not be decoded as "+container
	}
	s.operations[op.id] = op
	return jsonReply(http.StatusOK, op.render())
}

// checkModel validates recognitionModel and reports the container type
// and whether normalisation was asked for.
func checkModel(raw json.RawMessage) (container string, normalize bool, problem string) {
	var m struct {
		Model       *string `json:"model"`
		AudioFormat *struct {
			RawAudio *struct {
				AudioEncoding   string          `json:"audioEncoding"`
				SampleRateHertz json.RawMessage `json:"sampleRateHertz"`
			} `json:"rawAudio"`
			ContainerAudio *struct {
				ContainerAudioType string `json:"containerAudioType"`
			} `json:"containerAudio"`
		} `json:"audioFormat"`
		TextNormalization *struct {
			TextNormalization   string `json:"textNormalization"`
			ProfanityFilter     *bool  `json:"profanityFilter"`
			LiteratureText      *bool  `json:"literatureText"`
			PhoneFormattingMode string `json:"phoneFormattingMode"`
		} `json:"textNormalization"`
		LanguageRestriction *struct {
			RestrictionType string   `json:"restrictionType"`
			LanguageCode    []string `json:"languageCode"`
		} `json:"languageRestriction"`
		AudioProcessingType string `json:"audioProcessingType"`
	}
	if len(raw) == 0 {
		return "", false, "recognitionModel.audioFormat is required"
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", false, "recognitionModel: " + err.Error()
	}
	if m.Model != nil && !slices.Contains(Models, *m.Model) {
		return "", false, fmt.Sprintf("unknown model %q", *m.Model)
	}
	af := m.AudioFormat
	switch {
	case af == nil || (af.RawAudio == nil) == (af.ContainerAudio == nil):
		return "", false, "recognitionModel.audioFormat needs exactly one of rawAudio and containerAudio"
	case af.ContainerAudio != nil:
		container = af.ContainerAudio.ContainerAudioType
		if !slices.Contains([]string{"WAV", "OGG_OPUS", "MP3"}, container) {
			return "", false, fmt.Sprintf("unsupported containerAudioType %q", container)
		}
	default:
		rate := strings.Trim(string(af.RawAudio.SampleRateHertz), `"`)
		if af.RawAudio.AudioEncoding != "LINEAR16_PCM" || !slices.Contains([]string{"8000", "16000", "48000"}, rate) {
			return "", false, "rawAudio needs LINEAR16_PCM at 8000, 16000 or 48000 Hz"
		}
		container = "LINEAR16_PCM"
	}
	if tn := m.TextNormalization; tn != nil {
		if !slices.Contains([]string{"", "TEXT_NORMALIZATION_UNSPECIFIED", "TEXT_NORMALIZATION_ENABLED", "TEXT_NORMALIZATION_DISABLED"}, tn.TextNormalization) {
			return "", false, fmt.Sprintf("unknown textNormalization %q", tn.TextNormalization)
		}
		if !slices.Contains([]string{"", "PHONE_FORMATTING_MODE_UNSPECIFIED", "PHONE_FORMATTING_MODE_DISABLED"}, tn.PhoneFormattingMode) {
			return "", false, fmt.Sprintf("unknown phoneFormattingMode %q", tn.PhoneFormattingMode)
		}
		normalize = tn.TextNormalization == "TEXT_NORMALIZATION_ENABLED"
	}
	if lr := m.LanguageRestriction; lr != nil {
		if !slices.Contains([]string{"WHITELIST", "BLACKLIST"}, lr.RestrictionType) {
			return "", false, fmt.Sprintf("unknown restrictionType %q", lr.RestrictionType)
		}
		for _, code := range lr.LanguageCode {
			if !containsFold(Languages, code) {
				return "", false, fmt.Sprintf("unsupported language code %q", code)
			}
		}
	}
	if !slices.Contains([]string{"", "AUDIO_PROCESSING_TYPE_UNSPECIFIED", "REAL_TIME", "FULL_DATA"}, m.AudioProcessingType) {
		return "", false, fmt.Sprintf("unknown audioProcessingType %q", m.AudioProcessingType)
	}
	return container, normalize, ""
}

// looksLike checks the magic bytes of the declared container.
func looksLike(container string, b []byte) bool {
	switch container {
	case "OGG_OPUS":
		return bytes.HasPrefix(b, []byte("OggS"))
	case "WAV":
		return bytes.HasPrefix(b, []byte("RIFF"))
	case "MP3":
		return bytes.HasPrefix(b, []byte("ID3")) || len(b) > 1 && b[0] == 0xFF && b[1]&0xE0 == 0xE0
	}
	return true
}

func (s *Server) check(id string) reply {
	op, ok := s.operations[id]
	if !ok {
		return statusReply(http.StatusNotFound, 5, "Operation "+id+" not found")
	}
	if !op.done {
		op.checks++
		if !s.neverFinish && op.checks > s.runningChecks {
			op.done = true
		}
	}
	return jsonReply(http.StatusOK, op.render())
}

func (s *Server) results(id string) reply {
	if id == "" {
		return statusReply(http.StatusBadRequest, 3, "operation_id is required")
	}
	op, ok := s.operations[id]
	switch {
	case !ok:
		return statusReply(http.StatusNotFound, 5, "Operation "+id+" not found")
	case !op.done:
		// The documentation does not say what the service answers here; the
		// engine never asks before the operation is done.
		return statusReply(http.StatusBadRequest, 9, "Operation "+id+" is not done yet")
	case op.failCode != 0:
		return statusReply(http.StatusBadRequest, 9, "Operation "+id+" failed")
	}
	var buf bytes.Buffer
	for i, u := range op.utterances {
		for _, msg := range renderUtterance(op.id, i, u, op.normalize) {
			b, err := json.Marshal(map[string]any{"result": msg})
			if err != nil {
				return statusReply(http.StatusInternalServerError, 13, "Internal")
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
	}
	return reply{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: buf.Bytes()}
}

// renderUtterance writes the documented messages of one utterance: its
// final, its refinement, and the end-of-utterance update.
func renderUtterance(opID string, index int, u Utterance, normalize bool) []map[string]any {
	ch := u.Channel
	if ch == "" {
		ch = "0"
	}
	end := u.EndMs
	if n := len(u.Words); n > 0 && end < u.Words[n-1].EndMs {
		end = u.Words[n-1].EndMs
	}
	ms := strconv.FormatInt
	cursors := map[string]any{
		"receivedDataMs": ms(end, 10), "resetTimeMs": "0", "partialTimeMs": ms(end, 10),
		"finalTimeMs": ms(end, 10), "finalIndex": strconv.Itoa(index), "eouTimeMs": "0",
	}
	base := func() map[string]any {
		return map[string]any{
			"sessionUuid":        map[string]any{"uuid": "24935f24-2c1f62dc-8dd49006-" + opID[:8], "userRequestId": opID},
			"audioCursors":       cursors,
			"responseWallTimeMs": "189",
			"channelTag":         ch,
		}
	}
	alt := func(text string) map[string]any {
		words := []map[string]any{}
		for _, w := range u.Words {
			words = append(words, map[string]any{"text": w.Text, "startTimeMs": ms(w.StartMs, 10), "endTimeMs": ms(w.EndMs, 10)})
		}
		langs := []map[string]any{}
		if u.Language != "" {
			langs = append(langs, map[string]any{"languageCode": u.Language, "probability": 0.93})
		}
		return map[string]any{
			"alternatives": []map[string]any{{
				"words": words, "text": text, "startTimeMs": ms(u.StartMs, 10), "endTimeMs": ms(u.EndMs, 10),
				"confidence": 0, "languages": langs,
			}},
			"channelTag": ch,
		}
	}
	final := base()
	final["final"] = alt(u.Text)
	out := []map[string]any{final}
	if normalize && u.Normalized != "" {
		ref := base()
		ref["finalRefinement"] = map[string]any{"finalIndex": strconv.Itoa(index), "normalizedText": alt(u.Normalized)}
		out = append(out, ref)
	}
	eou := base()
	eou["eouUpdate"] = map[string]any{"timeMs": ms(end, 10)}
	return append(out, eou)
}

// render is the Operation resource as the operation service shows it.
func (op *operation) render() map[string]any {
	ts := op.created.Format(time.RFC3339)
	out := map[string]any{
		"id": op.id, "description": "STT v3 async recognition", "createdAt": ts,
		"createdBy": "ajehumcuv38h4b0f5t6e", "modifiedAt": ts, "done": op.done, "metadata": nil,
	}
	if op.done && op.failCode != 0 {
		out["error"] = map[string]any{"code": op.failCode, "message": op.failMessage, "details": []any{}}
	}
	return out
}

func jsonReply(status int, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":13,"message":"Internal","details":[]}`)
	}
	return reply{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: b}
}

// statusReply is the REST gateway's error: a google.rpc.Status with the
// request id in its details.
func statusReply(status, code int, message string) reply {
	return jsonReply(status, map[string]any{
		"code": code, "message": message,
		"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RequestInfo", "requestId": newID()}},
	})
}

// decodeBytes reads proto3 JSON bytes, which may be standard or URL-safe
// base64, padded or not.
func decodeBytes(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("not base64")
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// newID returns an id shaped like Yandex Cloud's: 20 characters of a–v and
// digits.
func newID() string {
	const alphabet = "0123456789abcdefghijklmnopqrstuv"
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[b[i]%32]
	}
	return "e03" + string(b[3:])
}
