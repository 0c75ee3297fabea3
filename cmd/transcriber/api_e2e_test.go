package main

// End-to-end tests of the HTTP job API: the real up and api roles, the
// embedded Temporal server, ffmpeg and pocketsphinx on real speech, a
// webhook receiver that checks signatures, and the official OpenAI Go SDK
// as an unmodified client.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/httpapi"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

const (
	apiToken      = "e2e-api-token-8c1f0d2b7a"
	webhookSecret = "e2e-webhook-secret"
)

// apiCall is one request to the API and its answer.
type apiCall struct {
	status int
	header http.Header
	body   string
}

func (c apiCall) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(c.body), v); err != nil {
		t.Fatalf("answer %d %q: %v; want JSON", c.status, c.body, err)
	}
}

// errorCode reads the code of an {"error":{"code","message"}} answer.
func (c apiCall) errorCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	c.json(t, &e)
	if e.Error.Message == "" {
		t.Errorf("error answer %q has no message", c.body)
	}
	return e.Error.Code
}

func apiDo(t *testing.T, method, url, token string, body io.Reader, header ...string) apiCall {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiCall{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// multipartUpload is a form with the recording in the field file.
func multipartUpload(t *testing.T, name string, data []byte, fields ...string) (io.Reader, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b, mw.FormDataContentType()
}

type accepted struct {
	ID       string            `json:"id"`
	Existing bool              `json:"existing"`
	Links    map[string]string `json:"links"`
}

type jobAnswer struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Step     string `json:"step"`
	Progress float64
	Failure  *struct{ Kind, Step, Message string }
}

// webhookReceiver is a client's endpoint for job notices; it keeps those
// whose signature is right and counts the others.
type webhookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	events []activities.Event
	forged int
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	rc := &webhookReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if r.Header.Get(activities.SignatureHeader) != activities.Sign([]byte(webhookSecret), r.Header.Get(activities.TimestampHeader), body) {
			rc.forged++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev activities.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.events = append(rc.events, ev)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *webhookReceiver) event(jobID, state string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, ev := range rc.events {
		if ev.JobID == jobID && string(ev.State) == state && ev.Type == "job."+state {
			return true
		}
	}
	return false
}

func waitState(t *testing.T, base, id, state string) jobAnswer {
	t.Helper()
	var j jobAnswer
	waitFor(t, "job "+id+" "+state, func() bool {
		c := apiDo(t, http.MethodGet, base+"/v1/jobs/"+id, apiToken, nil)
		if c.status != http.StatusOK {
			return false
		}
		c.json(t, &j)
		return j.State == state
	})
	return j
}

func TestHTTPAPIEndToEnd(t *testing.T) {
	requireSpeechTools(t)
	hooks := newWebhookReceiver(t)
	dataDir := t.TempDir()
	u := startUp(t, dataDir, "TRANSCRIBER_API_TOKENS", "someone-else,"+apiToken, "TRANSCRIBER_MAX_UPLOAD_BYTES", "200000",
		"TRANSCRIBER_WEBHOOK_SECRET", webhookSecret, "TRANSCRIBER_WEBHOOK_ALLOW_LOOPBACK", "true", "TRANSCRIBER_RETRY_SCHEDULE", "1s")
	base := "http://" + u.http
	note, err := os.ReadFile(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}

	// Scenario: A request without a valid token is refused with 401
	t.Run("no token", func(t *testing.T) {
		for _, token := range []string{"", "wrong-" + apiToken} {
			body, ct := multipartUpload(t, "voice.ogg", note)
			c := apiDo(t, http.MethodPost, base+"/v1/jobs", token, body, "Content-Type", ct)
			if c.status != http.StatusUnauthorized || c.errorCode(t) != "unauthorized" || !strings.HasPrefix(c.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("token %q: %d %s, WWW-Authenticate %q; want 401 with a Bearer challenge", token, c.status, c.body, c.header.Get("WWW-Authenticate"))
			}
		}
		if c := apiDo(t, http.MethodGet, base+"/v1/jobs", "", nil); c.status != http.StatusUnauthorized {
			t.Errorf("GET /v1/jobs without a token = %d", c.status)
		}
	})

	var id string
	// Scenario: An uploaded recording becomes a job whose transcript comes in every format
	t.Run("upload to transcript", func(t *testing.T) {
		body, ct := multipartUpload(t, "voice.ogg", note, "language", "en", "webhook_url", hooks.URL+"/done?ref=1")
		c := apiDo(t, http.MethodPost, base+"/v1/jobs", apiToken, body, "Content-Type", ct, "Idempotency-Key", "voice-1")
		if c.status != http.StatusAccepted {
			t.Fatalf("POST /v1/jobs = %d %s; want 202", c.status, c.body)
		}
		var a accepted
		c.json(t, &a)
		id = a.ID
		// The key is scoped to the caller's account, a bare token's here.
		if want := workflows.HTTPJobID(httpapi.Fingerprint(apiToken), "voice-1"); id != want || a.Links["self"] != "/v1/jobs/"+want || c.header.Get("Location") != a.Links["self"] {
			t.Errorf("answer %s, Location %q", c.body, c.header.Get("Location"))
		}
		// The recording was stored before the answer.
		if entries, err := os.ReadDir(dataDir + "/blobs/jobs/" + id); err != nil || len(entries) == 0 {
			t.Errorf("no stored recording under the job: %v", err)
		}

		// Scenario: The same Idempotency-Key with the same bytes finds the same job, with other bytes it is a conflict
		t.Run("idempotency", func(t *testing.T) {
			c := apiDo(t, http.MethodPost, base+"/v1/jobs?language=en", apiToken, bytes.NewReader(note),
				"Content-Type", "audio/ogg", "Idempotency-Key", "voice-1")
			var again accepted
			c.json(t, &again)
			if c.status != http.StatusAccepted || again.ID != id || !again.Existing {
				t.Errorf("same key again = %d %s; want 202 with %s", c.status, c.body, id)
			}
			other := append(append([]byte{}, note...), 0)
			c = apiDo(t, http.MethodPost, base+"/v1/jobs", apiToken, bytes.NewReader(other),
				"Content-Type", "audio/ogg", "Idempotency-Key", "voice-1")
			if c.status != http.StatusConflict || c.errorCode(t) != "idempotency_conflict" {
				t.Errorf("same key, other bytes = %d %s; want 409", c.status, c.body)
			}
			// Scenario: An upload that names a job of other bytes, or one whose recordings are gone, leaves no recording behind
			t.Run("no recording for no job", func(t *testing.T) {
				entries, _ := os.ReadDir(dataDir + "/blobs/jobs/" + id)
				var originals []string
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), "original-") {
						originals = append(originals, e.Name())
					}
				}
				if len(originals) != 1 {
					t.Errorf("the job's recordings after the conflict = %v; want only its own", originals)
				}
			})
		})

		done := waitState(t, base, id, "done")
		if done.Progress != 1 || done.Failure != nil {
			t.Errorf("done job = %+v", done)
		}
		c = apiDo(t, http.MethodGet, base+"/v1/jobs/"+id+"/transcript?format=srt", apiToken, nil)
		if c.status != http.StatusOK || !strings.Contains(c.body, "1\n00:00:0") || !strings.Contains(c.body, " --> ") ||
			!strings.Contains(c.body, testaudio.GoForwardText) {
			t.Errorf("srt = %d %q; want cues with the text", c.status, c.body)
		}
		for format, want := range map[string]string{"txt": testaudio.GoForwardText + "\n", "vtt": "WEBVTT", "json": `"segments"`} {
			c := apiDo(t, http.MethodGet, base+"/v1/jobs/"+id+"/transcript?format="+format, apiToken, nil)
			if c.status != http.StatusOK || !strings.Contains(c.body, want) {
				t.Errorf("%s = %d %q; want %q", format, c.status, c.body, want)
			}
		}
		// Scenario: A job with a webhook URL notifies it, signed, when it settles
		t.Run("webhook", func(t *testing.T) {
			waitFor(t, "signed webhook for the done job", func() bool { return hooks.event(id, "done") })
		})
	})

	// Scenario: Empty, oversized and non-audio uploads are refused before any job starts
	t.Run("bad uploads", func(t *testing.T) {
		big := append([]byte("OggS"), make([]byte, 300000)...)
		tests := []struct {
			name   string
			body   []byte
			status int
			code   string
		}{
			{"empty", nil, http.StatusBadRequest, "empty_audio"},
			{"too large", big, http.StatusRequestEntityTooLarge, "too_large"},
			{"text", []byte("Dear diary, today I did not record any audio.\n"), http.StatusUnsupportedMediaType, "unsupported_format"},
		}
		for _, tc := range tests {
			body, ct := multipartUpload(t, "x.ogg", tc.body)
			c := apiDo(t, http.MethodPost, base+"/v1/jobs", apiToken, body, "Content-Type", ct)
			if c.status != tc.status || c.errorCode(t) != tc.code {
				t.Errorf("%s: %d %s; want %d %s", tc.name, c.status, c.body, tc.status, tc.code)
			}
			c = apiDo(t, http.MethodPost, base+"/v1/jobs", apiToken, bytes.NewReader(tc.body), "Content-Type", "audio/ogg")
			if c.status != tc.status {
				t.Errorf("%s raw: %d %s; want %d", tc.name, c.status, c.body, tc.status)
			}
		}
		var list struct{ Jobs []struct{ ID string } }
		apiDo(t, http.MethodGet, base+"/v1/jobs", apiToken, nil).json(t, &list)
		if len(list.Jobs) != 1 {
			t.Errorf("jobs = %+v; want only the voice note's", list.Jobs)
		}
	})

	// Scenario: A failed job is listed, revived and cancelled through the API, and its recording kept
	t.Run("failed job", func(t *testing.T) {
		junk := bytes.Repeat([]byte{0, 1, 2, 3, 0xfe}, 800)
		// callback_url, the first name of webhook_url, still works.
		c := apiDo(t, http.MethodPost, base+"/v1/jobs?callback_url="+hooks.URL+"/failed", apiToken, bytes.NewReader(junk),
			"Content-Type", "application/octet-stream")
		if c.status != http.StatusAccepted {
			t.Fatalf("junk upload = %d %s; want 202 (ffprobe judges unknown bytes)", c.status, c.body)
		}
		var a accepted
		c.json(t, &a)
		j := waitState(t, base, a.ID, "failed")
		if j.Failure == nil || j.Failure.Kind != "unsupported_format" || j.Step != "converting" {
			t.Errorf("failed job = %+v", j)
		}
		waitFor(t, "signed webhook for the failed job", func() bool { return hooks.event(a.ID, "failed") })
		var list struct{ Jobs []struct{ ID, State string } }
		waitFor(t, "failed job listed", func() bool {
			apiDo(t, http.MethodGet, base+"/v1/jobs?state=failed", apiToken, nil).json(t, &list)
			return len(list.Jobs) == 1 && list.Jobs[0].ID == a.ID
		})
		if c := apiDo(t, http.MethodPost, base+"/v1/jobs/"+id+"/revive", apiToken, nil); c.status != http.StatusConflict || c.errorCode(t) != "not_revivable" {
			t.Errorf("revive of a done job = %d %s; want 409", c.status, c.body)
		}
		if c := apiDo(t, http.MethodGet, base+"/v1/jobs/"+a.ID+"/transcript", apiToken, nil); c.status != http.StatusConflict || c.errorCode(t) != "not_ready" {
			t.Errorf("transcript of a failed job = %d %s; want 409", c.status, c.body)
		}
		if c := apiDo(t, http.MethodPost, base+"/v1/jobs/"+a.ID+"/revive", apiToken, nil); c.status != http.StatusAccepted {
			t.Errorf("revive = %d %s; want 202", c.status, c.body)
		}
		// The revived job meets the same verdict again.
		waitFor(t, "revived job failed again", func() bool {
			var j struct {
				State    string
				Revivals int
			}
			apiDo(t, http.MethodGet, base+"/v1/jobs/"+a.ID, apiToken, nil).json(t, &j)
			return j.State == "failed" && j.Revivals == 1
		})
		if c := apiDo(t, http.MethodDelete, base+"/v1/jobs/"+a.ID, apiToken, nil); c.status != http.StatusAccepted {
			t.Errorf("DELETE = %d %s; want 202", c.status, c.body)
		}
		waitState(t, base, a.ID, "cancelled")
		if c := apiDo(t, http.MethodDelete, base+"/v1/jobs/"+a.ID, apiToken, nil); c.status != http.StatusConflict {
			t.Errorf("second DELETE = %d %s; want 409", c.status, c.body)
		}
		if entries, err := os.ReadDir(dataDir + "/blobs/jobs/" + a.ID); err != nil || len(entries) == 0 {
			t.Errorf("the cancelled job's recording is gone: %v", err)
		}
		if c := apiDo(t, http.MethodGet, base+"/v1/jobs/no-such-job", apiToken, nil); c.status != http.StatusNotFound {
			t.Errorf("unknown job = %d", c.status)
		}
	})

	hooks.mu.Lock()
	if hooks.forged != 0 {
		t.Errorf("%d webhooks with a wrong signature", hooks.forged)
	}
	hooks.mu.Unlock()
	logs := u.logs.String()
	if strings.Contains(logs, apiToken) || strings.Contains(logs, webhookSecret) || strings.Contains(logs, hooks.URL) {
		t.Errorf("the log holds a token, the webhook secret or a callback URL:\n%s", logs)
	}
	if strings.Contains(logs, testaudio.GoForwardText) {
		t.Error("the log holds transcript text")
	}
}

// Scenario: Without API tokens the job endpoints are off, and up's log says how to turn them on
func TestHTTPAPIOffWithoutTokens(t *testing.T) {
	requireSpeechTools(t)
	u := startUp(t, t.TempDir())
	base := "http://" + u.http
	c := apiDo(t, http.MethodPost, base+"/v1/jobs", "anything", strings.NewReader("OggS"), "Content-Type", "audio/ogg")
	if c.status != http.StatusServiceUnavailable || c.errorCode(t) != "api_disabled" || !strings.Contains(c.body, "TRANSCRIBER_API_TOKENS") {
		t.Errorf("POST /v1/jobs = %d %s; want 503 api_disabled naming TRANSCRIBER_API_TOKENS", c.status, c.body)
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get(t, base+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics = %d", code)
	}
	if code, doc := get(t, base+"/v1/openapi.json"); code != http.StatusOK || !strings.Contains(doc, `"/v1/audio/transcriptions"`) {
		t.Errorf("/v1/openapi.json = %d", code)
	}
	if !strings.Contains(u.logs.String(), "TRANSCRIBER_API_TOKENS") {
		t.Errorf("up's log does not say how to enable the API:\n%s", u.logs)
	}
}

// startAPIRole runs "transcriber api" against up's Temporal server and
// returns its base URL.
func startAPIRole(t *testing.T, u *upInstance, extra ...string) (string, *syncBuffer) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	getenv := func(k string) string {
		if k == "TRANSCRIBER_HTTP_ADDR" {
			return addr
		}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i] == k {
				return extra[i+1]
			}
		}
		return u.client(k)
	}
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"api"}, getenv, nil, io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("api: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("api did not stop within 30s")
		}
	})
	waitFor(t, "api role ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("api exited: %v\n%s", err, logs)
		default:
		}
		code, _ := func() (int, string) {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return 0, ""
			}
			resp.Body.Close()
			return resp.StatusCode, ""
		}()
		return code == http.StatusOK
	})
	return "http://" + addr, logs
}

// Scenario: An unmodified OpenAI SDK client transcribes a voice note through the api role
func TestHTTPAPIOpenAISDK(t *testing.T) {
	requireSpeechTools(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_API_TOKENS", apiToken)
	base, apiLogs := startAPIRole(t, u)
	notePath := testaudio.VoiceNote(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	client := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(apiToken))
	f, err := os.Open(notePath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // only read
	res, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
		File: f, Model: openai.AudioModel("whisper-1"),
	})
	if err != nil {
		t.Fatalf("Transcriptions.New: %v", err)
	}
	if got := strings.TrimSpace(res.Text); got != testaudio.GoForwardText {
		t.Errorf("text = %q; want %q", got, testaudio.GoForwardText)
	}

	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	verbose, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
		File: f, Model: openai.AudioModel("whisper-1"), Language: openai.String("en"),
		ResponseFormat: openai.AudioResponseFormatVerboseJSON,
	})
	if err != nil {
		t.Fatalf("Transcriptions.New verbose_json: %v", err)
	}
	if v := verbose.AsTranscriptionVerbose(); v.Text != testaudio.GoForwardText || len(v.Segments) == 0 || v.Duration <= 0 {
		t.Errorf("verbose = %+v", v)
	}

	// A wrong key is an *openai.Error the SDK reads as OpenAI's own.
	bad := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-wrong"), option.WithMaxRetries(0))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	_, err = bad.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: f, Model: openai.AudioModel("whisper-1")})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "unauthorized" || apiErr.Message == "" {
		t.Errorf("wrong key: %v; want a 401 openai.Error with code and message", err)
	}
	if strings.Contains(apiLogs.String()+u.logs.String(), apiToken) {
		t.Error("a log holds the API token")
	}
}
