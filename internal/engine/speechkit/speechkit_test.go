package speechkit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/speechkit/speechkittest"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// The credentials are distinctive so that any leak into an error is found.
const (
	testKey    = "AQVN-9f8e7d6c5b4a-DO-NOT-LEAK"
	testToken  = "t1.iam-token-DO-NOT-LEAK"
	testFolder = "b1g0folder0id0000000"
)

// writeAudio writes size bytes that start like an Ogg file; the stand-in
// checks the magic bytes of the declared container, not the audio.
func writeAudio(t *testing.T, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	copy(data, "OggS")
	path := filepath.Join(t.TempDir(), "audio.ogg")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

func newStandIn(t *testing.T) *speechkittest.Server {
	return speechkittest.New(t, speechkittest.Credentials{APIKey: testKey})
}

func newEngine(t *testing.T, srv *speechkittest.Server) *Engine {
	t.Helper()
	e, err := New(Config{BaseURL: srv.URL(), OperationsURL: srv.OperationsURL(), APIKey: testKey, PollInterval: time.Second}, nil)
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

// rawResults fetches the results directly: the stand-in answers the same
// bytes for a done operation every time.
func rawResults(t *testing.T, srv *speechkittest.Server, id string, rec speechkittest.Recognition) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/stt/v3/getRecognition?operationId="+id, nil)
	req.Header.Set("Authorization", rec.Authorization)
	if rec.FolderID != "" {
		req.Header.Set("x-folder-id", rec.FolderID)
	}
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
	for _, secret := range []string{testKey, testToken} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains a credential", err)
		}
	}
	return ee
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cfg          Config
		wantErr      string
		wantAuth     string
		wantRecog    string
		wantOps      string
		wantModel    string
		wantPoll     time.Duration
		wantFolderID string
	}{
		{name: "defaults with a key", cfg: Config{APIKey: testKey},
			wantAuth: "Api-Key " + testKey, wantRecog: "https://stt.api.cloud.yandex.net/stt/v3/recognizeFileAsync",
			wantOps: "https://operation.api.cloud.yandex.net/operations", wantModel: "general", wantPoll: 15 * time.Second},
		{name: "token, folder, model, poll", cfg: Config{IAMToken: " " + testToken + " ", FolderID: testFolder, Model: "deferred-general", PollInterval: time.Minute},
			wantAuth: "Bearer " + testToken, wantRecog: "https://stt.api.cloud.yandex.net/stt/v3/recognizeFileAsync",
			wantOps: "https://operation.api.cloud.yandex.net/operations", wantModel: "deferred-general", wantPoll: time.Minute, wantFolderID: testFolder},
		{name: "own URLs with slashes", cfg: Config{APIKey: testKey, BaseURL: "http://localhost:8080/sk/", OperationsURL: "http://localhost:8081/", PollInterval: -1},
			wantAuth: "Api-Key " + testKey, wantRecog: "http://localhost:8080/sk/stt/v3/recognizeFileAsync",
			wantOps: "http://localhost:8081/operations", wantModel: "general", wantPoll: 15 * time.Second},
		{name: "no credentials", cfg: Config{}, wantErr: "API key or an IAM token is required"},
		{name: "blank credentials", cfg: Config{APIKey: " ", IAMToken: "\t"}, wantErr: "API key or an IAM token is required"},
		{name: "both credentials", cfg: Config{APIKey: testKey, IAMToken: testToken}, wantErr: "not both"},
		{name: "key with a newline", cfg: Config{APIKey: "abc\ndef"}, wantErr: "spaces or control characters"},
		{name: "token with a space", cfg: Config{IAMToken: "t1 x"}, wantErr: "spaces or control characters"},
		{name: "folder with a space", cfg: Config{APIKey: testKey, FolderID: "b1g x"}, wantErr: "folder id"},
		{name: "folder too long", cfg: Config{APIKey: testKey, FolderID: strings.Repeat("b", 51)}, wantErr: "folder id"},
		{name: "model with a space", cfg: Config{APIKey: testKey, Model: "general rc"}, wantErr: "model"},
		{name: "relative base", cfg: Config{APIKey: testKey, BaseURL: "stt.api.cloud.yandex.net"}, wantErr: "base URL"},
		{name: "other scheme", cfg: Config{APIKey: testKey, BaseURL: "grpc://stt.api.cloud.yandex.net:443"}, wantErr: "base URL"},
		{name: "unparsable operations URL with secret", cfg: Config{APIKey: testKey, OperationsURL: "http://user:s3cr3t@[::1"}, wantErr: "operations URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.cfg, nil)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatal("New = nil error; want an error")
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q; want it to mention %q", err, tc.wantErr)
				}
				for _, secret := range []string{testKey, testToken, "s3cr3t", "abc", "t1 x"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q repeats a secret or URL", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if e.http.Header.Get("Authorization") != tc.wantAuth || e.recognizeURL != tc.wantRecog || e.operationsURL != tc.wantOps ||
				e.model != tc.wantModel || e.pollInterval != tc.wantPoll || e.http.Header.Get("x-folder-id") != tc.wantFolderID {
				t.Errorf("engine = auth %q, recognize %q, operations %q, model %q, poll %v, folder %q; want %q, %q, %q, %q, %v, %q",
					e.http.Header.Get("Authorization"), e.recognizeURL, e.operationsURL, e.model, e.pollInterval, e.http.Header.Get("x-folder-id"),
					tc.wantAuth, tc.wantRecog, tc.wantOps, tc.wantModel, tc.wantPoll, tc.wantFolderID)
			}
			if e.resultsURL != strings.TrimSuffix(e.recognizeURL, "recognizeFileAsync")+"getRecognition" {
				t.Errorf("results URL = %q", e.resultsURL)
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
		t.Errorf("client timeout = %v; want the caller's", e.http.HTTP.Timeout)
	}
}

// Scenario: SpeechKit's timing and limits follow its documentation
func TestNameFormatTimingLimits(t *testing.T) {
	e, err := New(Config{APIKey: testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "speechkit" {
		t.Errorf("Name() = %q; want speechkit", e.Name())
	}
	if f := e.Format(); f.Name != audio.OggOpus16kMono.Name || f.Ext != ".ogg" || f.SampleRate != 16000 || f.Channels != 1 {
		t.Errorf("Format() = %+v; want Ogg Opus, 16 kHz mono", f)
	}
	if got := e.Limits(); got.MaxBytes != 44_000_000 || got.MaxDuration != 4*time.Hour {
		t.Errorf("Limits() = %+v; want 44 MB and 4 h", got)
	}
	// The largest file, base64-encoded in its JSON, stays under 60 MB.
	if n := base64.StdEncoding.EncodedLen(MaxAudioBytes) + 1024; n > speechkittest.MaxBody {
		t.Errorf("a full request is %d bytes; over the %d the service takes", n, speechkittest.MaxBody)
	}
	for d, want := range map[time.Duration]time.Duration{
		-time.Second:     3 * time.Second,
		0:                3 * time.Second,
		5 * time.Second:  3 * time.Second,
		time.Minute:      10 * time.Second,
		90 * time.Second: 15 * time.Second,
		time.Hour:        10 * time.Minute,
		4 * time.Hour:    40 * time.Minute,
		10 * time.Hour:   40 * time.Minute,
	} {
		if got := e.FirstCheck(d); got != want {
			t.Errorf("FirstCheck(%v) = %v; want %v", d, got, want)
		}
	}
	// Ten operations polled at the default interval, each fetching its
	// results once, stay inside 2,500 status checks an hour.
	perHour := 10*int(time.Hour/e.PollInterval()) + 10
	if perHour > 2500 {
		t.Errorf("ten operations make %d requests an hour; the quota is 2,500", perHour)
	}
}

// Scenario: The SpeechKit format fits four hours in one request
func TestFormatFitsTheLimits(t *testing.T) {
	testaudio.Require(t)
	tools, err := audio.NewTools()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{APIKey: testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "speech"+e.Format().Ext)
	d, err := tools.Convert(context.Background(), testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870"), out, e.Format(), nil)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	info, err := tools.Probe(context.Background(), out)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if info.Codec != "opus" || !strings.Contains(info.Container, "ogg") {
		t.Errorf("converted file is %s in %s; want opus in ogg", info.Codec, info.Container)
	}
	perSecond := float64(info.Size) / d.Seconds()
	t.Logf("%.0f bytes per second", perSecond)
	if full := perSecond * MaxAudioDuration.Seconds(); full > MaxAudioBytes {
		t.Errorf("%.0f bytes per second make %.0f bytes in %v; over the %d one request takes", perSecond, full, MaxAudioDuration, MaxAudioBytes)
	}

	// The service accepts it as OGG_OPUS.
	srv := newStandIn(t)
	srv.SetRunningChecks(0)
	eng := newEngine(t, srv)
	sub, err := eng.Submit(context.Background(), engine.Request{AudioPath: out, Language: "en"})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if _, _, err := poll(t, eng, sub.OperationID, 3); err != nil {
		t.Errorf("Check: %v; want the converted audio accepted", err)
	}
}

var ruUtterances = []speechkittest.Utterance{
	{Text: "привет мир", Normalized: "Привет, мир!", Language: "ru-RU", EndMs: 2000,
		Words: []speechkittest.Word{{Text: "привет", StartMs: 459, EndMs: 900}, {Text: "мир", StartMs: 950, EndMs: 1400}}},
	{Text: "как дела", Normalized: "Как дела?", Language: "ru-RU", StartMs: 2000, EndMs: 4000,
		Words: []speechkittest.Word{{Text: "как", StartMs: 2300, EndMs: 2500}, {Text: "дела", StartMs: 2550, EndMs: 3100}}},
}

// Scenario: SpeechKit recognises a recording asynchronously
// Scenario: SpeechKit's word times reach the transcript
func TestSubmitAndPoll(t *testing.T) {
	for _, tc := range []struct {
		name         string
		creds        speechkittest.Credentials
		cfg          Config
		language     string
		checks       int
		utterances   []speechkittest.Utterance
		wantAuth     string
		wantFolder   string
		wantCode     string
		wantText     string
		wantLanguage string
		wantSegments []engine.Segment
	}{
		{
			name: "Russian with an API key", creds: speechkittest.Credentials{APIKey: testKey}, cfg: Config{APIKey: testKey},
			language: "ru", checks: 2, utterances: ruUtterances,
			wantAuth: "Api-Key " + testKey, wantCode: "ru-RU",
			wantText: "Привет, мир! Как дела?", wantLanguage: "ru",
			wantSegments: []engine.Segment{
				{Start: 459 * time.Millisecond, End: 1400 * time.Millisecond, Text: "Привет, мир!"},
				{Start: 2300 * time.Millisecond, End: 3100 * time.Millisecond, Text: "Как дела?"},
			},
		},
		{
			name: "detected language with a user's IAM token and folder", creds: speechkittest.Credentials{IAMToken: testToken, FolderID: testFolder},
			cfg: Config{IAMToken: testToken, FolderID: testFolder}, language: "", checks: 0,
			utterances: []speechkittest.Utterance{
				{Text: "hello there", Language: "en-US", StartMs: 100, EndMs: 900},
				{Text: "privet", Normalized: "Привет.", Language: "ru-RU", Words: []speechkittest.Word{{Text: "Привет", StartMs: 1000, EndMs: 1400}}},
			},
			wantAuth: "Bearer " + testToken, wantFolder: testFolder, wantCode: "auto",
			wantText: "hello there Привет.", wantLanguage: "en",
			wantSegments: []engine.Segment{
				{Start: 100 * time.Millisecond, End: 900 * time.Millisecond, Text: "hello there"},
				{Start: time.Second, End: 1400 * time.Millisecond, Text: "Привет."},
			},
		},
		{
			name: "regional tag, no languages reported", creds: speechkittest.Credentials{APIKey: testKey}, cfg: Config{APIKey: testKey, Model: "general:rc"},
			language: "pt-BR", checks: 5,
			utterances: []speechkittest.Utterance{{Text: "olá", Words: []speechkittest.Word{{Text: "olá", StartMs: 10, EndMs: 300}}}},
			wantAuth:   "Api-Key " + testKey, wantCode: "pt-BR", wantText: "olá",
			wantSegments: []engine.Segment{{Start: 10 * time.Millisecond, End: 300 * time.Millisecond, Text: "olá"}},
		},
		{
			name: "silence", creds: speechkittest.Credentials{APIKey: testKey}, cfg: Config{APIKey: testKey},
			language: "en", checks: 1, wantAuth: "Api-Key " + testKey, wantCode: "en-US",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := speechkittest.New(t, tc.creds)
			srv.SetRunningChecks(tc.checks)
			srv.SetResult(tc.utterances...)
			cfg := tc.cfg
			cfg.BaseURL, cfg.OperationsURL = srv.URL(), srv.OperationsURL()
			e, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			path, data := writeAudio(t, 4096)

			sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: tc.language, Duration: time.Minute})
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if sub.Done() || sub.OperationID == "" {
				t.Fatalf("Submit = %+v; want a running operation", sub)
			}
			if n := srv.Requests(); n != 1 {
				t.Errorf("requests after Submit = %d; want 1", n)
			}
			recs := srv.Recognitions()
			if len(recs) != 1 {
				t.Fatalf("recognitions = %d; want 1", len(recs))
			}
			rec := recs[0]
			if rec.Authorization != tc.wantAuth || rec.FolderID != tc.wantFolder {
				t.Errorf("Authorization %q, x-folder-id %q; want %q, %q", rec.Authorization, rec.FolderID, tc.wantAuth, tc.wantFolder)
			}
			if !bytes.Equal(rec.Content, data) {
				t.Errorf("content = %d bytes; want the file's %d, intact", len(rec.Content), len(data))
			}
			if got := fmt.Sprint(rec.Fields); got != "[content recognitionModel]" && got != "[recognitionModel content]" {
				t.Errorf("body fields = %v; want content and recognitionModel only", rec.Fields)
			}
			wantModel := cfg.Model
			if wantModel == "" {
				wantModel = "general"
			}
			want := fmt.Sprintf("map[audioFormat:map[containerAudio:map[containerAudioType:OGG_OPUS]] "+
				"languageRestriction:map[languageCode:[%s] restrictionType:WHITELIST] model:%s "+
				"textNormalization:map[literatureText:true profanityFilter:false textNormalization:TEXT_NORMALIZATION_ENABLED]]", tc.wantCode, wantModel)
			if got := fmt.Sprint(rec.Model); got != want {
				t.Errorf("recognitionModel = %s; want %s", got, want)
			}

			done, checks, err := poll(t, e, sub.OperationID, 20)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if !done.Done() {
				t.Fatal("the operation never finished")
			}
			if checks != tc.checks+1 || srv.Fetches() != 1 {
				t.Errorf("checks until done = %d, result fetches %d; want %d, 1", checks, srv.Fetches(), tc.checks+1)
			}
			res := done.Result
			if res.Text != tc.wantText || res.Language != tc.wantLanguage {
				t.Errorf("Text %q, Language %q; want %q, %q", res.Text, res.Language, tc.wantText, tc.wantLanguage)
			}
			if fmt.Sprint(res.Segments) != fmt.Sprint(tc.wantSegments) {
				t.Errorf("Segments = %v; want %v", res.Segments, tc.wantSegments)
			}
			// Every word SpeechKit timed is a word of the result, as heard.
			var wantWords []engine.Word
			for _, u := range tc.utterances {
				for _, w := range u.Words {
					wantWords = append(wantWords, engine.Word{Start: time.Duration(w.StartMs) * time.Millisecond, End: time.Duration(w.EndMs) * time.Millisecond, Text: w.Text})
				}
			}
			if fmt.Sprint(res.Words) != fmt.Sprint(wantWords) {
				t.Errorf("Words = %v; want %v", res.Words, wantWords)
			}
			if raw := rawResults(t, srv, sub.OperationID, rec); !bytes.Equal(res.Raw, raw) {
				t.Errorf("Raw = %s; want the exact stream %s", res.Raw, raw)
			}
			if res.RawType != "application/json" {
				t.Errorf("RawType = %q; want application/json", res.RawType)
			}
		})
	}
}

// Scenario: SpeechKit's result stream becomes text, segments and a language
func TestParseResults(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	final := func(index int, ch, text string, words string, langs string) string {
		return fmt.Sprintf(`{"result":{"audioCursors":{"finalIndex":"%d"},"final":{"alternatives":[{"words":[%s],"text":%q,"startTimeMs":"0","endTimeMs":"9000","confidence":0,"languages":[%s]}],"channelTag":%q},"channelTag":%q}}`,
			index, words, text, langs, ch, ch)
	}
	refined := func(index int, ch, text, words string) string {
		return fmt.Sprintf(`{"result":{"finalRefinement":{"finalIndex":"%d","normalizedText":{"alternatives":[{"words":[%s],"text":%q}],"channelTag":%q}},"channelTag":%q}}`,
			index, words, text, ch, ch)
	}
	w := func(text string, start, end int) string {
		return fmt.Sprintf(`{"text":%q,"startTimeMs":"%d","endTimeMs":"%d"}`, text, start, end)
	}
	for _, tc := range []struct {
		name     string
		body     string
		wantText string
		wantLang string
		wantSegs []engine.Segment
	}{
		{name: "empty stream", body: "", wantText: ""},
		{
			name:     "refinement preferred, raw kept without one",
			body:     final(0, "0", "one two", w("one", 100, 200)+","+w("two", 300, 400), "") + "\n" + refined(0, "0", "1 2.", w("1", 100, 200)) + "\n" + final(1, "0", "three", w("three", 500, 800), ""),
			wantText: "1 2. three",
			wantSegs: []engine.Segment{{Start: ms(100), End: ms(200), Text: "1 2."}, {Start: ms(500), End: ms(800), Text: "three"}},
		},
		{
			name:     "refinement without words borrows the raw timings",
			body:     final(0, "0", "ten", w("ten", 1000, 1500), "") + refined(0, "0", "10.", ""),
			wantText: "10.",
			wantSegs: []engine.Segment{{Start: ms(1000), End: ms(1500), Text: "10."}},
		},
		{
			name:     "no words: the alternative's bounds",
			body:     final(0, "0", "hmm", "", ""),
			wantText: "hmm",
			wantSegs: []engine.Segment{{Start: 0, End: ms(9000), Text: "hmm"}},
		},
		{
			name:     "two channels interleaved by time",
			body:     final(0, "0", "a", w("a", 100, 200), "") + final(0, "1", "b", w("b", 50, 150), "") + final(1, "0", "c", w("c", 300, 400), ""),
			wantText: "b a c",
			wantSegs: []engine.Segment{{Start: ms(50), End: ms(150), Text: "b"}, {Start: ms(100), End: ms(200), Text: "a"}, {Start: ms(300), End: ms(400), Text: "c"}},
		},
		{
			name: "language of most words",
			body: final(0, "0", "one", w("one", 0, 1), `{"languageCode":"en-US","probability":0.9}`) +
				final(1, "0", "раз два три", w("раз", 2, 3), `{"languageCode":"en-US","probability":"0.2"},{"languageCode":"ru-RU","probability":"0.8"}`),
			wantText: "one раз два три", wantLang: "ru",
			wantSegs: []engine.Segment{{Start: 0, End: ms(1), Text: "one"}, {Start: ms(2), End: ms(3), Text: "раз два три"}},
		},
		{
			name: "other messages, blank finals and numbers as numbers",
			body: `{"result":{"statusCode":{"codeType":"WORKING","message":"ok"}}}` + `{"result":{"partial":{"alternatives":[{"text":"par"}]}}}` +
				final(0, "0", "  ", "", "") + `{"result":{"eouUpdate":{"timeMs":"7400"}}}` +
				`{"result":{"audioCursors":{"finalIndex":1},"final":{"alternatives":[{"text":"x  y","words":[{"text":"x","startTimeMs":5,"endTimeMs":7}]}]}}}`,
			wantText: "x y",
			wantSegs: []engine.Segment{{Start: ms(5), End: ms(7), Text: "x y"}},
		},
		{
			name:     "an array of bare messages",
			body:     `[{"audioCursors":{"finalIndex":"0"},"final":{"alternatives":[{"text":"bare","startTimeMs":"10","endTimeMs":"5"}]}}]`,
			wantText: "bare",
			wantSegs: []engine.Segment{{Start: ms(10), End: ms(10), Text: "bare"}},
		},
		{
			name:     "finals without cursors are not merged",
			body:     `{"result":{"final":{"alternatives":[{"text":"a"}]}}}{"result":{"final":{"alternatives":[{"text":"b"}]}}}`,
			wantText: "a b",
			wantSegs: []engine.Segment{{Text: "a"}, {Text: "b"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := parseResults([]byte(tc.body), testKey)
			if err != nil {
				t.Fatalf("parseResults: %v", err)
			}
			if res.Text != tc.wantText || res.Language != tc.wantLang {
				t.Errorf("Text %q, Language %q; want %q, %q", res.Text, res.Language, tc.wantText, tc.wantLang)
			}
			if fmt.Sprint(res.Segments) != fmt.Sprint(tc.wantSegs) {
				t.Errorf("Segments = %v; want %v", res.Segments, tc.wantSegs)
			}
		})
	}

	for _, tc := range []struct {
		name, body string
		want       engine.Kind
		wantInMsg  string
	}{
		{"not JSON", "<html>", engine.Unavailable, "malformed"},
		{"a string", `"text"`, engine.Unavailable, "malformed"},
		{"bad number", `{"result":{"audioCursors":{"finalIndex":"x"},"final":{"alternatives":[{"text":"a"}]}}}`, engine.Unavailable, "malformed"},
		{"truncated", final(0, "0", "a", "", "")[:40], engine.Unavailable, "malformed"},
		{"error after results", final(0, "0", "a", "", "") + `{"error":{"code":14,"message":"backend went away","details":[]}}`, engine.Unavailable, "backend went away"},
		{"old gateway error", `{"error":{"grpc_code":5,"http_code":404,"message":"no such operation","http_status":"Not Found"}}`, engine.Rejected, "no such operation"},
		{"unauthenticated", `{"error":{"code":16,"message":"token expired ` + testKey + `"}}`, engine.Unauthorized, "token expired [redacted]"},
		{"invalid argument", `{"error":{"code":3}}`, engine.Rejected, "invalid argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseResults([]byte(tc.body), testKey)
			if err == nil {
				t.Fatal("parseResults = nil error; want one")
			}
			ee := asEngineError(t, err)
			if ee.Kind != tc.want || !strings.Contains(ee.Message, tc.wantInMsg) {
				t.Errorf("error = %s %q; want %s mentioning %q", ee.Kind, ee.Message, tc.want, tc.wantInMsg)
			}
		})
	}
}

// Scenario: A SpeechKit operation that ends in an error is a failed operation
func TestOperationFails(t *testing.T) {
	t.Run("service error", func(t *testing.T) {
		srv := newStandIn(t)
		srv.FailWith(3, "Audio duration exceeds the limit; key="+testKey)
		e := newEngine(t, srv)
		path, _ := writeAudio(t, 256)
		sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		_, checks, err := poll(t, e, sub.OperationID, 10)
		ee := asEngineError(t, err)
		if ee.Kind != engine.OperationFailed || !strings.Contains(ee.Message, "(INVALID_ARGUMENT): Audio duration exceeds the limit; key=[redacted]") {
			t.Errorf("error = %s %q; want %s with the code and the scrubbed message", ee.Kind, ee.Message, engine.OperationFailed)
		}
		if checks != 3 || srv.Fetches() != 0 {
			t.Errorf("checks = %d, fetches = %d; want 3, 0", checks, srv.Fetches())
		}
		// The operation as the service described it is the failure's raw
		// answer, and its code a field of its own.
		if ee.Code != "INVALID_ARGUMENT" {
			t.Errorf("Code = %q; want INVALID_ARGUMENT", ee.Code)
		}
		var op struct {
			ID    string `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(ee.Raw, &op); err != nil || op.ID != sub.OperationID || op.Error.Code != 3 || ee.RawType != "application/json" {
			t.Errorf("Raw = %s (%s); want the failed operation %s", ee.Raw, ee.RawType, sub.OperationID)
		}
	})
	t.Run("audio that does not decode", func(t *testing.T) {
		srv := newStandIn(t)
		srv.SetRunningChecks(0)
		e := newEngine(t, srv)
		path := filepath.Join(t.TempDir(), "a.ogg")
		if err := os.WriteFile(path, []byte("RIFF not ogg"), 0o600); err != nil {
			t.Fatal(err)
		}
		sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		_, err = e.Check(context.Background(), sub.OperationID)
		if ee := asEngineError(t, err); ee.Kind != engine.OperationFailed || !strings.Contains(ee.Message, "OGG_OPUS") {
			t.Errorf("error = %s %q; want %s naming the format", ee.Kind, ee.Message, engine.OperationFailed)
		}
	})
	t.Run("error before done", func(t *testing.T) {
		srv := newStandIn(t)
		e := newEngine(t, srv)
		srv.FailNext("/operations/", 1, 200, `{"id":"e03abc","done":false,"error":{"code":13,"message":"Internal"}}`, "")
		_, err := e.Check(context.Background(), "e03abc")
		if ee := asEngineError(t, err); ee.Kind != engine.OperationFailed || !strings.Contains(ee.Message, "INTERNAL") {
			t.Errorf("error = %s %q; want %s", ee.Kind, ee.Message, engine.OperationFailed)
		}
	})
	t.Run("failed already on submit", func(t *testing.T) {
		srv := newStandIn(t)
		e := newEngine(t, srv)
		srv.FailNext("/stt/v3/recognizeFileAsync", 1, 200, `{"id":"e03abc","done":true,"error":{"code":3,"message":"bad audio"}}`, "")
		path, _ := writeAudio(t, 16)
		_, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
		if ee := asEngineError(t, err); ee.Kind != engine.OperationFailed || !strings.Contains(ee.Message, "bad audio") {
			t.Errorf("error = %s %q; want %s", ee.Kind, ee.Message, engine.OperationFailed)
		}
	})
}

// Scenario: A SpeechKit operation that never finishes stays running
func TestNeverFinishes(t *testing.T) {
	srv := newStandIn(t)
	srv.NeverFinish()
	e := newEngine(t, srv)
	path, _ := writeAudio(t, 256)
	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "en"})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	got, checks, err := poll(t, e, sub.OperationID, 30)
	if err != nil || got.Done() {
		t.Fatalf("after %d checks: %+v, %v; want still running", checks, got, err)
	}
	if srv.Checks() != 30 || srv.Fetches() != 0 {
		t.Errorf("checks %d, fetches %d; want 30, 0", srv.Checks(), srv.Fetches())
	}
	// Proto3 JSON may leave out "done" while it is false.
	srv.FailNext("/operations/", 1, 200, `{"id":"`+sub.OperationID+`","description":"STT v3 async recognition"}`, "")
	if sub, err := e.Check(context.Background(), sub.OperationID); err != nil || sub.Done() {
		t.Errorf("Check without done = %+v, %v; want running", sub, err)
	}
}

// Scenario: SpeechKit errors are classified by status
func TestErrors(t *testing.T) {
	httpDate := func() string { return time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat) }
	status := func(code int, msg string) string {
		return fmt.Sprintf(`{"code":%d,"message":%q,"details":[{"@type":"type.googleapis.com/google.rpc.RequestInfo","requestId":"r1"}]}`, code, msg)
	}
	const (
		recognize = "/stt/v3/recognizeFileAsync"
		ops       = "/operations/"
		results   = "/stt/v3/getRecognition"
	)
	type fail struct {
		path, body, retryAfter string
		status                 int
	}
	for _, tc := range []struct {
		name string
		// cfg overrides the engine's credentials; the stand-in knows testKey only.
		cfg      *Config
		language string
		fail     *fail
		// at: 0 on Submit, 1 on the check of an operation, 2 on the check of
		// a done operation (the results request).
		at           int
		wantKind     engine.Kind
		wantStatus   int
		wantRetry    time.Duration
		retryWithin  time.Duration
		wantInMsg    string
		wantRequests int
	}{
		{name: "wrong key", cfg: &Config{APIKey: "AQVN-wrong"}, wantKind: engine.Unauthorized, wantStatus: 401, wantInMsg: "The token is invalid", wantRequests: 1},
		{name: "token the stand-in does not know", cfg: &Config{IAMToken: testToken}, wantKind: engine.Unauthorized, wantStatus: 401, wantInMsg: "refused the credentials for the recognition request", wantRequests: 1},
		{name: "folder of another cloud", cfg: &Config{APIKey: testKey, FolderID: "b1gsomeoneelse"}, wantKind: engine.Unauthorized, wantStatus: 403, wantInMsg: "denied", wantRequests: 1},
		{name: "403 echoing the key", fail: &fail{recognize, status(7, "Permission denied for "+testKey), "", 403}, wantKind: engine.Unauthorized, wantStatus: 403, wantInMsg: "Permission denied for [redacted]", wantRequests: 1},
		{name: "language the service does not know", language: "uz-UZ", wantKind: engine.Rejected, wantStatus: 400, wantInMsg: `rejected the recognition request: unsupported language code "uz-UZ"`, wantRequests: 1},
		{name: "400", fail: &fail{recognize, status(3, "content is empty"), "", 400}, wantKind: engine.Rejected, wantStatus: 400, wantInMsg: "content is empty", wantRequests: 1},
		{name: "413", fail: &fail{recognize, status(8, "request too large"), "", 413}, wantKind: engine.Rejected, wantStatus: 413, wantInMsg: "request too large", wantRequests: 1},
		{name: "429 with Retry-After", fail: &fail{recognize, status(8, "Quota exceeded"), "7", 429}, wantKind: engine.Unavailable, wantStatus: 429, wantRetry: 7 * time.Second, wantInMsg: "Quota exceeded", wantRequests: 1},
		{name: "429 with RetryInfo", fail: &fail{recognize, `{"code":8,"message":"Too many requests","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"42s"}]}`, "", 429}, wantKind: engine.Unavailable, wantStatus: 429, wantRetry: 42 * time.Second, wantInMsg: "Too many requests", wantRequests: 1},
		{name: "500 html", fail: &fail{recognize, "<html>oops</html>", "", 500}, wantKind: engine.Unavailable, wantStatus: 500, wantInMsg: "internal server error", wantRequests: 1},
		{name: "503 on results", at: 2, fail: &fail{results, status(14, "Service unavailable"), "", 503}, wantKind: engine.Unavailable, wantStatus: 503, wantInMsg: "cannot serve the results request now: Service unavailable", wantRequests: 3},
		{name: "502 on check", at: 1, fail: &fail{ops, "bad gateway", "", 502}, wantKind: engine.Unavailable, wantStatus: 502, wantInMsg: "bad gateway", wantRequests: 2},
		{name: "401 on check", at: 1, fail: &fail{ops, status(16, "Unauthenticated"), "", 401}, wantKind: engine.Unauthorized, wantStatus: 401, wantInMsg: "operation check: Unauthenticated", wantRequests: 2},
		{name: "404 on check", at: 1, fail: &fail{ops, status(5, "Operation not found"), "", 404}, wantKind: engine.Rejected, wantStatus: 404, wantInMsg: "no such operation: Operation not found", wantRequests: 2},
		{name: "404 on results", at: 2, fail: &fail{results, status(5, "Results expired"), "", 404}, wantKind: engine.Rejected, wantStatus: 404, wantInMsg: "keeps them for 3 days", wantRequests: 3},
		{name: "redirect not followed", fail: &fail{recognize, "", "", 308}, wantKind: engine.Rejected, wantStatus: 308, wantInMsg: "base URL", wantRequests: 1},
		{name: "malformed JSON on submit", fail: &fail{recognize, `{"id": "e03`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 1},
		{name: "no id on submit", fail: &fail{recognize, `{"done":false}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "no operation id", wantRequests: 1},
		{name: "id that is not an id", fail: &fail{recognize, `{"id":"../../stt"}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "unusable operation id", wantRequests: 1},
		{name: "null on check", at: 1, fail: &fail{ops, `null`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 2},
		{name: "malformed JSON on check", at: 1, fail: &fail{ops, `<html>captive portal</html>`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response", wantRequests: 2},
		{name: "another operation on check", at: 1, fail: &fail{ops, `{"id":"e03other","done":true}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "another operation", wantRequests: 2},
		{name: "malformed results", at: 2, fail: &fail{results, `{"result":{"final":`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "malformed response to the results request", wantRequests: 3},
		{name: "error in the results stream", at: 2, fail: &fail{results, `{"error":{"code":13,"message":"stream broke"}}`, "", 200}, wantKind: engine.Unavailable, wantStatus: 200, wantInMsg: "broke off the results: stream broke", wantRequests: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newStandIn(t)
			srv.SetRunningChecks(0)
			cfg := Config{APIKey: testKey}
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			cfg.BaseURL, cfg.OperationsURL = srv.URL(), srv.OperationsURL()
			e, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			path, _ := writeAudio(t, 1024)
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
			if tc.at == 0 {
				inject()
				sub, err = e.Submit(context.Background(), engine.Request{AudioPath: path, Language: tc.language})
			} else {
				pending, serr := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "ru"})
				if serr != nil {
					t.Fatalf("Submit: %v", serr)
				}
				inject()
				sub, err = e.Check(context.Background(), pending.OperationID)
			}
			if err == nil {
				t.Fatalf("got %+v; want an error", sub)
			}
			if sub.Done() || sub.OperationID != "" {
				t.Errorf("submission = %+v; want an empty one with the error", sub)
			}
			ee := asEngineError(t, err)
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

// Scenario: Languages are given to SpeechKit in its own codes
func TestLanguages(t *testing.T) {
	for in, want := range map[string]string{
		"": "auto", " ": "auto", "auto": "auto", "AUTO": "auto",
		"ru": "ru-RU", "RU": "ru-RU", "ru-RU": "ru-RU", "ru_ru": "ru-RU", "en": "en-US", "en-GB": "en-US",
		"kk": "kk-KK", "de": "de-DE", "tr": "tr-TR", "pt": "pt-PT", "pt-BR": "pt-BR", "pt_br": "pt-BR", "uz-UZ": "uz-UZ",
	} {
		got, err := languageCode(in)
		if err != nil || got != want {
			t.Errorf("languageCode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	srv := newStandIn(t)
	e := newEngine(t, srv)
	path, _ := writeAudio(t, 64)
	for _, lang := range []string{"uz", "klingon", "x", "1-2"} {
		_, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: lang})
		if ee := asEngineError(t, err); ee.Kind != engine.Rejected || !strings.Contains(ee.Message, "leave the language empty") {
			t.Errorf("Submit(%q) = %s %q; want %s with advice", lang, ee.Kind, ee.Message, engine.Rejected)
		}
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("requests = %d; want none for languages refused locally", n)
	}
}

// Scenario: Audio SpeechKit would refuse is not sent
func TestRefusedBeforeSending(t *testing.T) {
	srv := newStandIn(t)
	e := newEngine(t, srv)
	e.maxBytes = 1000
	big, _ := writeAudio(t, 1001)
	_, err := e.Submit(context.Background(), engine.Request{AudioPath: big})
	if ee := asEngineError(t, err); ee.Kind != engine.Rejected || !strings.Contains(ee.Message, "at most 1000") {
		t.Errorf("too large: %s %q; want %s naming the limit", ee.Kind, ee.Message, engine.Rejected)
	}
	empty := filepath.Join(t.TempDir(), "empty.ogg")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.Submit(context.Background(), engine.Request{AudioPath: empty})
	if ee := asEngineError(t, err); ee.Kind != engine.Rejected || !strings.Contains(ee.Message, "empty") {
		t.Errorf("empty: %s %q; want %s", ee.Kind, ee.Message, engine.Rejected)
	}
	_, err = e.Submit(context.Background(), engine.Request{AudioPath: filepath.Join(t.TempDir(), "missing.ogg")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v; want os.ErrNotExist", err)
	}
	if _, ok := engine.AsError(err); ok {
		t.Errorf("missing file is an engine error; want a plain one")
	}
	for _, id := range []string{"", "..", "a/b", "a?b", "a b", strings.Repeat("a", 200)} {
		_, err := e.Check(context.Background(), id)
		if ee := asEngineError(t, err); ee.Kind != engine.Rejected {
			t.Errorf("Check(%q): %s; want %s", id, ee.Kind, engine.Rejected)
		}
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

// Scenario: An unreachable SpeechKit is no_ack
func TestUnreachable(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	base := dead.URL
	dead.Close()
	e, err := New(Config{BaseURL: base, OperationsURL: base, APIKey: testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := writeAudio(t, 1024)
	_, err = e.Submit(context.Background(), engine.Request{AudioPath: path})
	if ee := asEngineError(t, err); ee.Kind != engine.Unreachable || ee.Err == nil || !strings.Contains(ee.Message, "could not reach SpeechKit") {
		t.Errorf("Submit: %s %q (cause %v); want %s with the cause", ee.Kind, ee.Message, ee.Err, engine.Unreachable)
	}
	_, err = e.Check(context.Background(), "e03abc")
	if ee := asEngineError(t, err); ee.Kind != engine.Unreachable {
		t.Errorf("Check: %s; want %s", ee.Kind, engine.Unreachable)
	}

	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close() // hanging up is the answer
		}
	}))
	t.Cleanup(hangUp.Close)
	e, _ = New(Config{BaseURL: hangUp.URL, OperationsURL: hangUp.URL, APIKey: testKey}, nil)
	_, err = e.Check(context.Background(), "e03abc")
	if ee := asEngineError(t, err); ee.Kind != engine.Unreachable {
		t.Errorf("closed connection: %s; want %s", ee.Kind, engine.Unreachable)
	}
}

// Scenario: A cancelled SpeechKit call returns the context's error
func TestContextEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(context.Context) (context.Context, func())
		want error
	}{
		{"cancelled", func(ctx context.Context) (context.Context, func()) { return context.WithCancel(ctx) }, context.Canceled},
		{"deadline", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			return ctx, func() { <-ctx.Done(); cancel() }
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var requests atomic.Int32
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			// A slow service: it reads a little of the body, then stalls.
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
			e, err := New(Config{BaseURL: srv.URL, OperationsURL: srv.URL, APIKey: testKey}, nil)
			if err != nil {
				t.Fatal(err)
			}
			path, _ := writeAudio(t, 4<<20)
			ctx, stop := tc.stop(context.Background())
			go func() {
				<-arrived
				stop()
			}()
			_, err = e.Submit(ctx, engine.Request{AudioPath: path})
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

	srv := newStandIn(t)
	e := newEngine(t, srv)
	path, _ := writeAudio(t, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Submit(ctx, engine.Request{AudioPath: path}); !errors.Is(err, context.Canceled) {
		t.Errorf("Submit: %v; want context.Canceled", err)
	}
	if _, err := e.Check(ctx, "e03abc"); !errors.Is(err, context.Canceled) {
		t.Errorf("Check: %v; want context.Canceled", err)
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("requests = %d; want 0", n)
	}
}

// Scenario: A large recording is streamed to SpeechKit in bounded memory
func TestLargeFileStreamed(t *testing.T) {
	const size = 40 << 20
	path, data := writeAudio(t, size)
	want := sha256.Sum256(data)
	data = nil

	// A service that decodes the content as it arrives, so that neither
	// side holds the recording and the allocations measured are the
	// engine's.
	var (
		contentLength atomic.Int64
		got           atomic.Value
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		contentLength.Store(r.ContentLength)
		br := bufio.NewReaderSize(r.Body, 64<<10)
		if _, err := br.ReadString('"'); err != nil { // up to the first key
			http.Error(w, err.Error(), 400)
			return
		}
		// Skip to the content value.
		for {
			key, err := br.ReadString('"')
			if err != nil {
				http.Error(w, "no content", 400)
				return
			}
			if key == `content"` {
				break
			}
		}
		if _, err := br.ReadString('"'); err != nil { // the value's opening quote
			http.Error(w, err.Error(), 400)
			return
		}
		h := sha256.New()
		if _, err := io.Copy(h, base64.NewDecoder(base64.StdEncoding, &untilQuote{r: br})); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		got.Store(h.Sum(nil))
		if _, err := io.Copy(io.Discard, br); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := io.WriteString(w, `{"id":"e03large","done":false}`); err != nil {
			t.Errorf("answer: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	e, err := New(Config{BaseURL: srv.URL, OperationsURL: srv.URL, APIKey: testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if sub.OperationID != "e03large" {
		t.Errorf("OperationID = %q", sub.OperationID)
	}
	if h, _ := got.Load().([]byte); !bytes.Equal(h, want[:]) {
		t.Errorf("the service did not receive the %d bytes intact", size)
	}
	if cl := contentLength.Load(); cl < int64(base64.StdEncoding.EncodedLen(size)) || cl > int64(base64.StdEncoding.EncodedLen(size))+1024 {
		t.Errorf("Content-Length = %d; want the encoded size %d plus the JSON around it", cl, base64.StdEncoding.EncodedLen(size))
	}
	// Holding the file, or its base64, would allocate 40 or 53 MiB.
	t.Logf("allocated %d", after.TotalAlloc-before.TotalAlloc)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("Submit allocated %d bytes for a %d-byte file; want it streamed", alloc, size)
	}
}

// untilQuote reads up to the closing quote of a JSON string.
type untilQuote struct {
	r    *bufio.Reader
	done bool
}

func (u *untilQuote) Read(p []byte) (int, error) {
	if u.done {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) {
		b, err := u.r.ReadByte()
		if err != nil {
			return n, err
		}
		if b == '"' {
			u.done = true
			break
		}
		p[n] = b
		n++
	}
	return n, nil
}

func TestResponseTooLarge(t *testing.T) {
	srv := newStandIn(t)
	e := newEngine(t, srv)
	e.http.MaxResponse = 1024
	srv.FailNext("/operations/", 1, 200, `{"id":"e03abc","description":"`+strings.Repeat("a", 4096)+`"}`, "")
	_, err := e.Check(context.Background(), "e03abc")
	if ee := asEngineError(t, err); ee.Kind != engine.Unavailable || !strings.Contains(ee.Message, "larger than 1024 bytes") {
		t.Errorf("error = %v; want an %s malformed response", err, engine.Unavailable)
	}
}
