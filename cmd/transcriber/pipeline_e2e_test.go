package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/engine/assemblyai/assemblyaitest"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// openAIStandIn speaks the wire format of POST /v1/audio/transcriptions
// and /v1/audio/translations: multipart form in, verbose JSON (with words
// when timestamp_granularities[] asks), diarized JSON for a diarize model,
// or an OpenAI error object out.
type openAIStandIn struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	text     string
	requests int
	bad      []string
	// prompts are the prompt fields received, in order.
	prompts []string
	// files are the file parts received, in order.
	files []standInFile
}

// standInFile is one file part as the stand-in received it.
type standInFile struct {
	name, contentType string
	data              []byte
}

func (s *openAIStandIn) received() []standInFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.files)
}

// openAIFormats are the extensions OpenAI's transcription endpoint takes,
// in the order of its error message, each with the start its bytes must
// have: OpenAI refuses a file whose name or content is none of these.
var openAIFormats = []struct {
	ext   string
	looks func([]byte) bool
}{
	{"flac", prefixed("fLaC")},
	{"m4a", boxed("ftyp")},
	{"mp3", mpegAudio},
	{"mp4", boxed("ftyp")},
	{"mpeg", mpegAudio},
	{"mpga", mpegAudio},
	{"oga", prefixed("OggS")},
	{"ogg", prefixed("OggS")},
	{"wav", func(b []byte) bool { return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE" }},
	{"webm", prefixed("\x1a\x45\xdf\xa3")},
}

func prefixed(p string) func([]byte) bool {
	return func(b []byte) bool { return strings.HasPrefix(string(b), p) }
}

func boxed(kind string) func([]byte) bool {
	return func(b []byte) bool { return len(b) >= 8 && string(b[4:8]) == kind }
}

func mpegAudio(b []byte) bool {
	return strings.HasPrefix(string(b), "ID3") || len(b) >= 2 && b[0] == 0xFF && b[1]&0xE0 == 0xE0
}

// openAIInvalidFormat is OpenAI's answer to a file it does not take.
const openAIInvalidFormat = `{"error":{"message":"Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']","type":"invalid_request_error","param":null,"code":null}}`

// openAITakes reports whether OpenAI would decode a file part so named.
func openAITakes(name string, data []byte) bool {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(name), "."))
	for _, f := range openAIFormats {
		if f.ext == ext {
			return f.looks(data)
		}
	}
	return false
}

func newOpenAIStandIn(t testing.TB) *openAIStandIn {
	s := &openAIStandIn{status: http.StatusOK, text: testaudio.GoForwardText}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *openAIStandIn) set(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

func (s *openAIStandIn) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// serve answers one request. Its writes go unchecked: a client that cannot
// read the answer observes that failure itself.
func (s *openAIStandIn) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == "PRI" {
		// An HTTP/2 preface: a gRPC client of another test's Temporal
		// server, still dialling the port that server had before it was
		// stopped or restarted and this stand-in was given. No engine
		// sends it; it is not a request of the job under test.
		w.WriteHeader(http.StatusHTTPVersionNotSupported)
		return
	}
	s.mu.Lock()
	s.requests++
	status, text := s.status, s.text
	s.mu.Unlock()
	problem := func(p string) {
		s.mu.Lock()
		s.bad = append(s.bad, p)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, p)
	}
	translate := r.URL.Path == "/v1/audio/translations"
	if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions" && !translate {
		problem("unexpected " + r.Method + " " + r.URL.Path)
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		problem("not multipart: " + r.Header.Get("Content-Type"))
		return
	}
	fields, lists, fileBytes := map[string]string{}, map[string][]string{}, 0
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			problem("bad multipart: " + err.Error())
			return
		}
		b, _ := io.ReadAll(p)
		if p.FormName() == "file" {
			fileBytes = len(b)
			s.mu.Lock()
			s.files = append(s.files, standInFile{name: p.FileName(), contentType: p.Header.Get("Content-Type"), data: b})
			s.mu.Unlock()
			if !openAITakes(p.FileName(), b) {
				s.mu.Lock()
				s.bad = append(s.bad, "invalid file format: "+p.FileName())
				s.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, openAIInvalidFormat)
				return
			}
			continue
		}
		fields[p.FormName()] = string(b)
		lists[p.FormName()] = append(lists[p.FormName()], string(b))
	}
	if fileBytes == 0 || fields["model"] == "" {
		problem("file and model are required")
		return
	}
	if p, ok := fields["prompt"]; ok {
		s.mu.Lock()
		s.prompts = append(s.prompts, p)
		s.mu.Unlock()
	}
	diarize := strings.Contains(fields["model"], "diarize")
	switch {
	case translate && (fields["language"] != "" || len(lists["timestamp_granularities[]"]) > 0):
		// OpenAI's translations take neither.
		problem("translations take no language or timestamp_granularities")
		return
	case diarize && (fields["response_format"] != "diarized_json" || fields["chunking_strategy"] == "" || fields["prompt"] != ""):
		problem("gpt-4o-transcribe-diarize answers diarized_json, needs chunking_strategy and takes no prompt")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case status == http.StatusOK && translate:
		_ = json.NewEncoder(w).Encode(map[string]any{
			"task": "translate", "language": "english", "duration": 2.79, "text": "In English: " + text,
			"segments": []map[string]any{{"id": 0, "start": 0.3, "end": 2.5, "text": " In English: " + text}},
		})
	case status == http.StatusOK && diarize:
		words := strings.Fields(text)
		half := len(words) / 2
		_ = json.NewEncoder(w).Encode(map[string]any{
			"task": "transcribe", "duration": 2.79, "text": text,
			"segments": []map[string]any{
				{"type": "transcript.text.segment", "id": "seg_0", "start": 0.3, "end": 1.2, "text": strings.Join(words[:half], " "), "speaker": "A"},
				{"type": "transcript.text.segment", "id": "seg_1", "start": 1.3, "end": 2.5, "text": strings.Join(words[half:], " "), "speaker": "B"},
			},
			"usage": map[string]any{"type": "tokens", "input_tokens": 30, "output_tokens": 5, "total_tokens": 35},
		})
	case status == http.StatusOK:
		answer := map[string]any{
			"task": "transcribe", "language": "english", "duration": 2.79, "text": text,
			"segments": []map[string]any{{"id": 0, "start": 0.3, "end": 2.5, "text": " " + text}},
		}
		if slices.Contains(lists["timestamp_granularities[]"], "word") {
			var words []map[string]any
			for i, wd := range strings.Fields(text) {
				words = append(words, map[string]any{"word": wd, "start": 0.3 + 0.5*float64(i), "end": 0.7 + 0.5*float64(i)})
			}
			answer["words"] = words
		}
		_ = json.NewEncoder(w).Encode(answer)
	case status == http.StatusUnauthorized:
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
	default:
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, `{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error"}}`)
	}
}

var jobInMessage = regexp.MustCompile(`job (\S+) is (\w+)`)

func jobOf(t *testing.T, stderr string) (id, state string) {
	t.Helper()
	m := jobInMessage.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no job named in:\n%s", stderr)
	}
	return m[1], m[2]
}

func metricValue(t *testing.T, metrics, series string) string {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return "absent"
}

// Scenario: An engine that keeps failing makes the job dead, and revive finishes it
func TestDeadJobIsFoundAndRevived(t *testing.T) {
	requireSpeechTools(t)
	const apiKey = "sk-test-e2e-very-secret-key"
	engine := newOpenAIStandIn(t)
	engine.set(http.StatusServiceUnavailable)
	u := startUp(t, t.TempDir(),
		"TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1", "OPENAI_API_KEY", apiKey)
	clientEnv := func(extra ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(extra); i += 2 {
				if extra[i] == k {
					return extra[i+1]
				}
			}
			return u.client(k)
		}
	}
	retrying := clientEnv("TRANSCRIBER_RETRY_SCHEDULE", "1s,1s,1s,1s", "TRANSCRIBER_MAX_ATTEMPTS", "3")

	r := runCLI(t, retrying, "transcribe", testaudio.VoiceNote(t, t.TempDir()))
	if r.code == 0 {
		t.Fatalf("exit code 0 for a dead job; stdout %q", r.stdout)
	}
	id, state := jobOf(t, r.stderr)
	if state != "dead" || !strings.Contains(r.stderr, "service_error") || !strings.Contains(r.stderr, "jobs revive "+id) {
		t.Errorf("stderr does not name a dead job with its kind and the revive command:\n%s", r.stderr)
	}
	if got := engine.count(); got != 3 {
		t.Errorf("engine requests = %d; want exactly 3", got)
	}

	if list := runCLI(t, u.client, "jobs", "list", "--state", "dead"); !strings.Contains(list.stdout, id) {
		t.Errorf("jobs list --state dead lacks %s:\n%s", id, list.stdout)
	}
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: "default", Query: `TranscriptionState="dead"`,
	})
	if err != nil {
		t.Fatalf("visibility query: %v", err)
	}
	if n := len(resp.GetExecutions()); n != 1 || resp.GetExecutions()[0].GetExecution().GetWorkflowId() != id {
		t.Errorf(`TranscriptionState="dead" finds %d jobs; want %s only`, n, id)
	}
	show := runCLI(t, u.client, "jobs", "show", id)
	if showField(show.stdout, "state") != "dead" || showField(show.stdout, "attempts") != "3" ||
		!strings.HasPrefix(showField(show.stdout, "failure"), "service_error at transcribing") {
		t.Errorf("jobs show of the dead job:\n%s", show.stdout)
	}

	engine.set(http.StatusOK)
	if r := runCLI(t, u.client, "jobs", "revive", id); r.code != 0 || !strings.Contains(r.stdout, "transcribing") {
		t.Fatalf("revive: code %d, %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "revived job done", func() bool {
		return showField(runCLI(t, u.client, "jobs", "show", id).stdout, "state") == "done"
	})
	show = runCLI(t, u.client, "jobs", "show", id)
	if !strings.Contains(show.stdout, "transcript:\n"+testaudio.GoForwardText) || showField(show.stdout, "revivals") != "1" {
		t.Errorf("jobs show after revive:\n%s", show.stdout)
	}
	if got := engine.count(); got != 4 {
		t.Errorf("engine requests after revive = %d; want 4", got)
	}

	// A refused key is a verdict: one request, no retries.
	engine.set(http.StatusUnauthorized)
	before := engine.count()
	r = runCLI(t, retrying, "transcribe", testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0880"))
	if id401, state := jobOf(t, r.stderr); r.code == 0 || state != "failed" || !strings.Contains(r.stderr, "engine_unauthorized") {
		t.Errorf("401: code %d, job %s %s:\n%s", r.code, id401, state, r.stderr)
	}
	if got := engine.count() - before; got != 1 {
		t.Errorf("engine requests for a 401 = %d; want exactly 1", got)
	}
	// The refusal keeps OpenAI's code as a field and its answer as received.
	id401, _ := jobOf(t, r.stderr)
	show = runCLI(t, u.client, "jobs", "show", id401)
	rawKey := showField(show.stdout, "failure raw key")
	if showField(show.stdout, "error code") != "invalid_api_key" || !strings.HasPrefix(rawKey, "jobs/") {
		t.Errorf("jobs show of the refused job:\n%s", show.stdout)
	} else if raw, err := os.ReadFile(filepath.Join(u.dataDir, "blobs", filepath.FromSlash(rawKey))); err != nil ||
		!strings.Contains(string(raw), `"code":"invalid_api_key"`) {
		t.Errorf("raw answer %s = %q, %v; want OpenAI's error body", rawKey, raw, err)
	}

	_, metrics := get(t, "http://"+u.http+"/metrics")
	for series, want := range map[string]string{
		`transcriber_failures_total{kind="service_error"}`:                        "1",
		`transcriber_failures_total{kind="engine_unauthorized"}`:                  "1",
		`transcriber_jobs_total{outcome="dead",source="cli"}`:                     "1",
		`transcriber_jobs_total{outcome="failed",source="cli"}`:                   "1",
		`transcriber_jobs_total{outcome="done",source="cli"}`:                     "1",
		`transcriber_activity_runs_total{activity="Recognize",outcome="failure"}`: "4",
		`transcriber_activity_runs_total{activity="Recognize",outcome="success"}`: "1",
	} {
		if got := metricValue(t, metrics, series); got != want {
			t.Errorf("%s = %s; want %s", series, got, want)
		}
	}
	logs := u.logs.String()
	if strings.Contains(logs, apiKey) || strings.Contains(logs, testaudio.GoForwardText) {
		t.Error("the log holds the API key or transcript text")
	}
	// Each failed attempt is logged once, at WARN, and nothing at ERROR.
	if n := strings.Count(logs, `level=WARN msg="step failed"`); n != 4 {
		t.Errorf("failed attempts logged %d times; want 4 (three 503s and one 401)", n)
	}
	if ours := transcriberRecords(logs, "ERROR"); ours != "" {
		t.Errorf("failures were logged at ERROR:\n%s", ours)
	}
	if len(engine.bad) > 0 {
		t.Errorf("the stand-in saw malformed requests: %v", engine.bad)
	}
}

// showField reads one "key: value" line of jobs show.
func showField(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Scenario: An idle worker logs and counts nothing
func TestIdleWorkerIsSilent(t *testing.T) {
	requireSpeechTools(t)
	u := startUp(t, t.TempDir())
	before := u.logs.String()
	time.Sleep(5 * time.Second)
	if extra := strings.TrimPrefix(u.logs.String(), before); extra != "" {
		t.Errorf("an idle worker logged:\n%s", extra)
	}
	_, metrics := get(t, "http://"+u.http+"/metrics")
	for _, series := range []string{"transcriber_activity_runs_total{", "transcriber_jobs_total{", "transcriber_failures_total{"} {
		if strings.Contains(metrics, series) {
			t.Errorf("an idle worker counted %s...", series)
		}
	}
	if ours := transcriberRecords(before, "WARN") + transcriberRecords(before, "ERROR"); ours != "" {
		t.Errorf("start-up logged warnings or errors:\n%s", ours)
	}
}

// transcriberRecords returns the records at level that transcriber wrote,
// leaving out the embedded Temporal server's: it reports its own start-up
// hiccups (a shard not yet owned) at ERROR and retries them by itself.
func transcriberRecords(logs, level string) string {
	var out strings.Builder
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "level="+level) && !strings.Contains(line, "component=temporal-server") {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// Scenario: A cancelled job keeps its recording and drops a late result
func TestCancelKeepsAudioAndDropsLateResult(t *testing.T) {
	requireSpeechTools(t)
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	dataDir := t.TempDir()
	u := startUp(t, dataDir, "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")
	note := testaudio.VoiceNote(t, t.TempDir())
	out := make(chan result, 1)
	go func() { out <- runCLI(t, u.client, "transcribe", note) }()
	<-engine.inFlight
	id := cliJobID(t, note, "openai")
	if r := runCLI(t, u.client, "jobs", "cancel", id); r.code != 0 || !strings.Contains(r.stdout, "recording is kept") {
		t.Fatalf("cancel: code %d, %s%s", r.code, r.stdout, r.stderr)
	}
	r := awaitResult(t, out)
	if _, state := jobOf(t, r.stderr); r.code == 0 || state != "cancelled" {
		t.Errorf("transcribe of a cancelled job: code %d, stderr:\n%s", r.code, r.stderr)
	}
	engine.unblock() // the engine answers after all
	time.Sleep(2 * time.Second)
	show := runCLI(t, u.client, "jobs", "show", id)
	if showField(show.stdout, "state") != "cancelled" || strings.Contains(show.stdout, "transcript:") {
		t.Errorf("jobs show after the late answer:\n%s", show.stdout)
	}
	originals, _ := filepath.Glob(filepath.Join(dataDir, "blobs", "jobs", id, "original.*"))
	if len(originals) != 1 {
		t.Errorf("recording of the cancelled job: %v; want it kept", originals)
	}
	if logs := u.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("cancelling logged errors:\n%s", logs)
	}
}

// Scenario: Submitting a file again while its job runs joins that job
func TestSameFileJoinsRunningJob(t *testing.T) {
	requireSpeechTools(t)
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")
	note := testaudio.VoiceNote(t, t.TempDir())
	first, second := make(chan result, 1), make(chan result, 1)
	go func() { first <- runCLI(t, u.client, "transcribe", note) }()
	<-engine.inFlight
	go func() { second <- runCLI(t, u.client, "transcribe", note) }()
	time.Sleep(time.Second)
	engine.unblock()
	for _, out := range []chan result{first, second} {
		if r := awaitResult(t, out); r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
			t.Errorf("transcribe: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
		}
	}
	if n := engine.count(); n != 1 {
		t.Errorf("engine requests = %d; want 1", n)
	}
	if list := runCLI(t, u.client, "jobs", "list"); strings.Count(list.stdout, "cli-") != 1 {
		t.Errorf("jobs:\n%s", list.stdout)
	}
}

// Scenario: Resetting a dead job in the Web UI runs it again
func TestResetDeadJob(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	engine.set(http.StatusBadGateway)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")
	once := func(k string) string {
		if k == "TRANSCRIBER_MAX_ATTEMPTS" {
			return "1"
		}
		return u.client(k)
	}
	r := runCLI(t, once, "transcribe", testaudio.VoiceNote(t, t.TempDir()))
	id, state := jobOf(t, r.stderr)
	if state != "dead" {
		t.Fatalf("job %s is %s; want dead", id, state)
	}
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// What the Web UI's "Reset" does: replay up to the first workflow task
	// and run on from there as a new run.
	var first int64
	it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() && first == 0 {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetWorkflowTaskCompletedEventAttributes() != nil {
			first = e.GetEventId()
		}
	}
	engine.set(http.StatusOK)
	if _, err := c.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 "default",
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id},
		Reason:                    "engine fixed",
		WorkflowTaskFinishEventId: first,
		RequestId:                 "reset-" + id,
	}); err != nil {
		t.Fatalf("reset: %v", err)
	}
	waitFor(t, "the reset job to finish", func() bool {
		return showField(runCLI(t, u.client, "jobs", "show", id).stdout, "state") == "done"
	})
	if show := runCLI(t, u.client, "jobs", "show", id); !strings.Contains(show.stdout, "transcript:\n"+testaudio.GoForwardText) {
		t.Errorf("jobs show after reset:\n%s", show.stdout)
	}
}

// Scenario: An AssemblyAI job is polled to completion
func TestAssemblyAIJobIsPolled(t *testing.T) {
	requireSpeechTools(t)
	const key = "aai-e2e-secret-key"
	aai := assemblyaitest.New(t, key)
	aai.SetResult(testaudio.GoForwardText, "en_us", []assemblyaitest.Word{
		{Text: "go", Start: 300, End: 500, Confidence: 0.9}, {Text: "forward", Start: 520, End: 1000, Confidence: 0.9},
		{Text: "ten", Start: 1100, End: 1400, Confidence: 0.9}, {Text: "meters", Start: 1450, End: 2300, Confidence: 0.9},
	})
	aai.SetProcessingPolls(2)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "assemblyai", "ASSEMBLYAI_BASE_URL", aai.URL(),
		"ASSEMBLYAI_API_KEY", key, "ASSEMBLYAI_POLL_INTERVAL", "1s")
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, u.client, "transcribe", "--format", "srt", note)
	if r.code != 0 || !strings.Contains(r.stdout, "00:00:00,300 --> 00:00:02,300\n"+testaudio.GoForwardText) {
		t.Fatalf("transcribe: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := aai.Checks(); n != 4 {
		t.Errorf("checks = %d; want 4 (queued, processing twice, completed)", n)
	}
	// AssemblyAI reads Ogg/Opus: the voice note goes as it is.
	want, err := os.ReadFile(note)
	if err != nil {
		t.Fatal(err)
	}
	if up := aai.Uploads(); len(up) != 1 || !bytes.Equal(up[0], want) {
		t.Errorf("uploads: %d; want one, the voice note itself", len(up))
	}
	_, metrics := get(t, "http://"+u.http+"/metrics")
	if got := metricValue(t, metrics, `transcriber_activity_runs_total{activity="CheckRecognition",outcome="success"}`); got != "4" {
		t.Errorf("successful checks counted = %s; want 4, none a failure", got)
	}
	if strings.Contains(u.logs.String(), key) {
		t.Error("the log holds the AssemblyAI key")
	}
}

// Scenario: jobs revive refuses a running job at once, naming its state, and exits non-zero
func TestReviveOfRunningJobIsRefused(t *testing.T) {
	requireSpeechTools(t)
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	u := startUp(t, t.TempDir(), "OPENAI_BASE_URL", engine.URL+"/v1")
	openai := func(k string) string {
		if k == "TRANSCRIBER_ENGINE" {
			return "openai"
		}
		return u.client(k)
	}
	note := testaudio.VoiceNote(t, t.TempDir())
	done := make(chan result, 1)
	go func() { done <- runCLI(t, openai, "transcribe", note) }()
	<-engine.inFlight
	id := cliJobID(t, note, "openai")

	r := runCLI(t, u.client, "jobs", "revive", id)
	if r.code != 1 || !strings.Contains(r.stderr, "job "+id+" is transcribing and its step Recognize is running right now; a revive changes nothing") {
		t.Errorf("revive of a running job: code %d, stderr %q", r.code, r.stderr)
	}
	engine.unblock()
	if r := <-done; r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("the job did not finish after the refused revive: code %d, %s", r.code, r.stderr)
	}
	if show := runCLI(t, u.client, "jobs", "show", id); showField(show.stdout, "revivals") != "" {
		t.Errorf("the refused revive was counted:\n%s", show.stdout)
	}
	if n := engine.count(); n != 1 {
		t.Errorf("the engine was called %d times; the refused revive must change nothing", n)
	}
	r = runCLI(t, u.client, "jobs", "revive", id)
	if r.code != 1 || !strings.Contains(r.stderr, "is done; only failed or dead jobs, or jobs waiting out a back-off, can be revived (it finished") {
		t.Errorf("revive of a done job: code %d, stderr %q", r.code, r.stderr)
	}
}

// Scenario: Revive and retry-pending run a step waiting out its back-off now, with attempts from 1
func TestReviveCutsBackoffShort(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	engine.set(http.StatusServiceUnavailable)
	u := startUp(t, t.TempDir(), "OPENAI_BASE_URL", engine.URL+"/v1")
	// The policy travels with the job from the client that submits it:
	// ten minutes after every failure, far longer than this test waits.
	patient := func(k string) string {
		switch k {
		case "TRANSCRIBER_ENGINE":
			return "openai"
		case "TRANSCRIBER_RETRY_SCHEDULE":
			return "10m"
		}
		return u.client(k)
	}
	dir := t.TempDir()
	first := testaudio.VoiceNote(t, dir)
	second := filepath.Join(dir, "second.wav")
	testaudio.FFmpeg(t, "-f", "s16le", "-ar", "16000", "-ac", "1", "-i", testaudio.GoForwardRaw, "-af", "volume=0.8", second)
	done := make(chan result, 2)
	for _, f := range []string{first, second} {
		go func() { done <- runCLI(t, patient, "transcribe", f) }()
	}
	ids := []string{cliJobID(t, first, "openai"), cliJobID(t, second, "openai")}
	waiting := func(id, attempt string) func() bool {
		return func() bool {
			show := runCLI(t, u.client, "jobs", "show", id).stdout
			return showField(show, "step") == "Recognize, attempt "+attempt && showField(show, "next attempt") != ""
		}
	}
	for _, id := range ids {
		waitFor(t, id+" to wait out its first back-off", waiting(id, "2"))
	}
	if n := engine.count(); n != 2 {
		t.Fatalf("engine called %d times before the revive; want once per job", n)
	}

	start := time.Now()
	r := runCLI(t, u.client, "jobs", "revive", ids[0])
	if r.code != 0 || !strings.Contains(r.stdout, "step Recognize runs again now, its attempts counted from 1") {
		t.Fatalf("revive of a job waiting out a back-off: code %d, %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the revived job's request", func() bool { return engine.count() == 3 })
	t.Logf("request sent %v after the revive; the back-off had 10m left", time.Since(start).Round(time.Millisecond))
	// The fresh attempt failed too: the job waits again, as at its second
	// attempt, not its third.
	waitFor(t, "the revived job to wait again from its first attempt", waiting(ids[0], "2"))

	r = runCLI(t, u.client, "jobs", "retry-pending")
	if r.code != 0 || strings.Count(r.stdout, "runs again now") != 2 {
		t.Fatalf("retry-pending: code %d, %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "both jobs' requests", func() bool { return engine.count() == 5 })

	engine.set(http.StatusOK)
	for _, id := range ids {
		waitFor(t, id+" to wait again", waiting(id, "2"))
	}
	if r := runCLI(t, u.client, "jobs", "retry-pending"); r.code != 0 {
		t.Fatalf("retry-pending: code %d, %s", r.code, r.stderr)
	}
	for range ids {
		if r := <-done; r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
			t.Errorf("transcribe after retry-pending: code %d, %q, %s", r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, u.client, "jobs", "retry-pending"); r.code != 0 || !strings.Contains(r.stdout, "no job waits out a back-off") {
		t.Errorf("retry-pending with nothing waiting: code %d, %s", r.code, r.stdout)
	}
}

// Scenario: A job dead on its operation deadline, revived, submits afresh and finishes
func TestOperationDeadlineThenRevive(t *testing.T) {
	requireSpeechTools(t)
	const key = "aai-deadline-key"
	aai := assemblyaitest.New(t, key)
	aai.SetResult(testaudio.GoForwardText, "en_us", nil)
	aai.NeverFinish()
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "assemblyai", "ASSEMBLYAI_BASE_URL", aai.URL(),
		"ASSEMBLYAI_API_KEY", key, "ASSEMBLYAI_POLL_INTERVAL", "1s")
	// The deadline travels with the job from the client that submits it.
	client := func(k string) string {
		if k == "TRANSCRIBER_OPERATION_TIMEOUT" {
			return "5s"
		}
		return u.client(k)
	}
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, client, "transcribe", note)
	id, _ := jobOf(t, r.stderr)
	if r.code == 0 || !strings.Contains(r.stderr, "is dead (timeout at transcribing)") {
		t.Fatalf("transcribe with an operation that never finishes: code %d\n%s", r.code, r.stderr)
	}
	if n := len(aai.Created()); n != 1 {
		t.Fatalf("transcripts created = %d; want 1", n)
	}
	aai.Finish()
	if r := runCLI(t, u.client, "jobs", "revive", id); r.code != 0 || !strings.Contains(r.stdout, "resumes at transcribing") {
		t.Fatalf("revive: code %d, %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the revived job to finish", func() bool {
		return showField(runCLI(t, u.client, "jobs", "show", id).stdout, "state") == "done"
	})
	if n := len(aai.Created()); n != 2 {
		t.Errorf("transcripts created = %d; want a second submission after the revive", n)
	}
	if show := runCLI(t, u.client, "jobs", "show", id); !strings.Contains(show.stdout, "transcript:\n"+testaudio.GoForwardText) {
		t.Errorf("jobs show after the revive:\n%s", show.stdout)
	}
}
