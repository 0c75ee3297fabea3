package assemblyaitest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/transcriber/transcriber/internal/engine/assemblyai/assemblyaitest"
)

const key = "aai-test-key-0123456789"

type answer struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func call(t *testing.T, method, url, auth string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &a.json); err != nil {
			t.Fatalf("%s %s: JSON answer %q: %v", method, url, b, err)
		}
	}
	return a
}

func upload(t *testing.T, s *assemblyaitest.Server, data []byte) string {
	t.Helper()
	a := call(t, http.MethodPost, s.URL()+"/v2/upload", key, data)
	if a.status != http.StatusOK {
		t.Fatalf("upload: status %d %s; want 200", a.status, a.body)
	}
	u, _ := a.json["upload_url"].(string)
	if !strings.HasPrefix(u, s.URL()+"/cdn/upload/") {
		t.Fatalf("upload_url = %q; want one under %s/cdn/upload/", u, s.URL())
	}
	return u
}

func create(t *testing.T, s *assemblyaitest.Server, params map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(params)
	a := call(t, http.MethodPost, s.URL()+"/v2/transcript", key, b)
	if a.status != http.StatusOK {
		t.Fatalf("create: status %d %s; want 200", a.status, a.body)
	}
	if got := a.json["status"]; got != "queued" {
		t.Errorf("create status = %v; want queued", got)
	}
	if got, ok := a.json["text"]; !ok || got != nil {
		t.Errorf("create text = %v (present %v); want null", got, ok)
	}
	id, _ := a.json["id"].(string)
	if len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Fatalf("id = %q; want a UUID", id)
	}
	return id
}

func check(t *testing.T, s *assemblyaitest.Server, id string) answer {
	t.Helper()
	return call(t, http.MethodGet, s.URL()+"/v2/transcript/"+id, key, nil)
}

func TestLifecycle(t *testing.T) {
	s := assemblyaitest.New(t, key)
	s.SetResult("Hello there. Bye.", "en_us", []assemblyaitest.Word{
		{Text: "Hello", Start: 100, End: 400, Confidence: 0.9},
		{Text: "there.", Start: 450, End: 800, Confidence: 0.8},
		{Text: "Bye.", Start: 2000, End: 2300, Confidence: 1},
	})
	u := upload(t, s, []byte("audio bytes"))
	id := create(t, s, map[string]any{"audio_url": u, "language_detection": true, "punctuate": true})

	for i, want := range []string{"queued", "processing", "processing", "completed", "completed"} {
		a := check(t, s, id)
		if a.status != http.StatusOK {
			t.Fatalf("check %d: status %d; want 200", i+1, a.status)
		}
		if got := a.json["status"]; got != want {
			t.Fatalf("check %d: status %v; want %s", i+1, got, want)
		}
		if a.json["id"] != id {
			t.Errorf("check %d: id %v; want %s", i+1, a.json["id"], id)
		}
		if want != "completed" {
			if a.json["text"] != nil || a.json["words"] != nil {
				t.Errorf("check %d: text %v, words %v; want null before completion", i+1, a.json["text"], a.json["words"])
			}
			continue
		}
		if got := a.json["text"]; got != "Hello there. Bye." {
			t.Errorf("text = %v; want the configured text", got)
		}
		if got := a.json["language_code"]; got != "en_us" {
			t.Errorf("language_code = %v; want en_us", got)
		}
		if got := a.json["audio_duration"]; got != float64(3) {
			t.Errorf("audio_duration = %v; want 3", got)
		}
		words, _ := a.json["words"].([]any)
		if len(words) != 3 {
			t.Fatalf("words = %v; want 3", a.json["words"])
		}
		w0, _ := words[0].(map[string]any)
		if w0["text"] != "Hello" || w0["start"] != float64(100) || w0["end"] != float64(400) || w0["confidence"] != 0.9 {
			t.Errorf("first word = %v; want Hello 100–400 at 0.9", w0)
		}
		if _, ok := a.json["error"]; ok {
			t.Errorf("error field present on a completed transcript: %v", a.json["error"])
		}
	}
	if got := s.Checks(); got != 5 {
		t.Errorf("Checks() = %d; want 5", got)
	}
	if got := s.Requests(); got != 7 {
		t.Errorf("Requests() = %d; want 7", got)
	}
	if got := s.Uploads(); len(got) != 1 || string(got[0]) != "audio bytes" {
		t.Errorf("Uploads() = %q; want the one body", got)
	}
	if got := s.Created(); len(got) != 1 || got[0]["audio_url"] != u || got[0]["language_detection"] != true {
		t.Errorf("Created() = %v; want the one body", got)
	}
}

func TestLanguageEchoedWhenNotConfigured(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"requested", map[string]any{"language_code": "ru"}, "ru"},
		{"detection", map[string]any{"language_detection": true}, "en_us"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := assemblyaitest.New(t, key)
			s.SetProcessingPolls(0)
			tc.params["audio_url"] = upload(t, s, []byte{1})
			id := create(t, s, tc.params)
			check(t, s, id)
			a := check(t, s, id)
			if a.json["status"] != "completed" {
				t.Fatalf("status = %v; want completed after the queued check with no processing polls", a.json["status"])
			}
			if got := a.json["language_code"]; got != tc.want {
				t.Errorf("language_code = %v; want %s", got, tc.want)
			}
			if got := a.json["text"]; got != "" {
				t.Errorf("text = %v; want empty by default", got)
			}
		})
	}
}

func TestFailWith(t *testing.T) {
	s := assemblyaitest.New(t, key)
	s.SetProcessingPolls(1)
	s.FailWith("Transcoding failed. File does not appear to contain audio.")
	id := create(t, s, map[string]any{"audio_url": upload(t, s, []byte{1})})
	var last answer
	for range 4 {
		last = check(t, s, id)
	}
	if last.json["status"] != "error" || last.json["error"] != "Transcoding failed. File does not appear to contain audio." {
		t.Errorf("answer = %s; want status error with the message", last.body)
	}
}

func TestNeverFinish(t *testing.T) {
	s := assemblyaitest.New(t, key)
	s.NeverFinish()
	id := create(t, s, map[string]any{"audio_url": upload(t, s, []byte{1})})
	for i := 1; i <= 20; i++ {
		a := check(t, s, id)
		want := "processing"
		if i == 1 {
			want = "queued"
		}
		if a.json["status"] != want {
			t.Fatalf("check %d: status %v; want %s", i, a.json["status"], want)
		}
	}
}

func TestRefusals(t *testing.T) {
	s := assemblyaitest.New(t, key)
	issued := upload(t, s, []byte{1})
	for _, tc := range []struct {
		name       string
		method     string
		path, auth string
		body       string
		wantStatus int
		wantError  string
	}{
		{"no key", http.MethodPost, "/v2/upload", "", "x", 401, "Authentication error, API token missing/invalid"},
		{"wrong key", http.MethodPost, "/v2/upload", "wrong", "x", 401, "Authentication error"},
		{"bearer key", http.MethodPost, "/v2/upload", "Bearer " + key, "x", 401, "Authentication error"},
		{"empty upload", http.MethodPost, "/v2/upload", key, "", 400, "empty"},
		{"create not json", http.MethodPost, "/v2/transcript", key, "audio_url=x", 400, "Invalid JSON"},
		{"create without audio_url", http.MethodPost, "/v2/transcript", key, `{"punctuate":true}`, 400, "audio_url"},
		{"create with foreign audio_url", http.MethodPost, "/v2/transcript", key, `{"audio_url":"https://example.com/a.flac"}`, 400, "audio_url"},
		{"create with wrong type", http.MethodPost, "/v2/transcript", key, `{"audio_url":"` + issued + `","punctuate":"yes"}`, 400, "punctuate"},
		{"language code and detection", http.MethodPost, "/v2/transcript", key, `{"audio_url":"` + issued + `","language_code":"en","language_detection":true}`, 400, "language_detection"},
		{"unknown transcript", http.MethodGet, "/v2/transcript/0000", key, "", 404, "Transcript not found"},
		{"unknown path", http.MethodGet, "/v2/elsewhere", key, "", 404, "Not found"},
		{"wrong method", http.MethodGet, "/v2/upload", key, "", 405, "Method not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, tc.method, s.URL()+tc.path, tc.auth, []byte(tc.body))
			if a.status != tc.wantStatus {
				t.Errorf("status = %d; want %d", a.status, tc.wantStatus)
			}
			msg, _ := a.json["error"].(string)
			if !strings.Contains(msg, tc.wantError) {
				t.Errorf("error = %q; want it to contain %q", msg, tc.wantError)
			}
		})
	}
}

func TestFailNext(t *testing.T) {
	s := assemblyaitest.New(t, key)
	s.FailNext("/v2/upload", 2, 429, `{"error":"Too many requests"}`, "7")
	for i := 1; i <= 2; i++ {
		a := call(t, http.MethodPost, s.URL()+"/v2/upload", key, []byte{1})
		if a.status != 429 || a.header.Get("Retry-After") != "7" || a.json["error"] != "Too many requests" {
			t.Errorf("request %d: %d %v %s; want the injected 429", i, a.status, a.header, a.body)
		}
	}
	u := upload(t, s, []byte{1})

	// The failure is injected before the credentials are looked at.
	s.FailNext("/v2/transcript", 1, 503, "upstream down", "")
	a := call(t, http.MethodPost, s.URL()+"/v2/transcript", "", []byte(`{}`))
	if a.status != 503 || string(a.body) != "upstream down" || a.header.Get("Retry-After") != "" {
		t.Errorf("answer = %d %q (Retry-After %q); want the injected 503 without Retry-After", a.status, a.body, a.header.Get("Retry-After"))
	}
	id := create(t, s, map[string]any{"audio_url": u})
	if a := check(t, s, id); a.status != 200 {
		t.Errorf("check after the failures: %d; want 200", a.status)
	}
	if got := s.Requests(); got != 6 {
		t.Errorf("Requests() = %d; want 6", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := assemblyaitest.New(t, key)
	s.SetProcessingPolls(0)
	post := func(path string, body []byte) (map[string]any, error) {
		req, err := http.NewRequest(http.MethodPost, s.URL()+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", key)
		return send(req)
	}
	get := func(path string) (map[string]any, error) {
		req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", key)
		return send(req)
	}
	flow := func() error {
		up, err := post("/v2/upload", []byte("x"))
		if err != nil {
			return err
		}
		b, _ := json.Marshal(map[string]any{"audio_url": up["upload_url"]})
		created, err := post("/v2/transcript", b)
		if err != nil {
			return err
		}
		id, _ := created["id"].(string)
		var last map[string]any
		for range 2 {
			if last, err = get("/v2/transcript/" + id); err != nil {
				return err
			}
		}
		if last["status"] != "completed" {
			return fmt.Errorf("status = %v; want completed", last["status"])
		}
		return nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := flow(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := s.Checks(); got != 16 {
		t.Errorf("Checks() = %d; want 16", got)
	}
	if got := len(s.Uploads()); got != 8 {
		t.Errorf("len(Uploads()) = %d; want 8", got)
	}
}

func send(req *http.Request) (map[string]any, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	var m map[string]any
	return m, json.NewDecoder(resp.Body).Decode(&m)
}

// Scenario: The AssemblyAI stand-in refuses speakers_expected without speaker labels
func TestSpeakersExpectedNeedsLabels(t *testing.T) {
	s := assemblyaitest.New(t, key)
	u := upload(t, s, []byte("audio"))
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"speakers_expected": 2}, "requires speaker_labels"},
		{map[string]any{"speaker_labels": true, "speakers_expected": 0}, "positive integer"},
		{map[string]any{"speaker_labels": "yes"}, "must be a boolean"},
	} {
		tc.params["audio_url"] = u
		b, _ := json.Marshal(tc.params)
		a := call(t, http.MethodPost, s.URL()+"/v2/transcript", key, b)
		if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), tc.want) {
			t.Errorf("create(%v) = %d %s; want 400 %q", tc.params, a.status, a.body, tc.want)
		}
	}
}

// Scenario: The AssemblyAI stand-in gives speakers and utterances with speaker labels
func TestSpeakerLabelsAnswer(t *testing.T) {
	s := assemblyaitest.New(t, key)
	s.SetProcessingPolls(0)
	s.SetResult("Hi. Yes.", "en_us", []assemblyaitest.Word{{Text: "Hi.", Start: 0, End: 300, Speaker: "A"}, {Text: "Yes.", Start: 400, End: 700, Speaker: "B"}})
	id := create(t, s, map[string]any{"audio_url": upload(t, s, []byte("audio")), "speaker_labels": true, "speakers_expected": 2})
	var a answer
	for range 5 {
		if a = call(t, http.MethodGet, s.URL()+"/v2/transcript/"+id, key, nil); a.json["status"] == "completed" {
			break
		}
	}
	utts, _ := a.json["utterances"].([]any)
	words, _ := a.json["words"].([]any)
	if len(utts) != 2 || len(words) != 2 || a.json["speaker_labels"] != true || a.json["speakers_expected"] != float64(2) {
		t.Fatalf("transcript = %s; want two utterances and the speaker settings", a.body)
	}
	if u := utts[1].(map[string]any); u["speaker"] != "B" || u["text"] != "Yes." || u["start"] != float64(400) {
		t.Errorf("second utterance = %v", u)
	}
	if w := words[0].(map[string]any); w["speaker"] != "A" {
		t.Errorf("first word = %v; want speaker A", w)
	}
}
