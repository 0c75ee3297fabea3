package speechkittest_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/transcriber/transcriber/internal/engine/speechkit/speechkittest"
)

const key = "AQVN-stand-in-key"

var apiKey = "Api-Key " + key

type answer struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func call(t *testing.T, method, url, auth string, header map[string]string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range header {
		req.Header.Set(k, v)
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
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && !bytes.Contains(bytes.TrimSpace(b), []byte("\n")) {
		if err := json.Unmarshal(b, &a.json); err != nil {
			t.Fatalf("%s %s: JSON answer %q: %v", method, url, b, err)
		}
	}
	return a
}

func request(audio []byte, model map[string]any) []byte {
	if model == nil {
		model = map[string]any{
			"model":               "general",
			"audioFormat":         map[string]any{"containerAudio": map[string]any{"containerAudioType": "OGG_OPUS"}},
			"textNormalization":   map[string]any{"textNormalization": "TEXT_NORMALIZATION_ENABLED", "literatureText": true},
			"languageRestriction": map[string]any{"restrictionType": "WHITELIST", "languageCode": []string{"ru-RU"}},
		}
	}
	b, _ := json.Marshal(map[string]any{"content": base64.StdEncoding.EncodeToString(audio), "recognitionModel": model})
	return b
}

func submit(t *testing.T, s *speechkittest.Server, body []byte) string {
	t.Helper()
	a := call(t, http.MethodPost, s.URL()+"/stt/v3/recognizeFileAsync", apiKey, nil, body)
	if a.status != http.StatusOK {
		t.Fatalf("recognizeFileAsync: %d %s; want 200", a.status, a.body)
	}
	id, _ := a.json["id"].(string)
	if len(id) != 20 || a.json["done"] != false || a.json["description"] != "STT v3 async recognition" {
		t.Fatalf("operation = %s; want a 20-character id, done false and the documented description", a.body)
	}
	return id
}

func TestLifecycle(t *testing.T) {
	s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
	s.SetResult(
		speechkittest.Utterance{Text: "привет мир", Normalized: "Привет, мир.", Language: "ru-RU", EndMs: 1500,
			Words: []speechkittest.Word{{Text: "привет", StartMs: 100, EndMs: 600}, {Text: "мир", StartMs: 700, EndMs: 1200}}},
		speechkittest.Utterance{Text: "пока", StartMs: 2000, EndMs: 2600},
	)
	audio := []byte("OggS and then some")
	id := submit(t, s, request(audio, nil))

	for i, wantDone := range []bool{false, false, true, true} {
		a := call(t, http.MethodGet, s.OperationsURL()+"/operations/"+id, apiKey, nil, nil)
		if a.status != http.StatusOK || a.json["id"] != id || a.json["done"] != wantDone {
			t.Fatalf("check %d: %d %s; want done %v", i+1, a.status, a.body, wantDone)
		}
		if _, ok := a.json["error"]; ok {
			t.Fatalf("check %d: error in %s", i+1, a.body)
		}
	}
	a := call(t, http.MethodGet, s.URL()+"/stt/v3/getRecognition?operationId="+id, apiKey, nil, nil)
	if a.status != http.StatusOK {
		t.Fatalf("getRecognition: %d %s", a.status, a.body)
	}
	lines := strings.Split(strings.TrimSpace(string(a.body)), "\n")
	// Utterance one: final, refinement, end of utterance; two: final and
	// end of utterance (it has no normalised text).
	var kinds []string
	for _, line := range lines {
		var m struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		for k := range m.Result {
			switch k {
			case "final", "finalRefinement", "eouUpdate":
				kinds = append(kinds, k)
			}
		}
	}
	if got := strings.Join(kinds, ","); got != "final,finalRefinement,eouUpdate,final,eouUpdate" {
		t.Errorf("messages = %s; want final,finalRefinement,eouUpdate,final,eouUpdate", got)
	}
	for _, want := range []string{`"text":"Привет, мир."`, `"startTimeMs":"100"`, `"languageCode":"ru-RU"`, `"finalIndex":"1"`, `"channelTag":"0"`} {
		if !strings.Contains(string(a.body), want) {
			t.Errorf("results lack %s:\n%s", want, a.body)
		}
	}
	recs := s.Recognitions()
	if len(recs) != 1 || !bytes.Equal(recs[0].Content, audio) || recs[0].Authorization != apiKey {
		t.Errorf("Recognitions() = %+v; want the one request with its audio", recs)
	}
	if s.Checks() != 4 || s.Fetches() != 1 || s.Requests() != 6 {
		t.Errorf("checks %d, fetches %d, requests %d; want 4, 1, 6", s.Checks(), s.Fetches(), s.Requests())
	}
}

func TestWithoutNormalisationNoRefinement(t *testing.T) {
	s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
	s.SetRunningChecks(0)
	s.SetResult(speechkittest.Utterance{Text: "raw", Normalized: "Normalised."})
	id := submit(t, s, request([]byte("OggS"), map[string]any{
		"audioFormat": map[string]any{"containerAudio": map[string]any{"containerAudioType": "OGG_OPUS"}},
	}))
	call(t, http.MethodGet, s.OperationsURL()+"/operations/"+id, apiKey, nil, nil)
	a := call(t, http.MethodGet, s.URL()+"/stt/v3/getRecognition?operationId="+id, apiKey, nil, nil)
	if strings.Contains(string(a.body), "finalRefinement") || !strings.Contains(string(a.body), `"text":"raw"`) {
		t.Errorf("results = %s; want the raw final only", a.body)
	}
}

func TestOperationErrors(t *testing.T) {
	t.Run("fail with", func(t *testing.T) {
		s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
		s.SetRunningChecks(0)
		s.FailWith(3, "Invalid audio")
		id := submit(t, s, request([]byte("OggS"), nil))
		a := call(t, http.MethodGet, s.OperationsURL()+"/operations/"+id, apiKey, nil, nil)
		e, _ := a.json["error"].(map[string]any)
		if a.json["done"] != true || e["code"] != float64(3) || e["message"] != "Invalid audio" {
			t.Errorf("operation = %s; want done with the error", a.body)
		}
		if a := call(t, http.MethodGet, s.URL()+"/stt/v3/getRecognition?operationId="+id, apiKey, nil, nil); a.status != 400 {
			t.Errorf("results of a failed operation: %d; want 400", a.status)
		}
	})
	t.Run("audio that is not the declared container", func(t *testing.T) {
		s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
		s.SetRunningChecks(0)
		id := submit(t, s, request([]byte("RIFF....WAVE"), nil))
		a := call(t, http.MethodGet, s.OperationsURL()+"/operations/"+id, apiKey, nil, nil)
		e, _ := a.json["error"].(map[string]any)
		if msg, _ := e["message"].(string); !strings.Contains(msg, "OGG_OPUS") {
			t.Errorf("operation = %s; want a decoding error", a.body)
		}
	})
	t.Run("never finish", func(t *testing.T) {
		s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
		s.NeverFinish()
		id := submit(t, s, request([]byte("OggS"), nil))
		for i := range 20 {
			if a := call(t, http.MethodGet, s.OperationsURL()+"/operations/"+id, apiKey, nil, nil); a.json["done"] != false {
				t.Fatalf("check %d: %s; want running", i+1, a.body)
			}
		}
	})
}

func TestRefusals(t *testing.T) {
	const folder = "b1gfolder0123456789a"
	s := speechkittest.New(t, speechkittest.Credentials{APIKey: key, IAMToken: "t1.token", FolderID: folder})
	good := request([]byte("OggS"), nil)
	model := func(m map[string]any) []byte { return request([]byte("OggS"), m) }
	ogg := map[string]any{"containerAudio": map[string]any{"containerAudioType": "OGG_OPUS"}}
	for _, tc := range []struct {
		name       string
		method     string
		path, auth string
		header     map[string]string
		body       []byte
		wantStatus int
		wantCode   float64
		wantMsg    string
	}{
		{"no credentials", "POST", "/stt/v3/recognizeFileAsync", "", nil, good, 401, 16, "invalid"},
		{"wrong key", "POST", "/stt/v3/recognizeFileAsync", "Api-Key wrong", nil, good, 401, 16, "invalid"},
		{"bare key", "POST", "/stt/v3/recognizeFileAsync", key, nil, good, 401, 16, "invalid"},
		{"key as bearer", "POST", "/stt/v3/recognizeFileAsync", "Bearer " + key, nil, good, 401, 16, "invalid"},
		{"user token without folder", "POST", "/stt/v3/recognizeFileAsync", "Bearer t1.token", nil, good, 400, 3, "x-folder-id"},
		{"other folder", "POST", "/stt/v3/recognizeFileAsync", apiKey, map[string]string{"x-folder-id": "b1gother"}, good, 403, 7, "denied"},
		{"not JSON", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, []byte("content=x"), 400, 3, "invalid JSON"},
		{"unknown field", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, []byte(`{"content":"T2dnUw==","audio":1}`), 400, 3, "unknown field"},
		{"no audio", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, []byte(`{"recognitionModel":{}}`), 400, 3, "content and uri"},
		{"both audio fields", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, []byte(`{"content":"T2dnUw==","uri":"https://storage.yandexcloud.net/b/a.ogg"}`), 400, 3, "content and uri"},
		{"bad base64", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, []byte(`{"content":"%%%"}`), 400, 3, "base64"},
		{"no format", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, []byte(`{"content":"T2dnUw=="}`), 400, 3, "audioFormat"},
		{"unknown container", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, model(map[string]any{"audioFormat": map[string]any{"containerAudio": map[string]any{"containerAudioType": "FLAC"}}}), 400, 3, "FLAC"},
		{"raw at odd rate", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, model(map[string]any{"audioFormat": map[string]any{"rawAudio": map[string]any{"audioEncoding": "LINEAR16_PCM", "sampleRateHertz": "22050"}}}), 400, 3, "LINEAR16_PCM"},
		{"unknown model", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, model(map[string]any{"model": "whisper", "audioFormat": ogg}), 400, 3, "model"},
		{"unknown language", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, model(map[string]any{"audioFormat": ogg, "languageRestriction": map[string]any{"restrictionType": "WHITELIST", "languageCode": []string{"xx-XX"}}}), 400, 3, "xx-XX"},
		{"unknown normalisation", "POST", "/stt/v3/recognizeFileAsync", apiKey, nil, model(map[string]any{"audioFormat": ogg, "textNormalization": map[string]any{"textNormalization": "ON"}}), 400, 3, "textNormalization"},
		{"unknown operation", "GET", "/operations/e03nothere", apiKey, nil, nil, 404, 5, "not found"},
		{"results without id", "GET", "/stt/v3/getRecognition", apiKey, nil, nil, 400, 3, "operation_id"},
		{"results of unknown operation", "GET", "/stt/v3/getRecognition?operationId=e03nothere", apiKey, nil, nil, 404, 5, "not found"},
		{"unknown path", "GET", "/stt/v2/elsewhere", apiKey, nil, nil, 404, 5, "Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := s.URL()
			if strings.HasPrefix(tc.path, "/operations/") {
				base = s.OperationsURL()
			}
			a := call(t, tc.method, base+tc.path, tc.auth, tc.header, tc.body)
			if a.status != tc.wantStatus || a.json["code"] != tc.wantCode {
				t.Errorf("answer = %d %s; want %d with code %v", a.status, a.body, tc.wantStatus, tc.wantCode)
			}
			if msg, _ := a.json["message"].(string); !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("message = %q; want it to contain %q", msg, tc.wantMsg)
			}
		})
	}
	// The right folder and a user token pass; operations live on their own host.
	a := call(t, "POST", s.URL()+"/stt/v3/recognizeFileAsync", "Bearer t1.token", map[string]string{"x-folder-id": folder}, good)
	if a.status != 200 {
		t.Fatalf("user token with folder: %d %s", a.status, a.body)
	}
	if b := call(t, "GET", s.URL()+"/operations/"+a.json["id"].(string), apiKey, nil, nil); b.status != 404 {
		t.Errorf("operation on the recognition host: %d; want 404", b.status)
	}
}

func TestBodyLimit(t *testing.T) {
	s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
	body := make([]byte, speechkittest.MaxBody+1)
	a := call(t, "POST", s.URL()+"/stt/v3/recognizeFileAsync", apiKey, nil, body)
	if a.status != http.StatusRequestEntityTooLarge {
		t.Errorf("status = %d; want 413", a.status)
	}
}

func TestFailNext(t *testing.T) {
	s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
	s.FailNext("/stt/v3/recognizeFileAsync", 2, 429, `{"code":8,"message":"Quota exceeded"}`, "7")
	for i := 1; i <= 2; i++ {
		a := call(t, "POST", s.URL()+"/stt/v3/recognizeFileAsync", "", nil, nil)
		if a.status != 429 || a.header.Get("Retry-After") != "7" || a.json["message"] != "Quota exceeded" {
			t.Errorf("request %d: %d %v %s; want the injected 429", i, a.status, a.header, a.body)
		}
	}
	id := submit(t, s, request([]byte("OggS"), nil))
	s.FailNext("/operations/", 1, 503, "upstream down", "")
	if a := call(t, "GET", s.OperationsURL()+"/operations/"+id, apiKey, nil, nil); a.status != 503 || string(a.body) != "upstream down" {
		t.Errorf("answer = %d %q; want the injected 503", a.status, a.body)
	}
	if a := call(t, "GET", s.OperationsURL()+"/operations/"+id, apiKey, nil, nil); a.status != 200 {
		t.Errorf("check after the failure: %d; want 200", a.status)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := speechkittest.New(t, speechkittest.Credentials{APIKey: key})
	s.SetRunningChecks(0)
	s.SetResult(speechkittest.Utterance{Text: "hi"})
	do := func(method, url string, body []byte) ([]byte, error) {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Authorization", apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %d", url, resp.StatusCode)
		}
		return io.ReadAll(resp.Body)
	}
	flow := func() error {
		b, err := do("POST", s.URL()+"/stt/v3/recognizeFileAsync", request([]byte("OggS"), nil))
		if err != nil {
			return err
		}
		var op struct{ ID string }
		if err := json.Unmarshal(b, &op); err != nil {
			return err
		}
		if _, err := do("GET", s.OperationsURL()+"/operations/"+op.ID, nil); err != nil {
			return err
		}
		res, err := do("GET", s.URL()+"/stt/v3/getRecognition?operationId="+op.ID, nil)
		if err == nil && !bytes.Contains(res, []byte(`"text":"hi"`)) {
			err = fmt.Errorf("results %s lack the text", res)
		}
		return err
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
	if s.Checks() != 8 || s.Fetches() != 8 || len(s.Recognitions()) != 8 {
		t.Errorf("checks %d, fetches %d, recognitions %d; want 8 each", s.Checks(), s.Fetches(), len(s.Recognitions()))
	}
}
