package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/nats/natstest"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/schemas"
)

const testSecret = "0123456789abcdef-test"

var _ engine.Engine = (*Engine)(nil)

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newEngine(t *testing.T, url string, c Config) *Engine {
	t.Helper()
	c.URL = url
	if c.AudioBaseURL == "" {
		c.AudioBaseURL = "http://127.0.0.1:1"
	}
	c.AudioSecret = testSecret
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// jobMessages reads every message of the jobs stream.
func jobMessages(t *testing.T, js jetstream.JetStream) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	if info.State.Msgs == 0 {
		return nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range info.State.Msgs {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// Scenario: A job is published to its service queue with its submission number
func TestSubmitPublishesJobMessage(t *testing.T) {
	url := natstest.Start(t)
	e := newEngine(t, url, Config{Service: "gpu", ReplyDeadline: 90 * time.Second})
	ctx := context.Background()
	req := engine.Request{JobID: "cli-abc", AudioKey: "jobs/cli-abc/audio.wav", Language: "en", Duration: 3 * time.Second, Submission: 1}
	sub, err := e.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Done() || sub.OperationID != "cli-abc:1" || sub.Deadline != 90*time.Second {
		t.Fatalf("submission = %+v; want operation cli-abc:1 with a 90s deadline", sub)
	}
	msgs := jobMessages(t, e.x.JS)
	if len(msgs) != 1 {
		t.Fatalf("%d job messages; want 1", len(msgs))
	}
	m := msgs[0]
	if got := m.Subject(); got != "transcriber.recognition.jobs.gpu" {
		t.Errorf("subject = %q; want transcriber.recognition.jobs.gpu", got)
	}
	if got := m.Headers().Get("Nats-Msg-Id"); got != "job:cli-abc:1" {
		t.Errorf("Nats-Msg-Id = %q; want job:cli-abc:1", got)
	}
	var body JobMessage
	if err := json.Unmarshal(m.Data(), &body); err != nil {
		t.Fatal(err)
	}
	if body.SchemaVersion != 1 || body.JobID != "cli-abc" || body.Submission != 1 || body.Language != "en" ||
		body.DurationSeconds != 3 || body.ReplySubject != ResultsSubject || body.Audio.MIMEType != "audio/wav" {
		t.Errorf("job message = %+v", body)
	}
	if d := time.Until(body.ReplyDeadline); d < 80*time.Second || d > 91*time.Second {
		t.Errorf("reply deadline in %v; want about 90s", d)
	}
	if strings.Contains(string(m.Data()), testSecret) {
		t.Error("the job message holds the signing secret")
	}
	requireSchemaFields(t, schemas.RecognitionJob, m.Data())

	// Scenario: A retried publish of one submission is kept once
	t.Run("retried publish", func(t *testing.T) {
		if _, err := e.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n := len(jobMessages(t, e.x.JS)); n != 1 {
			t.Fatalf("%d job messages after a retried publish; want 1", n)
		}
		req.Submission = 2
		sub, err := e.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		msgs := jobMessages(t, e.x.JS)
		if len(msgs) != 2 || msgs[1].Headers().Get("Nats-Msg-Id") != "job:cli-abc:2" || sub.OperationID != "cli-abc:2" {
			t.Fatalf("after submission 2: %d messages, operation %s; want a second message job:cli-abc:2", len(msgs), sub.OperationID)
		}
	})
}

// requireSchemaFields checks a message against its schema's required
// fields, the part of the schema a service relies on first.
func requireSchemaFields(t *testing.T, schema, msg []byte) {
	t.Helper()
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Required []string `json:"required"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Required {
		raw, ok := m[f]
		if !ok {
			t.Errorf("message lacks %q, which the schema requires", f)
			continue
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil {
			for _, g := range s.Properties[f].Required {
				if _, ok := inner[g]; !ok {
					t.Errorf("message lacks %s.%s, which the schema requires", f, g)
				}
			}
		}
	}
}

// Scenario: A broker that does not acknowledge a job is trouble worth another attempt
func TestSubmitWithoutBrokerIsNoAck(t *testing.T) {
	e := newEngine(t, "nats://127.0.0.1:1", Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := e.Submit(ctx, engine.Request{JobID: "j", AudioKey: "jobs/j/a.wav", Submission: 1})
	ee, ok := engine.AsError(err)
	if !ok || ee.Kind != job.NoAck || ee.Kind.Verdict() {
		t.Fatalf("Submit without a broker = %v; want a temporary no_ack", err)
	}
}

// Scenario: The audio is fetched from a signed, expiring URL
func TestAudioURL(t *testing.T) {
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := blob.JobKey("j1", "audio.wav")
	if _, err := store.Put(context.Background(), key, strings.NewReader("RIFF....WAVE")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(AudioHandler(testSecret, store, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	s, err := NewSigner(srv.URL, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := s.Sign(key, time.Now().Add(time.Minute))
	if code, body := fetch(good); code != 200 || body != "RIFF....WAVE" {
		t.Errorf("signed URL: %d %q; want 200 and the audio", code, body)
	}
	other := strings.Replace(good, "audio.wav", "transcript.json", 1)
	if code, _ := fetch(other); code != http.StatusForbidden {
		t.Errorf("URL for another key: %d; want 403", code)
	}
	if code, _ := fetch(s.Sign(key, time.Now().Add(-time.Second))); code != http.StatusForbidden {
		t.Errorf("expired URL: %d; want 403", code)
	}
	wrong, _ := NewSigner(srv.URL, "another-secret-0123456789")
	if code, _ := fetch(wrong.Sign(key, time.Now().Add(time.Minute))); code != http.StatusForbidden {
		t.Errorf("URL of another secret: %d; want 403", code)
	}
}

type fakeJobs struct {
	mu    sync.Mutex
	jobs  map[string]Job
	woken []string
	fail  error
}

func (f *fakeJobs) Lookup(_ context.Context, id string) (Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return Job{}, f.fail
	}
	j, ok := f.jobs[id]
	if !ok {
		return Job{}, ErrUnknownJob
	}
	return j, nil
}

func (f *fakeJobs) Wake(_ context.Context, id, op, status string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.woken = append(f.woken, id+" "+op+" "+status)
	return nil
}

func (f *fakeJobs) set(id string, j Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[id] = j
}

func (f *fakeJobs) wakes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.woken)
}

type inboxRig struct {
	e    *Engine
	in   *Inbox
	jobs *fakeJobs
	logs *logBuffer
	js   jetstream.JetStream
}

func startInbox(t *testing.T) *inboxRig {
	t.Helper()
	url := natstest.Start(t)
	e := newEngine(t, url, Config{})
	nc, err := natsio.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	x, err := NewExchange(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := &inboxRig{e: e, jobs: &fakeJobs{jobs: map[string]Job{}}, logs: &logBuffer{}, js: x.JS}
	r.in = &Inbox{X: x, Jobs: r.jobs, Logger: slog.New(slog.NewTextHandler(r.logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.in.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return r
}

func encode(t *testing.T, body any) []byte {
	t.Helper()
	if data, ok := body.([]byte); ok {
		return data
	}
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// publish sends a result and reports whether the broker took it as a
// duplicate.
func (r *inboxRig) publish(t *testing.T, msgID string, body any) bool {
	t.Helper()
	m := natsio.NewMsg(ResultsSubject)
	m.Data = encode(t, body)
	if msgID != "" {
		m.Header.Set("Nats-Msg-Id", msgID)
	}
	ack, err := r.js.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Duplicate
}

// waitLog waits for the n-th log line holding all of parts.
func (r *inboxRig) waitLog(t *testing.T, n int, parts ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("log %q", parts), func() bool { return r.count(parts...) >= n })
}

func (r *inboxRig) count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(r.logs.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

func result(jobID string, n int, status, text string) ResultMessage {
	r := ResultMessage{SchemaVersion: 1, JobID: jobID, Submission: n, Status: status,
		Service: ServiceInfo{Name: "whisper-gpu", Version: "2.1"}}
	if text != "" {
		r.Text = &text
		r.Segments = []Segment{{Start: 0, End: 1.5, Text: text}}
	}
	return r
}

// acked reports whether the inbox's consumer has nothing outstanding.
func (r *inboxRig) acked(t *testing.T) bool {
	t.Helper()
	c, err := r.js.Consumer(context.Background(), ResultsStream, InboxConsumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumAckPending == 0 && info.NumPending == 0
}

func TestInbox(t *testing.T) {
	r := startInbox(t)
	ctx := context.Background()
	waiting := func(id string, n int) Job {
		return Job{State: "transcribing", OperationID: OperationID(id, n), Deadline: time.Now().Add(time.Hour)}
	}

	// Scenario: A done result is kept for the job's check and wakes the job
	t.Run("done", func(t *testing.T) {
		r.jobs.set("j-done", waiting("j-done", 1))
		if sub, _ := r.e.Check(ctx, "j-done:1"); sub.Done() {
			t.Fatal("a check before any result found one")
		}
		r.publish(t, "result:j-done:1", result("j-done", 1, StatusDone, "go forward ten meters"))
		r.waitLog(t, 1, "recognition result applied", "job_id=j-done")
		if got := r.jobs.wakes(); !slices.Contains(got, "j-done j-done:1 done") {
			t.Errorf("wakes = %q; want j-done woken for j-done:1", got)
		}
		sub, err := r.e.Check(ctx, "j-done:1")
		if err != nil || !sub.Done() {
			t.Fatalf("check = %+v, %v; want the result", sub, err)
		}
		res := sub.Result
		if res.Text != "go forward ten meters" || res.Service != "whisper-gpu" || res.ServiceVersion != "2.1" || res.NeedsCheck ||
			len(res.Segments) != 1 || res.Segments[0].End != 1500*time.Millisecond || len(res.Raw) == 0 {
			t.Errorf("result = %+v", res)
		}
		if strings.Contains(r.logs.String(), "go forward") {
			t.Error("the log holds the transcript")
		}
	})

	// Scenario: The same Nats-Msg-Id again changes nothing
	t.Run("duplicate", func(t *testing.T) {
		if !r.publish(t, "result:j-done:1", result("j-done", 1, StatusDone, "go forward ten meters")) {
			t.Error("the broker took a repeat within its duplicate window as new")
		}
		// Past the window the repeat reaches an inbox, with whatever body.
		redo, err := r.in.apply(ctx, "result:j-done:1", encode(t, result("j-done", 1, StatusDone, "another text")))
		if redo || err != nil {
			t.Fatalf("apply of a repeat: redo %v, %v", redo, err)
		}
		r.waitLog(t, 1, "already applied", "job_id=j-done")
		if n := len(r.jobs.wakes()); n != 1 {
			t.Errorf("%d wakes; want the first one only", n)
		}
		if sub, _ := r.e.Check(ctx, "j-done:1"); sub.Result == nil || sub.Result.Text != "go forward ten meters" {
			t.Errorf("the kept result changed: %+v", sub.Result)
		}
	})

	// Scenario: A needs_check result is kept flagged for review
	t.Run("needs_check", func(t *testing.T) {
		r.jobs.set("j-review", waiting("j-review", 1))
		r.publish(t, "result:j-review:1", result("j-review", 1, StatusNeedsCheck, "go forward ten meters"))
		r.waitLog(t, 1, "recognition result applied", "job_id=j-review")
		sub, err := r.e.Check(ctx, "j-review:1")
		if err != nil || sub.Result == nil || !sub.Result.NeedsCheck {
			t.Fatalf("check = %+v, %v; want a result that needs check", sub.Result, err)
		}
	})

	// Scenario: An error result is the service's verdict with its code
	t.Run("error", func(t *testing.T) {
		r.jobs.set("j-err", waiting("j-err", 1))
		res := result("j-err", 1, StatusError, "")
		res.Error = &ErrorInfo{Code: "UNSUPPORTED_FORMAT", Message: "cannot decode the audio"}
		res.RawS3Key = "jobs/j-err/recognizer-1-raw.json"
		r.publish(t, "result:j-err:1", res)
		r.waitLog(t, 1, "recognition result applied", "job_id=j-err")
		_, err := r.e.Check(ctx, "j-err:1")
		e, ok := engine.AsError(err)
		if !ok || e.Kind != job.ServiceError || !e.Final || e.Code != "UNSUPPORTED_FORMAT" ||
			!strings.Contains(e.Message, "cannot decode the audio") || !bytes.Contains(e.Raw, []byte(res.RawS3Key)) {
			t.Fatalf("check = %v (%+v); want a final service_error with code UNSUPPORTED_FORMAT and the envelope as raw answer", err, e)
		}
	})

	// Scenario: A processing report is logged and changes nothing
	t.Run("processing", func(t *testing.T) {
		r.jobs.set("j-proc", waiting("j-proc", 1))
		r.publish(t, "result:j-proc:1:processing", result("j-proc", 1, StatusProcessing, ""))
		r.waitLog(t, 1, "recognition service took the job", "job_id=j-proc")
		if sub, err := r.e.Check(ctx, "j-proc:1"); err != nil || sub.Done() {
			t.Errorf("check after a processing report = %+v, %v; want still running", sub, err)
		}
	})

	// Scenario: An invalid envelope is logged with its id and acknowledged
	t.Run("invalid", func(t *testing.T) {
		r.publish(t, "result:j-x:1", []byte(`{"job_id": "j-x", "status": "finished"}`))
		r.publish(t, "result:j-y:7", result("j-y", 1, StatusDone, "text")) // id and body disagree
		r.publish(t, "", []byte(`not json`))
		r.waitLog(t, 1, "recognition result refused", "msg_id=result:j-x:1")
		r.waitLog(t, 1, "recognition result refused", "msg_id=result:j-y:7")
		r.waitLog(t, 3, "recognition result refused")
		waitFor(t, "every envelope acknowledged", func() bool { return r.acked(t) })
	})

	// Scenario: A result for an unknown job is logged
	t.Run("unknown job", func(t *testing.T) {
		r.publish(t, "result:nobody:1", result("nobody", 1, StatusDone, "text"))
		r.waitLog(t, 1, "recognition result for an unknown job", "job_id=nobody")
	})

	// Scenario: A result for a settled job is dropped and logged
	t.Run("settled", func(t *testing.T) {
		r.jobs.set("j-dead", Job{State: "dead", Settled: true, OperationID: "j-dead:1", Deadline: time.Now().Add(-time.Minute)})
		r.publish(t, "result:j-dead:1", result("j-dead", 1, StatusDone, "late text"))
		r.waitLog(t, 1, "recognition result dropped", "job_id=j-dead", "state=dead")
		if sub, _ := r.e.Check(ctx, "j-dead:1"); sub.Done() {
			t.Error("a dropped result was kept")
		}
	})

	// Scenario: A result after the reply deadline is dropped and logged
	t.Run("late", func(t *testing.T) {
		r.jobs.set("j-late", Job{State: "transcribing", OperationID: "j-late:1", Deadline: time.Now().Add(-time.Second)})
		r.publish(t, "result:j-late:1", result("j-late", 1, StatusDone, "late text"))
		r.waitLog(t, 1, "recognition result dropped", "job_id=j-late", "after the reply deadline")
	})

	// Scenario: A result for an earlier submission is dropped after a revive
	t.Run("earlier submission", func(t *testing.T) {
		r.jobs.set("j-rev", waiting("j-rev", 2))
		r.publish(t, "result:j-rev:1", result("j-rev", 1, StatusDone, "old text"))
		r.waitLog(t, 1, "recognition result dropped", "job_id=j-rev", "no such submission")
		r.publish(t, "result:j-rev:2", result("j-rev", 2, StatusDone, "new text"))
		r.waitLog(t, 1, "recognition result applied", "job_id=j-rev")
	})

	// Scenario: A result that outruns the job's record of its submission waits for it
	t.Run("before the job recorded the submission", func(t *testing.T) {
		r.jobs.set("j-quick", Job{State: "transcribing"})
		r.publish(t, "result:j-quick:1", result("j-quick", 1, StatusDone, "quick"))
		time.Sleep(300 * time.Millisecond)
		r.jobs.set("j-quick", waiting("j-quick", 1))
		r.waitLog(t, 1, "recognition result applied", "job_id=j-quick")
	})
}

// Scenario: The validator requires what the result schema requires
func TestResultSchemaAgrees(t *testing.T) {
	var s struct {
		Required   []string `json:"required"`
		Properties struct {
			Status struct {
				Enum []string `json:"enum"`
			} `json:"status"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schemas.RecognitionResult, &s); err != nil {
		t.Fatal(err)
	}
	if want := []string{StatusProcessing, StatusDone, StatusNeedsCheck, StatusError}; !slices.Equal(s.Properties.Status.Enum, want) {
		t.Errorf("schema statuses %v; want %v", s.Properties.Status.Enum, want)
	}
	full := encode(t, result("j", 1, StatusDone, "text"))
	if _, err := ReadResult("result:j:1", full); err != nil {
		t.Fatalf("a full envelope is refused: %v", err)
	}
	requireSchemaFields(t, schemas.RecognitionResult, full)
	for _, f := range s.Required {
		var m map[string]any
		_ = json.Unmarshal(full, &m)
		delete(m, f)
		if _, err := ReadResult("result:j:1", encode(t, m)); err == nil {
			t.Errorf("an envelope without %q, which the schema requires, is accepted", f)
		}
	}
	// The id names the submission; a body without it, or without the
	// service, is still a result.
	lean := map[string]any{"schema_version": 1, "job_id": "j", "status": "done", "text": "hi"}
	if r, err := ReadResult("result:j:3", encode(t, lean)); err != nil || r.Submission != 3 {
		t.Errorf("lean envelope: %+v, %v; want submission 3 from the id", r, err)
	}
	bad := result("j", 1, StatusError, "")
	if _, err := ReadResult("result:j:1", encode(t, bad)); err == nil {
		t.Error("an error envelope without error is accepted")
	}
	var js map[string]any
	if err := json.Unmarshal(schemas.RecognitionJob, &js); err != nil {
		t.Fatal(err)
	}
}

// Scenario: Recognition services share one queue and answer each job once
func TestServicesShareQueue(t *testing.T) {
	url := natstest.Start(t)
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	audioSrv := httptest.NewServer(AudioHandler(testSecret, store, logger))
	defer audioSrv.Close()
	e := newEngine(t, url, Config{AudioBaseURL: audioSrv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	seen := map[string]int{}
	for i := range 2 {
		nc, err := natsio.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		x, _ := NewExchange(nc)
		svc := &Service{X: x, Queue: DefaultService, Name: fmt.Sprintf("svc-%d", i), Version: "1", Store: store, KeyOf: blob.JobKey,
			WorkDir: t.TempDir(), Logger: logger,
			Recognize: func(ctx context.Context, path string, j JobMessage) (engine.Result, error) {
				b, err := os.ReadFile(path)
				if err != nil {
					return engine.Result{}, err
				}
				mu.Lock()
				seen[j.JobID]++
				mu.Unlock()
				if string(b) == "bad" {
					return engine.Result{}, &engine.Error{Kind: engine.Rejected, Code: "UNSUPPORTED_FORMAT", Message: "not audio"}
				}
				return engine.Result{Text: "heard " + string(b), Raw: []byte(`{"raw":true}`), RawType: "application/json"}, nil
			}}
		go func() { _ = svc.Run(ctx) }()
	}
	nc, _ := natsio.Connect(url)
	defer nc.Close()
	x, _ := NewExchange(nc)
	jobs := &fakeJobs{jobs: map[string]Job{}}
	in := &Inbox{X: x, Jobs: jobs, Logger: logger}
	go func() { _ = in.Run(ctx) }()

	const n = 6
	for i := range n {
		id := fmt.Sprintf("job-%d", i)
		content := fmt.Sprintf("audio %d", i)
		if i == n-1 {
			content = "bad"
		}
		key := blob.JobKey(id, "audio.wav")
		if _, err := store.Put(ctx, key, strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		jobs.set(id, waiting(id))
		if _, err := e.Submit(ctx, engine.Request{JobID: id, AudioKey: key, Submission: 1}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every job woken", func() bool { return len(jobs.wakes()) == n })
	for i := range n - 1 {
		id := fmt.Sprintf("job-%d", i)
		sub, err := e.Check(ctx, OperationID(id, 1))
		if err != nil || sub.Result == nil || sub.Result.Text != fmt.Sprintf("heard audio %d", i) || !strings.HasPrefix(sub.Result.Service, "svc-") {
			t.Errorf("%s: %+v, %v", id, sub.Result, err)
		}
		var env ResultMessage
		_ = json.Unmarshal(sub.Result.Raw, &env)
		if _, err := store.Size(ctx, env.RawS3Key); err != nil {
			t.Errorf("%s: raw answer %q not stored: %v", id, env.RawS3Key, err)
		}
	}
	_, err = e.Check(ctx, OperationID(fmt.Sprintf("job-%d", n-1), 1))
	if ee, ok := engine.AsError(err); !ok || ee.Code != "UNSUPPORTED_FORMAT" || !ee.Final {
		t.Errorf("bad audio: %v; want the service's UNSUPPORTED_FORMAT", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s recognised %d times; want once", id, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d jobs recognised; want %d", len(seen), n)
	}
}

func waiting(id string) Job {
	return Job{State: "transcribing", OperationID: OperationID(id, 1), Deadline: time.Now().Add(time.Hour)}
}

func TestRedact(t *testing.T) {
	got := Redact("nats://alice:s3cret@a:4222, nats://b:4222")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "nats://b:4222") {
		t.Errorf("Redact = %q; want the password gone and the other URL kept", got)
	}
}

// Scenario: Streams made with other settings are brought to these, identical ones are left untouched
func TestEnsureUpdatesOnlyDifferingStreams(t *testing.T) {
	url := natstest.Start(t)
	ctx := context.Background()
	nc, err := natsio.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: JobsStream,
		Subjects: []string{JobsSubjectPrefix + ">"}, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}

	errs := make(chan error, 3)
	for range 3 {
		go func() {
			c, err := natsio.Connect(url)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			x, _ := NewExchange(c)
			_, err = x.Ensure(ctx)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("ensure: %v", err)
		}
	}
	s, err := js.Stream(ctx, JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.MaxAge != retainFor || cfg.Duplicates != DuplicateWindow {
		t.Fatalf("jobs stream keeps %v with duplicates %v, want %v and %v", cfg.MaxAge, cfg.Duplicates, retainFor, DuplicateWindow)
	}
	before := s.CachedInfo().Config

	// A second start on an up-to-date broker leaves the stream's settings alone.
	x, _ := NewExchange(nc)
	if _, err := x.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ = js.Stream(ctx, JobsStream)
	if after := s.CachedInfo().Config; after.MaxAge != before.MaxAge || after.Description != before.Description {
		t.Fatalf("settings changed on a second start: %+v", after)
	}
}
