package openai

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
)

// testKey is distinctive so that any leak into an error string is found.
const testKey = "sk-test-9f8e7d6c5b4a-DO-NOT-LEAK"

// verboseJSON is the documented verbose_json shape of OpenAI's API.
const verboseJSON = `{"task":"transcribe","language":"english","duration":8.47,` +
	`"text":" The quick brown fox. Jumps over the lazy dog. ",` +
	`"segments":[` +
	`{"id":0,"seek":0,"start":0.0,"end":3.32,"text":" The quick brown fox.","tokens":[50364,440,1702],"temperature":0.0,"avg_logprob":-0.28,"compression_ratio":1.2,"no_speech_prob":0.01},` +
	`{"id":1,"seek":0,"start":3.32,"end":8.47,"text":" Jumps over the lazy dog. ","tokens":[50530,508],"temperature":0.0,"avg_logprob":-0.28,"compression_ratio":1.2,"no_speech_prob":0.01}],` +
	`"usage":{"type":"duration","seconds":9}}`

// received is what the stand-in server saw of one request.
type received struct {
	method, path      string
	auth, userAgent   string
	contentLength     int64
	chunked           bool
	fields            map[string]string
	fileName          string
	fileType          string
	fileSum           [32]byte
	fileSize          int64
	multipartProblems []string
}

// fakeServer speaks the OpenAI transcription wire format: it parses the
// multipart upload the way a real server must, then answers with respond.
type fakeServer struct {
	*httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	last     received
}

func newFakeServer(t *testing.T, respond http.HandlerFunc) *fakeServer {
	t.Helper()
	s := &fakeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		got := readUpload(r)
		s.mu.Lock()
		s.last = got
		s.mu.Unlock()
		if len(got.multipartProblems) > 0 {
			http.Error(w, strings.Join(got.multipartProblems, "; "), http.StatusTeapot)
			return
		}
		respond(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeServer) received() received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func readUpload(r *http.Request) received {
	got := received{
		method:        r.Method,
		path:          r.URL.Path,
		auth:          r.Header.Get("Authorization"),
		userAgent:     r.Header.Get("User-Agent"),
		contentLength: r.ContentLength,
		chunked:       slices.Contains(r.TransferEncoding, "chunked"),
		fields:        map[string]string{},
	}
	problem := func(format string, args ...any) {
		got.multipartProblems = append(got.multipartProblems, fmt.Sprintf(format, args...))
	}
	mr, err := r.MultipartReader()
	if err != nil {
		problem("not multipart/form-data: %v", err)
		return got
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			problem("read part: %v", err)
			return got
		}
		if part.FormName() == "file" {
			h := sha256.New()
			n, err := io.Copy(h, part)
			if err != nil {
				problem("read file part: %v", err)
			}
			copy(got.fileSum[:], h.Sum(nil))
			got.fileSize = n
			got.fileName = part.FileName()
			got.fileType = part.Header.Get("Content-Type")
			continue
		}
		v, err := io.ReadAll(part)
		if err != nil {
			problem("read field %s: %v", part.FormName(), err)
		}
		name := part.FormName()
		if prev, dup := got.fields[name]; dup {
			// Arrays are one part per value, as OpenAI's SDKs send them.
			if !strings.HasSuffix(name, "[]") {
				problem("field %s sent twice", name)
			}
			got.fields[name] = prev + "," + string(v)
			continue
		}
		got.fields[name] = string(v)
	}
	return got
}

func reply(status int, contentType, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body) // a client that cannot read it fails on its own
	}
}

func openAIError(message, typ string, code any) string {
	c := "null"
	if code != nil {
		c = fmt.Sprintf("%q", code)
	}
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%s}}`, message, typ, c)
}

// writeAudio writes size bytes of a fixed pattern; the stand-in does not
// decode audio, it only checks that the bytes arrive intact.
func writeAudio(t *testing.T, name string, size int) (string, [32]byte) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, sha256.Sum256(data)
}

func newEngine(t *testing.T, baseURL, key string) *Engine {
	t.Helper()
	e, err := New(Config{BaseURL: baseURL, APIKey: key, Model: "whisper-1"}, nil)
	if err != nil {
		t.Fatalf("New(%q): %v", baseURL, err)
	}
	return e
}

func TestNewValidatesBaseURL(t *testing.T) {
	for _, tc := range []struct {
		name, baseURL string
		wantErr       bool
		wantEndpoint  string
	}{
		{"openai", "https://api.openai.com/v1", false, "https://api.openai.com/v1/audio/transcriptions"},
		{"trailing slash", "http://localhost:8000/v1/", false, "http://localhost:8000/v1/audio/transcriptions"},
		{"root", "http://whisper:8080", false, "http://whisper:8080/audio/transcriptions"},
		{"empty", "", true, ""},
		{"relative", "api.openai.com/v1", true, ""},
		{"path only", "/v1", true, ""},
		{"other scheme", "ftp://example.com/v1", true, ""},
		{"no host", "http:///v1", true, ""},
		{"unparsable", "http://[::1", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Config{BaseURL: tc.baseURL}, nil)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("New(%q) = nil error; want an error", tc.baseURL)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tc.baseURL, err)
			}
			if e.endpoint != tc.wantEndpoint {
				t.Errorf("endpoint = %q; want %q", e.endpoint, tc.wantEndpoint)
			}
			if e.http.HTTP == nil || e.http.HTTP.Timeout != 0 {
				t.Errorf("client = %+v; want a client without an overall timeout", e.http.HTTP)
			}
		})
	}
}

func TestNewDoesNotChangeCallersClient(t *testing.T) {
	client := &http.Client{Timeout: time.Minute}
	e, err := New(Config{BaseURL: "https://api.openai.com/v1"}, client)
	if err != nil {
		t.Fatal(err)
	}
	if client.CheckRedirect != nil {
		t.Error("New changed the caller's client")
	}
	if e.http.HTTP.Timeout != time.Minute {
		t.Errorf("client timeout = %v; want the caller's %v", e.http.HTTP.Timeout, time.Minute)
	}
}

func TestNameAndFormat(t *testing.T) {
	e := newEngine(t, "https://api.openai.com/v1", "")
	if got := e.Name(); got != "openai" {
		t.Errorf("Name() = %q; want %q", got, "openai")
	}
	if got := e.Format(); got.Name != audio.FLAC16kMono.Name || got.Ext != ".flac" {
		t.Errorf("Format() = %+v; want FLAC16kMono", got)
	}
}

// Scenario: A verbose JSON answer gives text, language and segments
func TestSubmitSuccess(t *testing.T) {
	type want struct {
		text     string
		language string
		segments []engine.Segment
		rawType  string
	}
	foxSegments := []engine.Segment{
		{Start: 0, End: 3320 * time.Millisecond, Text: "The quick brown fox."},
		{Start: 3320 * time.Millisecond, End: 8470 * time.Millisecond, Text: "Jumps over the lazy dog."},
	}
	for _, tc := range []struct {
		name       string
		respond    http.HandlerFunc
		key        string
		language   string
		audioName  string
		trailSlash bool
		// wantLanguageField is the language form field; empty means absent.
		wantLanguageField string
		wantFileName      string
		wantFileType      string
		body              string
		want              want
	}{
		{
			name:     "verbose_json with segments and language name",
			body:     verboseJSON,
			key:      testKey,
			language: "en",
			want:     want{text: "The quick brown fox. Jumps over the lazy dog.", language: "en", segments: foxSegments, rawType: "application/json"},
		},
		{
			name:     "verbose_json russian",
			body:     `{"task":"transcribe","language":"russian","duration":1.5,"text":" Привет, мир.","segments":[{"id":0,"start":0.0,"end":1.5,"text":" Привет, мир."}]}`,
			key:      testKey,
			language: "ru",
			want:     want{text: "Привет, мир.", language: "ru", segments: []engine.Segment{{Start: 0, End: 1500 * time.Millisecond, Text: "Привет, мир."}}, rawType: "application/json"},
		},
		{
			name:     "verbose_json with a code passes it through",
			body:     `{"language":"de","duration":1,"text":"Hallo","segments":[]}`,
			key:      testKey,
			language: "",
			want:     want{text: "Hallo", language: "de", rawType: "application/json"},
		},
		{
			name:     "BCP 47 tag is sent as its language code",
			body:     `{"text":"Hello"}`,
			key:      testKey,
			language: "en-US",
			want:     want{text: "Hello", language: "en", rawType: "application/json"},
		},
		{
			name:     "plain json without segments keeps the requested language",
			body:     `{"text":"  just text  "}`,
			key:      testKey,
			language: "fr",
			want:     want{text: "just text", language: "fr", rawType: "application/json"},
		},
		{
			name:     "plain json without language and none requested",
			body:     `{"text":"hello"}`,
			key:      testKey,
			language: "",
			want:     want{text: "hello", rawType: "application/json"},
		},
		{
			name:     "text/plain body",
			respond:  reply(http.StatusOK, "text/plain; charset=utf-8", "  hello from whisper.cpp\n"),
			body:     "  hello from whisper.cpp\n",
			key:      testKey,
			language: "en",
			want:     want{text: "hello from whisper.cpp", language: "en", rawType: "text/plain; charset=utf-8"},
		},
		{
			name: "json without content type",
			respond: func(w http.ResponseWriter, _ *http.Request) {
				w.Header()["Content-Type"] = nil
				_, _ = io.WriteString(w, `{"text":"hi"}`) // as in reply
			},
			body:     `{"text":"hi"}`,
			key:      testKey,
			language: "",
			want:     want{text: "hi", rawType: "application/json"},
		},
		{
			name:     "empty transcript of silence",
			body:     `{"task":"transcribe","language":"english","duration":2.0,"text":"","segments":[]}`,
			key:      testKey,
			language: "en",
			want:     want{text: "", language: "en", rawType: "application/json"},
		},
		{
			name:     "no api key sends no authorization",
			body:     `{"text":"local"}`,
			key:      "",
			language: "en",
			want:     want{text: "local", language: "en", rawType: "application/json"},
		},
		{
			name:       "base url with trailing slash",
			body:       `{"text":"slash"}`,
			key:        testKey,
			language:   "en",
			trailSlash: true,
			want:       want{text: "slash", language: "en", rawType: "application/json"},
		},
		{
			name:         "wav file name and type",
			body:         `{"text":"wav"}`,
			key:          testKey,
			audioName:    "recording.WAV",
			wantFileName: "audio.wav",
			wantFileType: "audio/wav",
			want:         want{text: "wav", rawType: "application/json"},
		},
		{
			name:         "unknown extension",
			body:         `{"text":"bin"}`,
			key:          testKey,
			audioName:    "recording.xyz",
			wantFileName: "audio.xyz",
			wantFileType: "application/octet-stream",
			want:         want{text: "bin", rawType: "application/json"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			respond := tc.respond
			if respond == nil {
				respond = reply(http.StatusOK, "application/json", tc.body)
			}
			srv := newFakeServer(t, respond)
			base := srv.URL + "/v1"
			if tc.trailSlash {
				base += "/"
			}
			e := newEngine(t, base, tc.key)
			audioName := tc.audioName
			if audioName == "" {
				audioName = "normalised.flac"
			}
			wantFileName, wantFileType := tc.wantFileName, tc.wantFileType
			if wantFileName == "" {
				wantFileName, wantFileType = "audio.flac", "audio/flac"
			}
			path, sum := writeAudio(t, audioName, 4096)

			sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: tc.language})
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}

			if n := srv.requests.Load(); n != 1 {
				t.Errorf("requests = %d; want 1", n)
			}
			got := srv.received()
			if got.method != http.MethodPost || got.path != "/v1/audio/transcriptions" {
				t.Errorf("request = %s %s; want POST /v1/audio/transcriptions", got.method, got.path)
			}
			if tc.key == "" && got.auth != "" {
				t.Errorf("Authorization = %q; want none without an API key", got.auth)
			}
			if tc.key != "" && got.auth != "Bearer "+tc.key {
				t.Errorf("Authorization = %q; want the bearer key", got.auth)
			}
			if !strings.Contains(got.userAgent, "transcriber") {
				t.Errorf("User-Agent = %q; want it to name transcriber", got.userAgent)
			}
			if v := got.fields["model"]; v != "whisper-1" {
				t.Errorf("model = %q; want %q", v, "whisper-1")
			}
			if v := got.fields["response_format"]; v != "verbose_json" {
				t.Errorf("response_format = %q; want %q", v, "verbose_json")
			}
			wantLang := engine.PrimaryLanguage(tc.language)
			if v, ok := got.fields["language"]; wantLang == "" && ok {
				t.Errorf("language field = %q; want it absent", v)
			} else if wantLang != "" && v != wantLang {
				t.Errorf("language field = %q; want %q", v, wantLang)
			}
			if got.fileName != wantFileName || got.fileType != wantFileType {
				t.Errorf("file part = %q (%s); want %q (%s)", got.fileName, got.fileType, wantFileName, wantFileType)
			}
			if got.fileSize != 4096 || got.fileSum != sum {
				t.Errorf("file bytes: got %d bytes with a different checksum; want the 4096 bytes sent", got.fileSize)
			}

			if !sub.Done() {
				t.Fatal("Submit returned no result; want a synchronous result")
			}
			if sub.OperationID != "" {
				t.Errorf("OperationID = %q; want none", sub.OperationID)
			}
			res := sub.Result
			if res.Text != tc.want.text {
				t.Errorf("Text = %q; want %q", res.Text, tc.want.text)
			}
			if res.Language != tc.want.language {
				t.Errorf("Language = %q; want %q", res.Language, tc.want.language)
			}
			if fmt.Sprint(res.Segments) != fmt.Sprint(tc.want.segments) {
				t.Errorf("Segments = %v; want %v", res.Segments, tc.want.segments)
			}
			if !bytes.Equal(res.Raw, []byte(tc.body)) {
				t.Errorf("Raw = %q; want the exact body %q", res.Raw, tc.body)
			}
			if res.RawType != tc.want.rawType {
				t.Errorf("RawType = %q; want %q", res.RawType, tc.want.rawType)
			}
		})
	}
}

// Scenario: Provider errors are classified by status
func TestSubmitErrors(t *testing.T) {
	httpDate := func() string { return time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		name        string
		respond     http.HandlerFunc
		wantKind    engine.Kind
		wantStatus  int
		wantRetry   time.Duration
		retryWithin time.Duration // tolerance, for HTTP dates
		wantInMsg   string
	}{
		{
			name:       "400 with openai error",
			respond:    reply(400, "application/json", openAIError("Invalid file format. Supported formats: ['flac', 'mp3']", "invalid_request_error", nil)),
			wantKind:   engine.Rejected,
			wantStatus: 400,
			wantInMsg:  "Invalid file format. Supported formats",
		},
		{
			name:       "400 about response_format is not retried",
			respond:    reply(400, "application/json", openAIError("response_format 'verbose_json' is not compatible with model", "invalid_request_error", "unsupported_value")),
			wantKind:   engine.Rejected,
			wantStatus: 400,
			wantInMsg:  "response_format",
		},
		{
			name:       "401 echoing the key",
			respond:    reply(401, "application/json", openAIError("Incorrect API key provided: "+testKey+". You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")),
			wantKind:   engine.Unauthorized,
			wantStatus: 401,
			wantInMsg:  "Incorrect API key provided",
		},
		{
			name:       "403",
			respond:    reply(403, "application/json", openAIError("You are not allowed to use this model", "permission_error", nil)),
			wantKind:   engine.Unauthorized,
			wantStatus: 403,
			wantInMsg:  "not allowed to use this model",
		},
		{
			name:       "404 without body",
			respond:    reply(404, "", ""),
			wantKind:   engine.Rejected,
			wantStatus: 404,
			wantInMsg:  "not found",
		},
		{
			name:       "413",
			respond:    reply(413, "application/json", openAIError("Maximum content size limit (26214400) exceeded", "invalid_request_error", nil)),
			wantKind:   engine.Rejected,
			wantStatus: 413,
			wantInMsg:  "Maximum content size limit",
		},
		{
			name:       "415",
			respond:    reply(415, "text/plain", "unsupported media type"),
			wantKind:   engine.Rejected,
			wantStatus: 415,
			wantInMsg:  "unsupported media type",
		},
		{
			name:       "422 fastapi detail",
			respond:    reply(422, "application/json", `{"detail":"Unsupported language: xx"}`),
			wantKind:   engine.Rejected,
			wantStatus: 422,
			wantInMsg:  "Unsupported language: xx",
		},
		{
			name:       "429 with Retry-After seconds",
			respond:    reply(429, "application/json", openAIError("Rate limit reached for whisper-1", "requests", "rate_limit_exceeded"), "Retry-After", "7"),
			wantKind:   engine.Unavailable,
			wantStatus: 429,
			wantRetry:  7 * time.Second,
			wantInMsg:  "Rate limit reached",
		},
		{
			name:       "429 with retry-after-ms",
			respond:    reply(429, "application/json", openAIError("Rate limit reached", "requests", "rate_limit_exceeded"), "retry-after-ms", "1500"),
			wantKind:   engine.Unavailable,
			wantStatus: 429,
			wantRetry:  1500 * time.Millisecond,
			wantInMsg:  "Rate limit reached",
		},
		{
			name:       "429 prefers retry-after-ms over Retry-After",
			respond:    reply(429, "application/json", openAIError("Rate limit reached", "requests", "rate_limit_exceeded"), "Retry-After", "2", "retry-after-ms", "1500"),
			wantKind:   engine.Unavailable,
			wantStatus: 429,
			wantRetry:  1500 * time.Millisecond,
		},
		{
			name:       "429 with unreadable retry-after-ms falls back",
			respond:    reply(429, "", "", "Retry-After", "3", "retry-after-ms", "soon"),
			wantKind:   engine.Unavailable,
			wantStatus: 429,
			wantRetry:  3 * time.Second,
			wantInMsg:  "too many requests",
		},
		{
			name: "503 with HTTP-date Retry-After",
			respond: func(w http.ResponseWriter, r *http.Request) {
				reply(503, "application/json", openAIError("The engine is currently overloaded", "server_error", nil), "Retry-After", httpDate())(w, r)
			},
			wantKind:    engine.Unavailable,
			wantStatus:  503,
			wantRetry:   30 * time.Second,
			retryWithin: 2 * time.Second,
			wantInMsg:   "overloaded",
		},
		{
			name:       "500 without header",
			respond:    reply(500, "text/html", "<html>oops</html>"),
			wantKind:   engine.Unavailable,
			wantStatus: 500,
			wantInMsg:  "internal server error",
		},
		{
			name:       "408",
			respond:    reply(408, "", ""),
			wantKind:   engine.Unavailable,
			wantStatus: 408,
		},
		{
			name:       "409",
			respond:    reply(409, "", ""),
			wantKind:   engine.Unavailable,
			wantStatus: 409,
		},
		{
			name:       "redirect is not followed",
			respond:    reply(http.StatusPermanentRedirect, "", "", "Location", "https://elsewhere.example/v1/audio/transcriptions"),
			wantKind:   engine.Rejected,
			wantStatus: 308,
			wantInMsg:  "base URL",
		},
		{
			name:       "malformed json on 200",
			respond:    reply(200, "application/json", `{"text": "unterminated`),
			wantKind:   engine.Unavailable,
			wantStatus: 200,
			wantInMsg:  "malformed response",
		},
		{
			name:       "json without text field",
			respond:    reply(200, "application/json", `{"task":"transcribe","language":"english","duration":1.0}`),
			wantKind:   engine.Unavailable,
			wantStatus: 200,
			wantInMsg:  "malformed response",
		},
		{
			name:       "html page on 200",
			respond:    reply(200, "text/html", "<html>captive portal</html>"),
			wantKind:   engine.Unavailable,
			wantStatus: 200,
			wantInMsg:  "malformed response",
		},
		{
			name: "connection closed before the answer",
			respond: func(w http.ResponseWriter, _ *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close() // hanging up is the answer
				}
			},
			wantKind:  engine.Unreachable,
			wantInMsg: "could not reach the transcription server",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, tc.respond)
			e := newEngine(t, srv.URL+"/v1", testKey)
			path, _ := writeAudio(t, "a.flac", 1024)

			sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "en"})
			if err == nil {
				t.Fatalf("Submit = %+v; want an error", sub)
			}
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("requests = %d; want exactly 1", n)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q contains the API key", err)
			}
			ee, ok := engine.AsError(err)
			if !ok {
				t.Fatalf("error %v (%T) is not an *engine.Error", err, err)
			}
			if ee.Kind != tc.wantKind {
				t.Errorf("Kind = %s; want %s (error: %v)", ee.Kind, tc.wantKind, err)
			}
			if ee.Status != tc.wantStatus {
				t.Errorf("Status = %d; want %d", ee.Status, tc.wantStatus)
			}
			if d := ee.RetryAfter - tc.wantRetry; d < -tc.retryWithin || d > tc.retryWithin {
				t.Errorf("RetryAfter = %v; want %v (±%v)", ee.RetryAfter, tc.wantRetry, tc.retryWithin)
			}
			if !strings.Contains(ee.Message, tc.wantInMsg) {
				t.Errorf("Message = %q; want it to contain %q", ee.Message, tc.wantInMsg)
			}
			if strings.Contains(ee.Message, "Bearer") {
				t.Errorf("Message = %q; want no request header in it", ee.Message)
			}
		})
	}
}

// TestOneRequestPerSubmit guards against hidden retries: the pipeline owns
// the retry schedule, so a second request here would double every wait.
func TestOneRequestPerSubmit(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 408, 409, 413, 415, 422, 425, 429, 500, 502, 503, 504} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := newFakeServer(t, reply(status, "application/json", openAIError("no", "x", nil), "Retry-After", "0"))
			e := newEngine(t, srv.URL, testKey)
			path, _ := writeAudio(t, "a.flac", 512)
			for i := 1; i <= 3; i++ {
				if _, err := e.Submit(context.Background(), engine.Request{AudioPath: path}); err == nil {
					t.Fatalf("Submit #%d: got nil error; want HTTP %d", i, status)
				}
				if n := srv.requests.Load(); n != int32(i) {
					t.Fatalf("after %d Submit calls: requests = %d; want %d", i, n, i)
				}
			}
		})
	}
}

// Scenario: A server that cannot be reached is no_ack
func TestSubmitConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/v1"
	srv.Close()
	e := newEngine(t, base, testKey)
	path, _ := writeAudio(t, "a.flac", 1024)

	_, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	ee, ok := engine.AsError(err)
	if !ok {
		t.Fatalf("error %v (%T); want an *engine.Error", err, err)
	}
	if ee.Kind != engine.Unreachable {
		t.Errorf("Kind = %s; want %s", ee.Kind, engine.Unreachable)
	}
	if ee.Kind.Verdict() {
		t.Error("connection refused classified as permanent; want temporary")
	}
	if ee.Err == nil {
		t.Error("cause not wrapped")
	}
	if !strings.Contains(ee.Message, "could not reach the transcription server") {
		t.Errorf("Message = %q; want it to say the server could not be reached", ee.Message)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q contains the API key", err)
	}
}

func TestSubmitContextEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stop ends the context once the server holds the request.
		stop func(context.Context) (context.Context, func())
		want error
	}{
		{
			name: "cancelled",
			stop: func(ctx context.Context) (context.Context, func()) {
				ctx, cancel := context.WithCancel(ctx)
				return ctx, cancel
			},
			want: context.Canceled,
		},
		{
			name: "deadline",
			stop: func(ctx context.Context) (context.Context, func()) {
				ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				return ctx, func() { <-ctx.Done(); cancel() }
			},
			want: context.DeadlineExceeded,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				select {
				case <-r.Context().Done():
				case <-release:
				}
				reply(200, "application/json", `{"text":"too late"}`)(w, r)
			})
			// Cleanups run last-in first-out: release the handler before
			// the server waits for it to finish.
			t.Cleanup(func() { close(release) })
			e := newEngine(t, srv.URL, testKey)
			path, _ := writeAudio(t, "a.flac", 1024)

			ctx, stop := tc.stop(context.Background())
			go func() {
				<-arrived
				stop()
			}()
			_, err := e.Submit(ctx, engine.Request{AudioPath: path})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v; want errors.Is(err, %v)", err, tc.want)
			}
			if ee, ok := engine.AsError(err); ok {
				t.Errorf("error is an *engine.Error of kind %s; want a plain context error", ee.Kind)
			}
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("requests = %d; want 1", n)
			}
		})
	}
}

func TestSubmitAlreadyCancelledSendsNothing(t *testing.T) {
	srv := newFakeServer(t, reply(200, "application/json", `{"text":"x"}`))
	e := newEngine(t, srv.URL, testKey)
	path, _ := writeAudio(t, "a.flac", 1024)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := e.Submit(ctx, engine.Request{AudioPath: path})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v; want context.Canceled", err)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

// Scenario: A large recording is streamed
func TestSubmitStreamsLargeFile(t *testing.T) {
	const size = 8 << 20
	srv := newFakeServer(t, reply(200, "application/json", `{"text":"long"}`))
	e := newEngine(t, srv.URL, testKey)
	path, sum := writeAudio(t, "long.flac", size)

	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if sub.Result.Text != "long" {
		t.Errorf("Text = %q; want %q", sub.Result.Text, "long")
	}
	got := srv.received()
	if got.fileSize != size || got.fileSum != sum {
		t.Errorf("file: got %d bytes, checksum match %v; want %d bytes intact", got.fileSize, got.fileSum == sum, size)
	}
	// Streamed from disk, the form still announces its length: servers
	// behind proxies that refuse chunked bodies read it, and one that
	// limits the size can refuse at once.
	if got.contentLength <= size || got.contentLength > size+4096 || got.chunked {
		t.Errorf("request Content-Length = %d, chunked %v; want the form's length, a little over %d, not chunked", got.contentLength, got.chunked, size)
	}
}

func TestSubmitResponseTooLarge(t *testing.T) {
	big := `{"text":"` + strings.Repeat("a", 4096) + `"}`
	srv := newFakeServer(t, reply(200, "application/json", big))
	e := newEngine(t, srv.URL, testKey)
	e.http.MaxResponse = 1024
	path, _ := writeAudio(t, "a.flac", 128)

	_, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	ee, ok := engine.AsError(err)
	if !ok || ee.Kind != engine.Unavailable {
		t.Fatalf("error = %v; want an %s engine error", err, engine.Unavailable)
	}
}

func TestSubmitMissingFile(t *testing.T) {
	srv := newFakeServer(t, reply(200, "application/json", `{"text":"x"}`))
	e := newEngine(t, srv.URL, testKey)

	_, err := e.Submit(context.Background(), engine.Request{AudioPath: filepath.Join(t.TempDir(), "missing.flac")})
	if err == nil {
		t.Fatal("Submit of a missing file: got nil error")
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error = %v; want it to wrap os.ErrNotExist", err)
	}
	if ee, ok := engine.AsError(err); ok {
		t.Errorf("error is an *engine.Error of kind %s; want a plain error", ee.Kind)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

func TestProviderMessageIsTruncatedAndScrubbed(t *testing.T) {
	long := "first line\n\tsecond " + testKey + " " + strings.Repeat("x", 1000)
	srv := newFakeServer(t, reply(400, "application/json", openAIError(long, "invalid_request_error", nil)))
	e := newEngine(t, srv.URL, testKey)
	path, _ := writeAudio(t, "a.flac", 128)

	_, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	ee, ok := engine.AsError(err)
	if !ok {
		t.Fatalf("error = %v; want an *engine.Error", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q contains the API key", err)
	}
	if strings.ContainsAny(ee.Message, "\n\t") {
		t.Errorf("Message = %q; want a single line", ee.Message)
	}
	if !strings.Contains(ee.Message, "first line second [redacted]") {
		t.Errorf("Message = %q; want the provider's words with the key redacted", ee.Message)
	}
	if n := len([]rune(ee.Message)); n > 400 {
		t.Errorf("Message has %d characters; want the provider part cut to 300", n)
	}
}

func TestCheckRejects(t *testing.T) {
	e := newEngine(t, "https://api.openai.com/v1", testKey)
	sub, err := e.Check(context.Background(), "op-123")
	if sub.Done() || sub.OperationID != "" {
		t.Errorf("Check returned %+v; want an empty submission", sub)
	}
	ee, ok := engine.AsError(err)
	if !ok {
		t.Fatalf("error = %v; want an *engine.Error", err)
	}
	if ee.Kind != engine.Rejected {
		t.Errorf("Kind = %s; want %s", ee.Kind, engine.Rejected)
	}
}

func TestNormaliseLanguage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"english", "en"}, {"English", "en"}, {"russian", "ru"}, {"german", "de"}, {"french", "fr"},
		{"spanish", "es"}, {"italian", "it"}, {"portuguese", "pt"}, {"ukrainian", "uk"},
		{"chinese", "zh"}, {"japanese", "ja"}, {"en", "en"}, {"RU", "ru"}, {"haw", "haw"},
		{"", ""}, {"klingonese", ""}, {"en-US", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := normaliseLanguage(tc.in); got != tc.want {
				t.Errorf("normaliseLanguage(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestPartNames(t *testing.T) {
	for _, tc := range []struct{ path, wantName, wantType string }{
		{"/tmp/x.flac", "audio.flac", "audio/flac"},
		{"/tmp/x.wav", "audio.wav", "audio/wav"},
		{"/tmp/x.ogg", "audio.ogg", "audio/ogg"},
		{"/tmp/x.oga", "audio.ogg", "audio/ogg"},
		{"/tmp/X.OGA", "audio.ogg", "audio/ogg"},
		{"/tmp/x.mp3", "audio.mp3", "audio/mpeg"},
		{"/tmp/x.m4a", "audio.m4a", "audio/mp4"},
		{"/tmp/x.webm", "audio.webm", "audio/webm"},
		{"/tmp/x", "audio", "application/octet-stream"},
		{`/tmp/x.fl"ac`, "audio", "application/octet-stream"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if got := partFileName(tc.path); got != tc.wantName {
				t.Errorf("partFileName(%q) = %q; want %q", tc.path, got, tc.wantName)
			}
			if got := partContentType(tc.path); got != tc.wantType {
				t.Errorf("partContentType(%q) = %q; want %q", tc.path, got, tc.wantType)
			}
		})
	}
}

// Scenario: The prompt and the upload limits reach the OpenAI-compatible server
func TestPromptAndLimits(t *testing.T) {
	srv := newFakeServer(t, reply(200, "application/json", `{"text":"Kubernetes"}`))
	e, err := New(Config{BaseURL: srv.URL + "/v1", Model: "whisper-1", Prompt: "Kubernetes, Temporal", MaxDuration: 10 * time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Limits(); got.MaxBytes != DefaultMaxUpload || got.MaxDuration != 10*time.Minute {
		t.Errorf("Limits = %+v; want %d bytes (the default) and 10m", got, DefaultMaxUpload)
	}
	path, _ := writeAudio(t, "a.flac", 1024)
	if _, err := e.Submit(context.Background(), engine.Request{AudioPath: path}); err != nil {
		t.Fatal(err)
	}
	if got := srv.received().fields["prompt"]; got != "Kubernetes, Temporal" {
		t.Errorf("prompt = %q; want the configured one", got)
	}
	if _, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Prompt: "Grafana"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.received().fields["prompt"]; got != "Grafana" {
		t.Errorf("prompt = %q; want the job's own", got)
	}

	plain := newEngine(t, srv.URL+"/v1", "")
	if _, err := plain.Submit(context.Background(), engine.Request{AudioPath: path}); err != nil {
		t.Fatal(err)
	}
	if v, ok := srv.received().fields["prompt"]; ok {
		t.Errorf("prompt = %q; want none when neither the job nor the configuration has one", v)
	}
	limited, err := New(Config{BaseURL: srv.URL + "/v1", MaxUploadBytes: 1_000_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := limited.Limits(); got.MaxBytes != 1_000_000 || got.MaxDuration != 0 {
		t.Errorf("Limits = %+v; want 1000000 bytes and no duration limit", got)
	}
	if _, err := New(Config{BaseURL: srv.URL, MaxUploadBytes: -1}, nil); err == nil {
		t.Error("New accepted a negative upload limit")
	}
}

// Scenario: An OpenAI error keeps its code and its raw answer
func TestSubmitErrorKeepsCodeAndRaw(t *testing.T) {
	body := openAIError("Incorrect API key provided: "+testKey+".", "invalid_request_error", "invalid_api_key")
	srv := httptest.NewServer(reply(401, "application/json", body))
	t.Cleanup(srv.Close)
	e := newEngine(t, srv.URL, testKey)
	path, _ := writeAudio(t, "a.wav", 64)
	_, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	ee, ok := engine.AsError(err)
	if !ok {
		t.Fatalf("error %v is not an engine error", err)
	}
	if ee.Code != "invalid_api_key" {
		t.Errorf("Code = %q; want invalid_api_key", ee.Code)
	}
	if string(ee.Raw) != body || ee.RawType != "application/json" {
		t.Errorf("Raw = %s (%s); want the answer as received", ee.Raw, ee.RawType)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q quotes the key", err)
	}
}

// Scenario: The OpenAI-compatible engine asks for word times and speakers and reads them
func TestWordsSpeakersAndTranslation(t *testing.T) {
	const words = `{"task":"transcribe","language":"english","duration":1.2,"text":"go forward",` +
		`"segments":[{"id":0,"seek":0,"start":0.0,"end":1.2,"text":" go forward","tokens":[1],"temperature":0.0,"avg_logprob":-0.2,"compression_ratio":1.0,"no_speech_prob":0.0}],` +
		`"words":[{"word":"go","start":0.0,"end":0.4},{"word":"forward","start":0.5,"end":1.2}],"usage":{"type":"duration","seconds":2}}`
	// diarized_json as OpenAI documents it for gpt-4o-transcribe-diarize.
	const diarized = `{"task":"transcribe","duration":2.5,"text":"Hello. Hi.","segments":[` +
		`{"type":"transcript.text.segment","id":"seg_0","start":0.0,"end":1.1,"text":"Hello.","speaker":"A"},` +
		`{"type":"transcript.text.segment","id":"seg_1","start":1.3,"end":2.5,"text":"Hi.","speaker":"B"}],` +
		`"usage":{"type":"tokens","input_tokens":10,"output_tokens":4,"total_tokens":14}}`
	const translated = `{"task":"translate","language":"english","duration":1.0,"text":"Hello, world.","segments":[]}`
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name       string
		req        engine.Request
		body       string
		diarize    string
		wantPath   string
		wantFields map[string]string
		absent     []string
		wantSegs   []engine.Segment
		wantWords  []engine.Word
		wantLang   string
	}{
		{
			name: "words", req: engine.Request{Language: "en", Temperature: 0.3, Prompt: "Names"}, body: words, diarize: "gpt-4o-transcribe-diarize",
			wantPath:   "/v1/audio/transcriptions",
			wantFields: map[string]string{"model": "whisper-1", "response_format": "verbose_json", "timestamp_granularities[]": "segment,word", "temperature": "0.3", "prompt": "Names"},
			wantSegs:   []engine.Segment{{Start: 0, End: ms(1200), Text: "go forward"}},
			wantWords:  []engine.Word{{Start: 0, End: ms(400), Text: "go"}, {Start: ms(500), End: ms(1200), Text: "forward"}},
			wantLang:   "en",
		},
		{
			name: "speakers", req: engine.Request{Language: "en", Speakers: true, Prompt: "Names"}, body: diarized, diarize: "gpt-4o-transcribe-diarize",
			wantPath:   "/v1/audio/transcriptions",
			wantFields: map[string]string{"model": "gpt-4o-transcribe-diarize", "response_format": "diarized_json", "chunking_strategy": "auto", "language": "en"},
			absent:     []string{"prompt", "timestamp_granularities[]"},
			wantSegs:   []engine.Segment{{Start: 0, End: ms(1100), Text: "Hello.", Speaker: "A"}, {Start: ms(1300), End: ms(2500), Text: "Hi.", Speaker: "B"}},
			wantLang:   "en",
		},
		{
			name: "speakers without a diarize model", req: engine.Request{Speakers: true}, body: words,
			wantPath:   "/v1/audio/transcriptions",
			wantFields: map[string]string{"model": "whisper-1", "response_format": "verbose_json"},
			wantSegs:   []engine.Segment{{Start: 0, End: ms(1200), Text: "go forward"}},
			wantWords:  []engine.Word{{Start: 0, End: ms(400), Text: "go"}, {Start: ms(500), End: ms(1200), Text: "forward"}},
			wantLang:   "en",
		},
		{
			name: "translation", req: engine.Request{Language: "ru", Translate: true, Speakers: true}, body: translated, diarize: "gpt-4o-transcribe-diarize",
			wantPath:   "/v1/audio/translations",
			wantFields: map[string]string{"model": "whisper-1", "response_format": "verbose_json"},
			absent:     []string{"language", "timestamp_granularities[]", "chunking_strategy"},
			wantLang:   "en",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, reply(http.StatusOK, "application/json", tc.body))
			e, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "whisper-1", DiarizeModel: tc.diarize}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !e.Translates() {
				t.Error("Translates() = false")
			}
			path, _ := writeAudio(t, "a.flac", 1024)
			tc.req.AudioPath = path
			sub, err := e.Submit(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got := srv.received()
			if got.path != tc.wantPath {
				t.Errorf("path = %s; want %s", got.path, tc.wantPath)
			}
			for k, v := range tc.wantFields {
				if got.fields[k] != v {
					t.Errorf("field %s = %q; want %q (all: %v)", k, got.fields[k], v, got.fields)
				}
			}
			for _, k := range tc.absent {
				if v, ok := got.fields[k]; ok {
					t.Errorf("field %s = %q; want it absent", k, v)
				}
			}
			res := sub.Result
			if fmt.Sprint(res.Segments) != fmt.Sprint(tc.wantSegs) || fmt.Sprint(res.Words) != fmt.Sprint(tc.wantWords) || res.Language != tc.wantLang {
				t.Errorf("result segments %v words %v language %q; want %v, %v, %q", res.Segments, res.Words, res.Language, tc.wantSegs, tc.wantWords, tc.wantLang)
			}
		})
	}
}

func TestTakesAsIsWhatOpenAIDocuments(t *testing.T) {
	for _, tc := range []struct {
		info audio.Info
		want bool
	}{
		{audio.Info{Container: "ogg", Codec: "opus"}, true},
		{audio.Info{Container: "mov,mp4,m4a,3gp,3g2,mj2", Codec: "aac"}, true},
		{audio.Info{Container: "mov,mp4,m4a,3gp,3g2,mj2", Codec: "aac", Video: true}, false},
		{audio.Info{Container: "matroska,webm", Codec: "opus"}, true},
		{audio.Info{Container: "asf", Codec: "wmav2"}, false},
		{audio.Info{Container: "amr", Codec: "amr_nb"}, false},
	} {
		if got := newEngine(t, "http://127.0.0.1:1/v1", "").TakesAsIs(tc.info); got != tc.want {
			t.Errorf("TakesAsIs(%+v) = %v; want %v", tc.info, got, tc.want)
		}
	}
	e, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", AlwaysConvert: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.TakesAsIs(audio.Info{Container: "ogg", Codec: "opus"}) {
		t.Error("with AlwaysConvert the engine takes a voice note as it is; want every recording converted")
	}
}

func TestSubmitSendsTheMediaTypeItIsGiven(t *testing.T) {
	srv := newFakeServer(t, reply(http.StatusOK, "application/json", `{"text":"hi"}`))
	path, _ := writeAudio(t, "audio.m4a", 100)
	if _, err := newEngine(t, srv.URL+"/v1", "").Submit(context.Background(), engine.Request{AudioPath: path, MIME: "audio/x-m4a"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.received(); got.fileName != "audio.m4a" || got.fileType != "audio/x-m4a" {
		t.Errorf("file part %q, %q; want audio.m4a, audio/x-m4a", got.fileName, got.fileType)
	}
}
