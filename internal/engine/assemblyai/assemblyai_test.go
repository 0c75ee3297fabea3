package assemblyai

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/assemblyai/assemblyaitest"
)

// testKey is distinctive so that any leak into an error string is found.
const testKey = "aai-9f8e7d6c5b4a-DO-NOT-LEAK"

// foxWords are words as AssemblyAI reports them, times in milliseconds.
var foxWords = []assemblyaitest.Word{
	{Text: "The", Start: 250, End: 400, Confidence: 0.99},
	{Text: "quick", Start: 420, End: 700, Confidence: 0.98},
	{Text: "brown", Start: 720, End: 1000, Confidence: 0.97},
	{Text: "fox.", Start: 1020, End: 1500, Confidence: 0.96},
	{Text: "Jumps", Start: 1600, End: 1900, Confidence: 0.95},
	{Text: "over", Start: 1950, End: 2200, Confidence: 0.94},
	// A pause of 1.3 s ends the segment without punctuation.
	{Text: "the", Start: 3500, End: 3600, Confidence: 0.93},
	{Text: "lazy", Start: 3650, End: 3900, Confidence: 0.92},
	{Text: "dog!", Start: 3950, End: 4321, Confidence: 0.91},
}

var foxSegments = []engine.Segment{
	{Start: 250 * time.Millisecond, End: 1500 * time.Millisecond, Text: "The quick brown fox."},
	{Start: 1600 * time.Millisecond, End: 2200 * time.Millisecond, Text: "Jumps over"},
	{Start: 3500 * time.Millisecond, End: 4321 * time.Millisecond, Text: "the lazy dog!"},
}

const foxText = "The quick brown fox. Jumps over the lazy dog!"

// writeAudio writes size bytes of a fixed pattern; the stand-in does not
// decode audio, it only checks that the bytes arrive intact.
func writeAudio(t *testing.T, name string, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

func newEngine(t *testing.T, baseURL string) *Engine {
	t.Helper()
	e, err := New(Config{BaseURL: baseURL, APIKey: testKey, PollInterval: time.Second}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// poll checks until the operation ends, at most limit times.
func poll(t *testing.T, e *Engine, id string, limit int) (engine.Submission, int, error) {
	t.Helper()
	for i := 1; i <= limit; i++ {
		sub, err := e.Check(context.Background(), id)
		if err != nil || sub.Done() {
			return sub, i, err
		}
		if sub.OperationID != id {
			t.Fatalf("check %d: OperationID = %q; want %q", i, sub.OperationID, id)
		}
	}
	return engine.Submission{OperationID: id}, limit, nil
}

// rawTranscript fetches the transcript directly: a finished transcript of
// the stand-in answers the same bytes every time.
func rawTranscript(t *testing.T, base, id string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v2/transcript/"+id, nil)
	req.Header.Set("Authorization", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func asEngineError(t *testing.T, err error) *engine.Error {
	t.Helper()
	if err == nil {
		t.Fatal("got nil error; want an *engine.Error")
	}
	ee, ok := engine.AsError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *engine.Error", err, err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q contains the API key", err)
	}
	return ee
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name, baseURL, key string
		poll               time.Duration
		wantErr            bool
		wantUpload         string
		wantPoll           time.Duration
	}{
		{"default base", "", testKey, 0, false, "https://api.assemblyai.com/v2/upload", 5 * time.Second},
		{"eu base", "https://api.eu.assemblyai.com", testKey, 3 * time.Second, false, "https://api.eu.assemblyai.com/v2/upload", 3 * time.Second},
		{"trailing slash", "http://localhost:8080/", testKey, -time.Second, false, "http://localhost:8080/v2/upload", 5 * time.Second},
		{"proxy path", "http://proxy/aai/", testKey, 0, false, "http://proxy/aai/v2/upload", 5 * time.Second},
		{"no key", "https://api.assemblyai.com", "", 0, true, "", 0},
		{"blank key", "https://api.assemblyai.com", "  \t", 0, true, "", 0},
		{"key with a newline", "https://api.assemblyai.com", "abc\ndef", 0, true, "", 0},
		{"relative", "aai.example.com/v2", testKey, 0, true, "", 0},
		{"other scheme", "ftp://api.assemblyai.com", testKey, 0, true, "", 0},
		{"no host", "https:///v2", testKey, 0, true, "", 0},
		{"unparsable with secret", "http://user:s3cr3t@[::1", testKey, 0, true, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Config{BaseURL: tc.baseURL, APIKey: tc.key, PollInterval: tc.poll}, nil)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("New = nil error; want an error")
				}
				if tc.baseURL != "" && strings.Contains(err.Error(), tc.baseURL) || strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error %q repeats the base URL", err)
				}
				if tc.key != "" && strings.Contains(err.Error(), tc.key) {
					t.Errorf("error %q repeats the key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if e.uploadURL != tc.wantUpload {
				t.Errorf("upload URL = %q; want %q", e.uploadURL, tc.wantUpload)
			}
			if e.transcriptURL != strings.TrimSuffix(tc.wantUpload, "upload")+"transcript" {
				t.Errorf("transcript URL = %q", e.transcriptURL)
			}
			if got := e.PollInterval(); got != tc.wantPoll {
				t.Errorf("PollInterval() = %v; want %v", got, tc.wantPoll)
			}
			if e.http.HTTP == nil || e.http.HTTP.Timeout != 0 || e.http.HTTP.CheckRedirect == nil {
				t.Errorf("client = %+v; want one without overall timeout that does not follow redirects", e.http.HTTP)
			}
		})
	}
}

func TestNewDoesNotChangeCallersClient(t *testing.T) {
	client := &http.Client{Timeout: time.Minute}
	e, err := New(Config{APIKey: testKey}, client)
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
	e := newEngine(t, "")
	if got := e.Name(); got != "assemblyai" {
		t.Errorf("Name() = %q; want %q", got, "assemblyai")
	}
	if got := e.Format(); got.Name != audio.FLAC16kMono.Name || got.Ext != ".flac" {
		t.Errorf("Format() = %+v; want FLAC16kMono", got)
	}
}

// Scenario: AssemblyAI is uploaded to, asked, and polled
func TestSubmitAndPoll(t *testing.T) {
	for _, tc := range []struct {
		name         string
		language     string
		trailSlash   bool
		polls        int
		resultText   string
		resultLang   string
		words        []assemblyaitest.Word
		wantCode     string // language_code sent; empty means language_detection
		wantText     string
		wantLanguage string
		wantSegments []engine.Segment
	}{
		{
			name: "language detected", language: "", polls: 2,
			resultText: "  " + foxText + " ", resultLang: "en_us", words: foxWords,
			wantText: foxText, wantLanguage: "en", wantSegments: foxSegments,
		},
		{
			name: "language given", language: "ru", polls: 0,
			resultText: "Привет, мир.", words: []assemblyaitest.Word{{Text: "Привет,", Start: 0, End: 500}, {Text: "мир.", Start: 600, End: 1100}},
			wantCode: "ru", wantText: "Привет, мир.", wantLanguage: "ru",
			wantSegments: []engine.Segment{{Start: 0, End: 1100 * time.Millisecond, Text: "Привет, мир."}},
		},
		{
			name: "BCP 47 tag sent as its primary subtag", language: "en-GB", polls: 1,
			resultText: "Hello.", resultLang: "en_uk", words: []assemblyaitest.Word{{Text: "Hello.", Start: 10, End: 20}},
			wantCode: "en", wantText: "Hello.", wantLanguage: "en",
			wantSegments: []engine.Segment{{Start: 10 * time.Millisecond, End: 20 * time.Millisecond, Text: "Hello."}},
		},
		{
			name: "base URL with trailing slash", language: "de", trailSlash: true, polls: 3,
			resultText: "Hallo", words: []assemblyaitest.Word{{Text: "Hallo", Start: 5, End: 300}},
			wantCode: "de", wantText: "Hallo", wantLanguage: "de",
			wantSegments: []engine.Segment{{Start: 5 * time.Millisecond, End: 300 * time.Millisecond, Text: "Hallo"}},
		},
		{
			name: "silence", language: "", polls: 0,
			resultText: "", resultLang: "en",
			wantText: "", wantLanguage: "en",
		},
		{
			name: "text without words has no segments", language: "fr", polls: 0,
			resultText: "Bonjour.",
			wantCode:   "fr", wantText: "Bonjour.", wantLanguage: "fr",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := assemblyaitest.New(t, testKey)
			srv.SetProcessingPolls(tc.polls)
			srv.SetResult(tc.resultText, tc.resultLang, tc.words)
			base := srv.URL()
			if tc.trailSlash {
				base += "/"
			}
			e := newEngine(t, base)
			path, data := writeAudio(t, "normalised.flac", 4096)

			sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: tc.language})
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if sub.Done() || sub.OperationID == "" {
				t.Fatalf("Submit = %+v; want a pending operation", sub)
			}
			if got := srv.Requests(); got != 2 {
				t.Errorf("requests after Submit = %d; want 2 (upload, create)", got)
			}
			uploads := srv.Uploads()
			if len(uploads) != 1 || !bytes.Equal(uploads[0], data) {
				t.Errorf("uploads = %d; want the %d bytes of the file once, intact", len(uploads), len(data))
			}
			created := srv.Created()
			if len(created) != 1 {
				t.Fatalf("created = %v; want one transcript request", created)
			}
			body := created[0]
			if u, _ := body["audio_url"].(string); !strings.HasPrefix(u, srv.URL()+"/cdn/upload/") {
				t.Errorf("audio_url = %v; want the upload URL", body["audio_url"])
			}
			if body["punctuate"] != true || body["format_text"] != true {
				t.Errorf("punctuate = %v, format_text = %v; want true, true", body["punctuate"], body["format_text"])
			}
			if tc.wantCode == "" {
				if body["language_detection"] != true {
					t.Errorf("language_detection = %v; want true", body["language_detection"])
				}
				if v, ok := body["language_code"]; ok {
					t.Errorf("language_code = %v; want it absent", v)
				}
			} else {
				if body["language_code"] != tc.wantCode {
					t.Errorf("language_code = %v; want %q", body["language_code"], tc.wantCode)
				}
				if v, ok := body["language_detection"]; ok {
					t.Errorf("language_detection = %v; want it absent", v)
				}
			}

			done, checks, err := poll(t, e, sub.OperationID, 20)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if !done.Done() {
				t.Fatal("transcript never completed")
			}
			if want := tc.polls + 2; checks != want {
				t.Errorf("checks until done = %d; want %d (queued, %d× processing, completed)", checks, want, tc.polls)
			}
			res := done.Result
			if res.Text != tc.wantText {
				t.Errorf("Text = %q; want %q", res.Text, tc.wantText)
			}
			if res.Language != tc.wantLanguage {
				t.Errorf("Language = %q; want %q", res.Language, tc.wantLanguage)
			}
			if fmt.Sprint(res.Segments) != fmt.Sprint(tc.wantSegments) {
				t.Errorf("Segments = %v; want %v", res.Segments, tc.wantSegments)
			}
			if raw := rawTranscript(t, srv.URL(), sub.OperationID); !bytes.Equal(res.Raw, raw) {
				t.Errorf("Raw = %s; want the exact body %s", res.Raw, raw)
			}
			if res.RawType != "application/json" {
				t.Errorf("RawType = %q; want application/json", res.RawType)
			}
		})
	}
}

// Scenario: AssemblyAI words become timed segments
func TestSegments(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	seg := func(start, end time.Duration, text string) engine.Segment {
		return engine.Segment{Start: start, End: end, Text: text}
	}
	for _, tc := range []struct {
		name  string
		words []word
		want  []engine.Segment
	}{
		{"none", nil, nil},
		{
			"sentence ends",
			[]word{{Text: "Yes?", Start: 0, End: 100}, {Text: "No!", Start: 200, End: 300}, {Text: "Well…", Start: 400, End: 500}, {Text: "ok", Start: 600, End: 700}},
			[]engine.Segment{seg(0, ms(100), "Yes?"), seg(ms(200), ms(300), "No!"), seg(ms(400), ms(500), "Well…"), seg(ms(600), ms(700), "ok")},
		},
		{
			"closing quote after the full stop",
			[]word{{Text: `"Go.”`, Start: 0, End: 100}, {Text: "Then", Start: 200, End: 300}},
			[]engine.Segment{seg(0, ms(100), `"Go.”`), seg(ms(200), ms(300), "Then")},
		},
		{
			"a pause of exactly one second keeps the segment",
			[]word{{Text: "a", Start: 0, End: 100}, {Text: "b", Start: 1100, End: 1200}, {Text: "c", Start: 2201, End: 2300}},
			[]engine.Segment{seg(0, ms(1200), "a b"), seg(ms(2201), ms(2300), "c")},
		},
		{
			"long speech is cut at 15 seconds",
			func() []word {
				var ws []word
				for i := range 40 {
					ws = append(ws, word{Text: fmt.Sprint(i), Start: float64(i * 500), End: float64(i*500 + 400)})
				}
				return ws
			}(),
			[]engine.Segment{
				seg(0, ms(14900), "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29"),
				seg(ms(15000), ms(19900), "30 31 32 33 34 35 36 37 38 39"),
			},
		},
		{
			"a single word longer than the limit",
			[]word{{Text: "aaa", Start: 0, End: 100}, {Text: "mmm", Start: 200, End: 20000}, {Text: "b", Start: 20100, End: 20200}},
			[]engine.Segment{seg(0, ms(100), "aaa"), seg(ms(200), ms(20000), "mmm"), seg(ms(20100), ms(20200), "b")},
		},
		{
			"blank words are skipped, odd times tolerated",
			[]word{{Text: " ", Start: 0, End: 10}, {Text: "x", Start: -5, End: -1}, {Text: "y.", Start: 30.4, End: 20}},
			[]engine.Segment{seg(0, ms(30), "x y.")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := segments(tc.words); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("segments = %v; want %v", got, tc.want)
			}
		})
	}
}

// Scenario: An AssemblyAI transcript that errors is a failed operation
func TestOperationFails(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	srv.FailWith("Transcoding failed. File does not appear to contain audio. key=" + testKey)
	e := newEngine(t, srv.URL())
	path, _ := writeAudio(t, "a.flac", 256)

	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	_, checks, err := poll(t, e, sub.OperationID, 10)
	ee := asEngineError(t, err)
	if ee.Kind != engine.OperationFailed {
		t.Errorf("Kind = %s; want %s", ee.Kind, engine.OperationFailed)
	}
	if !strings.Contains(ee.Message, "File does not appear to contain audio") {
		t.Errorf("Message = %q; want the service's reason", ee.Message)
	}
	if checks != 4 {
		t.Errorf("checks = %d; want 4", checks)
	}
	// The words are AssemblyAI's only name for the error, and the
	// transcript it answered is kept as the failure's raw answer.
	if want := "Transcoding failed. File does not appear to contain audio. key=[redacted]"; ee.Code != want {
		t.Errorf("Code = %q; want %q", ee.Code, want)
	}
	if !strings.Contains(string(ee.Raw), `"status":"error"`) || !strings.Contains(string(ee.Raw), sub.OperationID) || ee.RawType == "" {
		t.Errorf("Raw = %s (%s); want the errored transcript", ee.Raw, ee.RawType)
	}
}

// Scenario: An AssemblyAI transcript that never finishes stays running
func TestNeverFinishes(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	srv.NeverFinish()
	e := newEngine(t, srv.URL())
	path, _ := writeAudio(t, "a.flac", 256)

	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "en"})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	got, checks, err := poll(t, e, sub.OperationID, 50)
	if err != nil || got.Done() {
		t.Fatalf("after %d checks: %+v, %v; want still running", checks, got, err)
	}
	if n := srv.Checks(); n != 50 {
		t.Errorf("Checks() = %d; want 50", n)
	}
}

// Scenario: AssemblyAI errors are classified by status
func TestErrors(t *testing.T) {
	httpDate := func() string { return time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat) }
	aaiError := func(msg string) string { return fmt.Sprintf(`{"error":%q}`, msg) }
	type fail struct {
		path, body, retryAfter string
		status                 int
	}
	for _, tc := range []struct {
		name string
		// key overrides the engine's key; the stand-in only knows testKey.
		key  string
		fail *fail
		// atCheck injects the failure after a successful Submit.
		atCheck      bool
		wantKind     engine.Kind
		wantStatus   int
		wantRetry    time.Duration
		retryWithin  time.Duration
		wantInMsg    string
		wantRequests int
	}{
		{name: "wrong key", key: "aai-wrong-key", wantKind: engine.Unauthorized, wantStatus: 401, wantInMsg: "Authentication error", wantRequests: 1},
		{name: "403 on upload", fail: &fail{"/v2/upload", aaiError("Your account is disabled"), "", 403}, wantKind: engine.Unauthorized, wantStatus: 403, wantInMsg: "account is disabled", wantRequests: 1},
		{name: "401 echoing the key", fail: &fail{"/v2/upload", aaiError("Invalid API key " + testKey), "", 401}, wantKind: engine.Unauthorized, wantStatus: 401, wantInMsg: "Invalid API key [redacted]", wantRequests: 1},
		{name: "400 on upload", fail: &fail{"/v2/upload", aaiError("Upload failed"), "", 400}, wantKind: engine.Rejected, wantStatus: 400, wantInMsg: "rejected the upload: Upload failed", wantRequests: 1},
		{name: "413 on upload", fail: &fail{"/v2/upload", aaiError("File too large"), "", 413}, wantKind: engine.Rejected, wantStatus: 413, wantInMsg: "File too large", wantRequests: 1},
		{name: "422 on create", fail: &fail{"/v2/transcript", aaiError("language_code is not supported"), "", 422}, wantKind: engine.Rejected, wantStatus: 422, wantInMsg: "rejected the transcript request: language_code", wantRequests: 2},
		{name: "429 with Retry-After", fail: &fail{"/v2/upload", aaiError("Too many requests"), "7", 429}, wantKind: engine.Unavailable, wantStatus: 429, wantRetry: 7 * time.Second, wantInMsg: "Too many requests", wantRequests: 1},
		{name: "429 on create without body", fail: &fail{"/v2/transcript", "", "", 429}, wantKind: engine.Unavailable, wantStatus: 429, wantInMsg: "too many requests", wantRequests: 2},
		{name: "500 html", fail: &fail{"/v2/upload", "<html>oops</html>", "", 500}, wantKind: engine.Unavailable, wantStatus: 500, wantInMsg: "internal server error", wantRequests: 1},
		{name: "503 with HTTP date", fail: &fail{"/v2/transcript", aaiError("Service unavailable"), "DATE", 503}, wantKind: engine.Unavailable, wantStatus: 503, wantRetry: 30 * time.Second, retryWithin: 2 * time.Second, wantInMsg: "Service unavailable", wantRequests: 2},
		{name: "502 on check", atCheck: true, fail: &fail{"/v2/transcript", "bad gateway", "", 502}, wantKind: engine.Unavailable, wantStatus: 502, wantInMsg: "bad gateway", wantRequests: 3},
		{name: "429 on check", atCheck: true, fail: &fail{"/v2/transcript", aaiError("slow down"), "12", 429}, wantKind: engine.Unavailable, wantStatus: 429, wantRetry: 12 * time.Second, wantInMsg: "slow down", wantRequests: 3},
		{name: "408", fail: &fail{"/v2/upload", "", "", 408}, wantKind: engine.Unavailable, wantStatus: 408, wantRequests: 1},
		{name: "409", fail: &fail{"/v2/transcript", "", "", 409}, wantKind: engine.Unavailable, wantStatus: 409, wantRequests: 2},
		{name: "404 on check", atCheck: true, fail: &fail{"/v2/transcript", aaiError("Transcript not found"), "", 404}, wantKind: engine.Rejected, wantStatus: 404, wantInMsg: "no such transcript: Transcript not found", wantRequests: 3},
		{name: "redirect not followed", fail: &fail{"/v2/upload", "", "", 308}, wantKind: engine.Rejected, wantStatus: 308, wantInMsg: "base URL", wantRequests: 1},
		{name: "malformed JSON on upload", fail: &fail{"/v2/upload", `{"upload_url": "http`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 1},
		{name: "missing upload_url", fail: &fail{"/v2/upload", `{}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 1},
		{name: "relative upload_url", fail: &fail{"/v2/upload", `{"upload_url":"/cdn/x"}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 1},
		{name: "malformed JSON on create", fail: &fail{"/v2/transcript", `{"id": "abc", "status":`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 2},
		{name: "missing id", fail: &fail{"/v2/transcript", `{"status":"queued","text":null}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 2},
		{name: "id that is not an id", fail: &fail{"/v2/transcript", `{"id":"../../v2/upload","status":"queued"}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 2},
		{name: "unknown status on create", fail: &fail{"/v2/transcript", `{"id":"abc","status":"thinking"}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: `unknown transcript status "thinking"`, wantRequests: 2},
		{name: "error status on create", fail: &fail{"/v2/transcript", `{"id":"abc","status":"error","error":"Download error"}`, "", 200}, wantKind: engine.OperationFailed, wantInMsg: "Download error", wantRequests: 2},
		{name: "malformed JSON on check", atCheck: true, fail: &fail{"/v2/transcript", `<html>captive portal</html>`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 3},
		{name: "no status on check", atCheck: true, fail: &fail{"/v2/transcript", `{"id":"abc"}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 3},
		{name: "unknown status on check", atCheck: true, fail: &fail{"/v2/transcript", `{"id":"abc","status":"Completed"}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 3},
		{name: "error status with the key", atCheck: true, fail: &fail{"/v2/transcript", `{"id":"abc","status":"error","error":"bad key ` + testKey + `"}`, "", 200}, wantKind: engine.OperationFailed, wantInMsg: "bad key [redacted]", wantRequests: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := assemblyaitest.New(t, testKey)
			key := testKey
			if tc.key != "" {
				key = tc.key
			}
			e, err := New(Config{BaseURL: srv.URL(), APIKey: key}, nil)
			if err != nil {
				t.Fatal(err)
			}
			path, _ := writeAudio(t, "a.flac", 1024)
			inject := func() {
				if f := tc.fail; f != nil {
					ra := f.retryAfter
					if ra == "DATE" {
						ra = httpDate()
					}
					srv.FailNext(f.path, 1, f.status, f.body, ra)
				}
			}

			var sub engine.Submission
			if tc.atCheck {
				pending, serr := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "en"})
				if serr != nil {
					t.Fatalf("Submit: %v", serr)
				}
				inject()
				sub, err = e.Check(context.Background(), pending.OperationID)
			} else {
				inject()
				sub, err = e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "en"})
			}
			if err == nil {
				t.Fatalf("got %+v; want an error", sub)
			}
			if sub.Done() || sub.OperationID != "" {
				t.Errorf("submission = %+v; want an empty one with the error", sub)
			}
			ee := asEngineError(t, err)
			if strings.Contains(err.Error(), key) {
				t.Errorf("error %q contains the API key", err)
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
			if n := srv.Requests(); n != tc.wantRequests {
				t.Errorf("requests = %d; want %d", n, tc.wantRequests)
			}
		})
	}
}

// TestCompletedOnCreate covers a service that finishes before answering.
func TestCompletedOnCreate(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	body := `{"id":"abc","status":"completed","text":" Hi. ","language_code":null,"words":[{"text":"Hi.","start":1,"end":2,"confidence":1}]}`
	srv.FailNext("/v2/transcript", 1, 200, body, "")
	e := newEngine(t, srv.URL())
	path, _ := writeAudio(t, "a.flac", 64)

	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "pt-BR"})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if !sub.Done() {
		t.Fatalf("Submit = %+v; want a result", sub)
	}
	if sub.Result.Text != "Hi." || sub.Result.Language != "pt" || string(sub.Result.Raw) != body || len(sub.Result.Segments) != 1 {
		t.Errorf("Result = %+v; want text Hi., the requested language pt, the raw body and one segment", sub.Result)
	}
}

func TestNullTextIsSilence(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	e := newEngine(t, srv.URL())
	body := "{\"id\":\"abc\",\"status\":\"completed\",\"text\":null,\"words\":null,\"language_code\":\"en_us\"}\n"
	srv.FailNext("/v2/transcript/abc", 1, 200, body, "")

	sub, err := e.Check(context.Background(), "abc")
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !sub.Done() || sub.Result.Text != "" || sub.Result.Segments != nil || sub.Result.Language != "en" {
		t.Errorf("Check = %+v; want an empty English result", sub.Result)
	}
	if string(sub.Result.Raw) != body || sub.Result.RawType != "application/json" {
		t.Errorf("Raw = %q (%s); want the exact body %q", sub.Result.Raw, sub.Result.RawType, body)
	}
}

func TestCheckUnknownTranscript(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	e := newEngine(t, srv.URL())
	_, err := e.Check(context.Background(), "5551722-f677-48a6-9287-39c0aafd9ac1")
	ee := asEngineError(t, err)
	if ee.Kind != engine.Rejected || ee.Status != 404 {
		t.Errorf("error = %v (%s); want %s with HTTP 404", err, ee.Kind, engine.Rejected)
	}
	if !strings.Contains(ee.Message, "Transcript not found") {
		t.Errorf("Message = %q; want the service's words", ee.Message)
	}
}

func TestCheckRefusesBadIDs(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	e := newEngine(t, srv.URL())
	for _, id := range []string{"", "..", "a/b", "a?b", "a b", strings.Repeat("a", 200)} {
		_, err := e.Check(context.Background(), id)
		if ee := asEngineError(t, err); ee.Kind != engine.Rejected {
			t.Errorf("Check(%q): Kind = %s; want %s", id, ee.Kind, engine.Rejected)
		}
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

// Scenario: An unreachable AssemblyAI is no_ack
func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	e := newEngine(t, base)
	path, _ := writeAudio(t, "a.flac", 1024)

	_, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	ee := asEngineError(t, err)
	if ee.Kind != engine.Unreachable || ee.Err == nil {
		t.Errorf("Submit: Kind = %s, cause %v; want %s with the cause", ee.Kind, ee.Err, engine.Unreachable)
	}
	if !strings.Contains(ee.Message, "could not reach AssemblyAI") {
		t.Errorf("Message = %q", ee.Message)
	}
	_, err = e.Check(context.Background(), "abc")
	if ee := asEngineError(t, err); ee.Kind != engine.Unreachable {
		t.Errorf("Check: Kind = %s; want %s", ee.Kind, engine.Unreachable)
	}
}

func TestConnectionClosedBeforeAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close() // hanging up is the answer
		}
	}))
	t.Cleanup(srv.Close)
	e := newEngine(t, srv.URL)
	_, err := e.Check(context.Background(), "abc")
	if ee := asEngineError(t, err); ee.Kind != engine.Unreachable {
		t.Errorf("Kind = %s; want %s", ee.Kind, engine.Unreachable)
	}
}

// Scenario: A cancelled AssemblyAI upload stops at once
func TestContextEndsMidUpload(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(context.Context) (context.Context, func())
		want error
	}{
		{"cancelled", func(ctx context.Context) (context.Context, func()) {
			return context.WithCancel(ctx)
		}, context.Canceled},
		{"deadline", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			return ctx, func() { <-ctx.Done(); cancel() }
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var requests atomic.Int32
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			// A slow service: it reads a little of the upload, then stalls.
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				_, _ = io.ReadFull(r.Body, make([]byte, 1024)) // how much arrives is not the point; the stall is
				arrived <- struct{}{}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			e := newEngine(t, srv.URL)
			path, _ := writeAudio(t, "a.flac", 4<<20)

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
			if n := requests.Load(); n != 1 {
				t.Errorf("requests = %d; want 1", n)
			}
		})
	}
}

func TestContextAlreadyCancelled(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	e := newEngine(t, srv.URL())
	path, _ := writeAudio(t, "a.flac", 1024)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if _, err := e.Submit(ctx, engine.Request{AudioPath: path}); !errors.Is(err, context.Canceled) {
		t.Errorf("Submit: error = %v; want context.Canceled", err)
	}
	if _, err := e.Check(ctx, "abc"); !errors.Is(err, context.Canceled) {
		t.Errorf("Check: error = %v; want context.Canceled", err)
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

// Scenario: A large recording is streamed to AssemblyAI
func TestLargeFileStreamed(t *testing.T) {
	const size = 8 << 20
	var contentLength atomic.Int64
	srv := assemblyaitest.New(t, testKey)
	// A front records what the transport announced, then forwards.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/upload" {
			contentLength.Store(r.ContentLength)
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, srv.URL()+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		if _, err := io.Copy(w, resp.Body); err != nil {
			t.Errorf("forward the answer: %v", err)
		}
	}))
	t.Cleanup(front.Close)
	e := newEngine(t, front.URL)
	path, data := writeAudio(t, "long.flac", size)

	if _, err := e.Submit(context.Background(), engine.Request{AudioPath: path}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	uploads := srv.Uploads()
	if len(uploads) != 1 || sha256.Sum256(uploads[0]) != sha256.Sum256(data) {
		t.Errorf("upload: %d bodies; want the %d bytes intact", len(uploads), size)
	}
	if got := contentLength.Load(); got != size {
		t.Errorf("Content-Length = %d; want %d", got, size)
	}
}

func TestResponseTooLarge(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	e := newEngine(t, srv.URL())
	e.http.MaxResponse = 1024
	srv.FailNext("/v2/transcript/abc", 1, 200, `{"id":"abc","status":"completed","text":"`+strings.Repeat("a", 4096)+`"}`, "")
	_, err := e.Check(context.Background(), "abc")
	if ee := asEngineError(t, err); ee.Kind != engine.Unavailable || !strings.Contains(ee.Message, "malformed response") {
		t.Errorf("error = %v; want an %s malformed response", err, engine.Unavailable)
	}
}

func TestMissingFile(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	e := newEngine(t, srv.URL())
	_, err := e.Submit(context.Background(), engine.Request{AudioPath: filepath.Join(t.TempDir(), "missing.flac")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error = %v; want it to wrap os.ErrNotExist", err)
	}
	if ee, ok := engine.AsError(err); ok {
		t.Errorf("error is an *engine.Error of kind %s; want a plain error", ee.Kind)
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

func TestProviderMessageIsTruncatedAndScrubbed(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	long := "first line\n\tsecond " + testKey + " " + strings.Repeat("x", 1000)
	srv.FailNext("/v2/upload", 1, 400, fmt.Sprintf(`{"error":%q}`, long), "")
	e := newEngine(t, srv.URL())
	path, _ := writeAudio(t, "a.flac", 128)

	_, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	ee := asEngineError(t, err)
	if strings.ContainsAny(ee.Message, "\n\t") {
		t.Errorf("Message = %q; want a single line", ee.Message)
	}
	if !strings.Contains(ee.Message, "first line second [redacted]") {
		t.Errorf("Message = %q; want the service's words with the key redacted", ee.Message)
	}
	if n := len([]rune(ee.Message)); n > 400 {
		t.Errorf("Message has %d characters; want the service's part cut to 300", n)
	}
}

// TestRequestsCarryTheKey checks the header the real service wants: the
// bare key, no "Bearer".
func TestRequestsCarryTheKey(t *testing.T) {
	var (
		mu    sync.Mutex
		auths []string
	)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		if ct := r.Header.Get("Content-Type"); r.URL.Path == "/v2/upload" && ct != "application/octet-stream" {
			t.Errorf("upload Content-Type = %q; want application/octet-stream", ct)
		}
		http.Error(w, `{"error":"stop"}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(front.Close)
	e := newEngine(t, front.URL)
	path, _ := writeAudio(t, "a.flac", 16)
	// Both fail on the 503; only the headers they sent matter here.
	_, _ = e.Submit(context.Background(), engine.Request{AudioPath: path})
	_, _ = e.Check(context.Background(), "abc")
	mu.Lock()
	defer mu.Unlock()
	if len(auths) != 2 || auths[0] != testKey || auths[1] != testKey {
		t.Errorf("Authorization headers = %q; want the bare key on both requests", auths)
	}
}

func TestNormaliseLanguage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"en_us", "en"}, {"en_uk", "en"}, {"EN", "en"}, {"pt-BR", "pt"}, {"zh", "zh"}, {"haw", "haw"},
		{"", ""}, {"english", ""}, {"1x", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			code := tc.in
			res := transcript{Status: "completed", LanguageCode: &code}.result(nil, "")
			if res.Language != tc.want {
				t.Errorf("language_code %q gave %q; want %q", tc.in, res.Language, tc.want)
			}
		})
	}
}

// Scenario: AssemblyAI is asked to call back with a token for the job
func TestSubmitAsksForWebhook(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	if _, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, WebhookURL: "https://t.example/v1/callbacks/assemblyai"}, nil); err == nil {
		t.Error("New accepted a webhook URL without a secret")
	}
	if _, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, WebhookURL: "https://u:p@t.example/cb", WebhookSecret: "s"}, nil); err == nil {
		t.Error("New accepted a webhook URL with credentials")
	}
	e, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, WebhookURL: "https://t.example/v1/callbacks/assemblyai", WebhookSecret: "s3cret"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := writeAudio(t, "a.flac", 2048)
	if _, err := e.Submit(context.Background(), engine.Request{AudioPath: path, JobID: "tg-42-7"}); err != nil {
		t.Fatal(err)
	}
	created := srv.Created()[0]
	if got := created["webhook_url"]; got != "https://t.example/v1/callbacks/assemblyai?job=tg-42-7" {
		t.Errorf("webhook_url = %v", got)
	}
	if got := created["webhook_auth_header_name"]; got != engine.CallbackHeader {
		t.Errorf("webhook_auth_header_name = %v; want %s", got, engine.CallbackHeader)
	}
	if got := created["webhook_auth_header_value"]; got != engine.CallbackToken("s3cret", "tg-42-7") || got == engine.CallbackToken("s3cret", "tg-42-8") {
		t.Errorf("webhook_auth_header_value = %v; want the job's own token", got)
	}
	// Without a job id (or without a webhook) nothing is asked.
	if _, err := e.Submit(context.Background(), engine.Request{AudioPath: path}); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Created()[1]["webhook_url"]; ok {
		t.Error("a webhook was asked for a request without a job")
	}
}

// Scenario: AssemblyAI labels speakers when the job asks
func TestSpeakerLabels(t *testing.T) {
	srv := assemblyaitest.New(t, testKey)
	srv.SetProcessingPolls(0)
	srv.SetResult("Hello there. Hi.", "en_us", []assemblyaitest.Word{
		{Text: "Hello", Start: 0, End: 400, Confidence: 0.9, Speaker: "A"},
		{Text: "there.", Start: 450, End: 900, Confidence: 0.9, Speaker: "A"},
		{Text: "Hi.", Start: 1000, End: 1300, Confidence: 0.8, Speaker: "B"},
	})
	e := newEngine(t, srv.URL())
	path, _ := writeAudio(t, "a.wav", 2048)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }

	t.Run("asked", func(t *testing.T) {
		sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "en", Speakers: true, SpeakersExpected: 2})
		if err != nil {
			t.Fatal(err)
		}
		done, _, err := poll(t, e, sub.OperationID, 5)
		if err != nil {
			t.Fatal(err)
		}
		created := srv.Created()
		if c := created[len(created)-1]; c["speaker_labels"] != true || c["speakers_expected"] != float64(2) {
			t.Errorf("created with %v; want speaker_labels and speakers_expected 2", c)
		}
		wantSegs := []engine.Segment{{Start: 0, End: ms(900), Text: "Hello there.", Speaker: "A"}, {Start: ms(1000), End: ms(1300), Text: "Hi.", Speaker: "B"}}
		if got := done.Result.Segments; fmt.Sprint(got) != fmt.Sprint(wantSegs) {
			t.Errorf("segments = %v; want the utterances %v", got, wantSegs)
		}
		wantWords := []engine.Word{{Start: 0, End: ms(400), Text: "Hello", Speaker: "A"}, {Start: ms(450), End: ms(900), Text: "there.", Speaker: "A"}, {Start: ms(1000), End: ms(1300), Text: "Hi.", Speaker: "B"}}
		if got := done.Result.Words; fmt.Sprint(got) != fmt.Sprint(wantWords) {
			t.Errorf("words = %v; want %v", got, wantWords)
		}
	})
	t.Run("not asked", func(t *testing.T) {
		sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "en"})
		if err != nil {
			t.Fatal(err)
		}
		done, _, err := poll(t, e, sub.OperationID, 5)
		if err != nil {
			t.Fatal(err)
		}
		created := srv.Created()
		if c := created[len(created)-1]; c["speaker_labels"] != nil || c["speakers_expected"] != nil {
			t.Errorf("created with %v; want no speaker settings", c)
		}
		for _, s := range done.Result.Segments {
			if s.Speaker != "" {
				t.Errorf("segment %v has a speaker; none was asked for", s)
			}
		}
		if len(done.Result.Words) != 3 || done.Result.Words[2].Speaker != "" {
			t.Errorf("words = %v; want three without speakers", done.Result.Words)
		}
	})
}
