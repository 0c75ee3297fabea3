package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/metrics"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/internal/transcript"
)

// fakeEngine answers with what a test tells it.
type fakeEngine struct {
	format audio.Format
	submit func(ctx context.Context, req engine.Request) (engine.Submission, error)
	check  func(ctx context.Context, id string) (engine.Submission, error)
}

var _ Recognizer = (*fakeEngine)(nil)

func (f *fakeEngine) Format() audio.Format { return f.format }
func (f *fakeEngine) Submit(ctx context.Context, req engine.Request) (engine.Submission, error) {
	return f.submit(ctx, req)
}
func (f *fakeEngine) Check(ctx context.Context, id string) (engine.Submission, error) {
	return f.check(ctx, id)
}

type recordingReplier struct {
	mu       sync.Mutex
	outcomes []Outcome
	skipped  []int
	err      error
	// parts is how many parts each outcome takes, at least one; sent
	// lists the parts that went out, in order.
	parts int
	sent  []int
	// lose, when it answers true, loses the attempt at that point: with
	// part i sent but not yet recorded as delivered, or recorded.
	lose     func(part int, recorded bool) bool
	delivery Delivery
}

var _ Replier = (*recordingReplier)(nil)

// errLost stands for a worker that died in the middle of a reply.
var errLost = serviceErr{temporary: true}

func (r *recordingReplier) Acknowledge(context.Context, job.Recipient) (job.Ref, error) {
	return "99", nil
}
func (r *recordingReplier) ShowProgress(context.Context, job.Recipient, job.State) error {
	return nil
}
func (r *recordingReplier) Deliver(ctx context.Context, o Outcome, log PartLog) (Delivery, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return Delivery{}, r.err
	}
	r.outcomes = append(r.outcomes, o)
	r.skipped = append(r.skipped, log.Sent())
	for i := log.Sent(); i < max(r.parts, 1); i++ {
		if err := log.Sending(ctx, i); err != nil {
			return Delivery{}, err
		}
		r.sent = append(r.sent, i)
		if r.lose != nil && r.lose(i, false) {
			return Delivery{}, errLost
		}
		if err := log.Delivered(ctx, i); err != nil {
			return Delivery{}, err
		}
		if r.lose != nil && r.lose(i, true) {
			return Delivery{}, errLost
		}
	}
	return r.delivery, nil
}

type fixture struct {
	acts  *Activities
	blobs *blob.Local
	env   *testsuite.TestActivityEnvironment
	logs  *bytes.Buffer
}

func newFixture(t *testing.T, eng *fakeEngine) *fixture {
	t.Helper()
	blobs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var tools AudioTools
	if tl, err := audio.NewTools(); err == nil {
		tools = tl
	}
	acts := &Activities{
		Blobs:       blobs,
		Audio:       tools,
		Engines:     map[string]Recognizer{"fake": eng},
		Repliers:    map[job.Source]Replier{},
		Metrics:     metrics.New(prometheus.NewRegistry()),
		WorkDir:     t.TempDir(),
		MaxDuration: time.Hour,
	}
	logs := &bytes.Buffer{}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	// The worker's interceptor puts the job id on every record, as in
	// production.
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&Interceptor{}}})
	env.RegisterActivity(acts)
	return &fixture{acts: acts, blobs: blobs, env: env, logs: logs}
}

func (f *fixture) put(t *testing.T, key, path string) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = file.Close() }() // only read
	if _, err := f.blobs.Put(context.Background(), key, file); err != nil {
		t.Fatal(err)
	}
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("error %v (%T) is not an application error", err, err)
	}
	return appErr
}

var schedule = Call{Backoff: []time.Duration{30 * time.Second, 2 * time.Minute}}

// Scenario: A conversion heartbeats its progress
func TestConvertVoiceNote(t *testing.T) {
	testaudio.Require(t)
	f := newFixture(t, &fakeEngine{format: audio.WAV16kMono})
	f.put(t, "jobs/default-test-workflow-id/original.ogg", testaudio.VoiceNote(t, t.TempDir()))
	var heartbeats int
	f.env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { heartbeats++ })

	v, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{Call: schedule, OriginalKey: "jobs/default-test-workflow-id/original.ogg", Engine: "fake"})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	var out ConvertOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.AudioKey, "jobs/default-test-workflow-id/") || !strings.HasSuffix(out.AudioKey, "/audio.wav") {
		t.Errorf("audio key = %q", out.AudioKey)
	}
	if out.Duration < 2700*time.Millisecond || out.Duration > 2900*time.Millisecond {
		t.Errorf("duration = %v; want about 2.79s", out.Duration)
	}
	if size, err := f.blobs.Size(context.Background(), out.AudioKey); err != nil || size < 80000 {
		t.Errorf("stored audio size = %d, %v; want the 16 kHz PCM of 2.8 s", size, err)
	}
	if heartbeats == 0 {
		t.Error("conversion did not heartbeat")
	}
}

// Scenario: Input verdicts of the conversion step
func TestConvertVerdicts(t *testing.T) {
	testaudio.Require(t)
	tests := []struct {
		name   string
		data   []byte
		engine string
		want   job.Kind
	}{
		{"text named mp3", []byte("definitely not audio\n"), "fake", job.UnsupportedFormat},
		{"empty file", nil, "fake", job.EmptyAudio},
		{"unknown engine", []byte("x"), "nonesuch", job.EngineNotConfigured},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &fakeEngine{format: audio.WAV16kMono})
			if _, err := f.blobs.Put(context.Background(), "in/original.mp3", bytes.NewReader(tc.data)); err != nil {
				t.Fatal(err)
			}
			_, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{Call: schedule, OriginalKey: "in/original.mp3", Engine: tc.engine})
			appErr := appError(t, err)
			if got := job.Kind(appErr.Type()); got != tc.want {
				t.Errorf("kind = %q; want %q", got, tc.want)
			}
			if !appErr.NonRetryable() {
				t.Error("a verdict on the input must not be retried")
			}
		})
	}
}

// Scenario: Input verdicts of the conversion step
func TestConvertRefusesTooLong(t *testing.T) {
	testaudio.Require(t)
	f := newFixture(t, &fakeEngine{format: audio.WAV16kMono})
	f.acts.MaxDuration = 5 * time.Second
	f.put(t, "in/original.wav", testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870"))
	_, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{OriginalKey: "in/original.wav", Engine: "fake"})
	if appErr := appError(t, err); appErr.Type() != string(job.TooLong) || !appErr.NonRetryable() {
		t.Errorf("error = %v; want non-retryable %s", err, job.TooLong)
	}
}

func storedAudio(t *testing.T, f *fixture) string {
	t.Helper()
	if _, err := f.blobs.Put(context.Background(), "jobs/x/audio.wav", strings.NewReader("pcm")); err != nil {
		t.Fatal(err)
	}
	return "jobs/x/audio.wav"
}

// Scenario: A transcript is stored with the raw response
func TestRecognizeStoresTranscriptAndRaw(t *testing.T) {
	eng := &fakeEngine{submit: func(_ context.Context, req engine.Request) (engine.Submission, error) {
		if req.Language != "en" {
			return engine.Submission{}, errors.New("language not passed")
		}
		return engine.Submission{Result: &engine.Result{
			Text: " go forward ten meters ", Language: "en", Raw: []byte(`{"text":"go forward ten meters"}`), RawType: "application/json",
			Segments: []engine.Segment{{Start: 100 * time.Millisecond, End: 2 * time.Second, Text: "go forward ten meters"}},
		}}, nil
	}}
	f := newFixture(t, eng)
	v, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{AudioKey: storedAudio(t, f), Engine: "fake", Language: "en", Duration: 3 * time.Second})
	if err != nil {
		t.Fatalf("Recognize: %v", err)
	}
	var out Recognition
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if !out.Done || out.Words != 4 || out.Language != "en" {
		t.Errorf("recognition = %+v", out)
	}
	r, err := f.blobs.Open(context.Background(), out.TranscriptKey)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	doc, err := transcript.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Text != "go forward ten meters" || doc.Engine != "fake" || len(doc.Segments) != 1 || doc.Segments[0].Start != 0.1 {
		t.Errorf("stored transcript = %+v", doc)
	}
	raw, err := f.blobs.Open(context.Background(), out.RawKey)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	body, _ := io.ReadAll(raw)
	if !json.Valid(body) || !strings.HasSuffix(out.RawKey, ".json") {
		t.Errorf("raw %s = %q", out.RawKey, body)
	}
}

// Scenario: No speech is a verdict and the raw answer is kept
func TestRecognizeNoSpeechKeepsRaw(t *testing.T) {
	eng := &fakeEngine{submit: func(context.Context, engine.Request) (engine.Submission, error) {
		return engine.Submission{Result: &engine.Result{Text: "  \n", Raw: []byte("nothing"), RawType: "text/plain"}}, nil
	}}
	f := newFixture(t, eng)
	_, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{AudioKey: storedAudio(t, f), Engine: "fake"})
	if appErr := appError(t, err); appErr.Type() != string(job.NoSpeech) || !appErr.NonRetryable() {
		t.Fatalf("error = %v; want non-retryable %s", err, job.NoSpeech)
	}
	var raw []string
	if err := filepath.WalkDir(f.blobs.Root(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "raw-fake.txt" {
			raw = append(raw, p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 1 {
		t.Errorf("raw responses of a no-speech result = %v; want one kept", raw)
	}
}

// Scenario: Every engine error is classified once
func TestRecognizeErrorClassification(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		wantKind      job.Kind
		wantRetryable bool
		wantDelay     time.Duration
	}{
		{"unauthorized", &engine.Error{Kind: engine.Unauthorized, Status: 401, Message: "invalid key"}, job.EngineUnauthorized, false, 0},
		{"rejected", &engine.Error{Kind: engine.Rejected, Status: 413, Message: "too large"}, job.EngineRejected, false, 0},
		{"operation failed", &engine.Error{Kind: engine.OperationFailed, Message: "bad audio"}, job.OperationFailed, false, 0},
		{"unavailable waits the schedule", &engine.Error{Kind: engine.Unavailable, Status: 503}, job.ServiceError, true, 30 * time.Second},
		{"retry-after longer than schedule wins", &engine.Error{Kind: engine.Unavailable, Status: 429, RetryAfter: 90 * time.Second}, job.ServiceError, true, 90 * time.Second},
		{"unreachable is no_ack", &engine.Error{Kind: engine.Unreachable, Message: "connection refused"}, job.NoAck, true, 30 * time.Second},
		{"anything else is internal", errors.New("disk on fire"), job.Internal, true, 30 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eng := &fakeEngine{submit: func(context.Context, engine.Request) (engine.Submission, error) { return engine.Submission{}, tc.err }}
			f := newFixture(t, eng)
			_, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{Call: schedule, AudioKey: storedAudio(t, f), Engine: "fake"})
			appErr := appError(t, err)
			if got := job.Kind(appErr.Type()); got != tc.wantKind {
				t.Errorf("kind = %q; want %q", got, tc.wantKind)
			}
			if got := !appErr.NonRetryable(); got != tc.wantRetryable {
				t.Errorf("retryable = %v; want %v", got, tc.wantRetryable)
			}
			if got := appErr.NextRetryDelay(); got != tc.wantDelay {
				t.Errorf("next retry delay = %v; want %v", got, tc.wantDelay)
			}
			if d, ok := DetailsOf(appErr); !ok || d.Attempt != 1 {
				t.Errorf("details = %+v, %v; want attempt 1", d, ok)
			}
		})
	}
}

// Scenario: A recognition heartbeats and stops when cancelled
func TestRecognizeHeartbeatsAndStopsOnCancel(t *testing.T) {
	started := make(chan struct{})
	eng := &fakeEngine{submit: func(ctx context.Context, _ engine.Request) (engine.Submission, error) {
		close(started)
		<-ctx.Done()
		return engine.Submission{}, ctx.Err()
	}}
	f := newFixture(t, eng)
	ctx, cancel := context.WithCancel(context.Background())
	f.env.SetTestTimeout(time.Minute)
	f.env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	heartbeats := make(chan struct{}, 100)
	f.env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		select {
		case heartbeats <- struct{}{}:
		default:
		}
	})
	defer func(d time.Duration) { heartbeatEvery = d }(heartbeatEvery)
	heartbeatEvery = 10 * time.Millisecond
	go func() {
		<-started
		// A live engine call keeps its lease by heartbeats.
		<-heartbeats
		cancel()
	}()
	_, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{AudioKey: storedAudio(t, f), Engine: "fake"})
	if err == nil {
		t.Fatal("a cancelled recognition returned no error")
	}
	// The activity hands back the context's error untouched, so Temporal
	// records a cancellation, not a failure of some kind.
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Errorf("error = %v; want the context's cancellation", err)
	}
}

// Scenario: A running operation is a success of the check step
func TestCheckStillRunningIsNotAFailure(t *testing.T) {
	eng := &fakeEngine{check: func(_ context.Context, id string) (engine.Submission, error) {
		return engine.Submission{}, nil
	}}
	f := newFixture(t, eng)
	v, err := f.env.ExecuteActivity(f.acts.CheckRecognition, CheckInput{Engine: "fake", OperationID: "op-7"})
	if err != nil {
		t.Fatalf("CheckRecognition: %v", err)
	}
	var out Recognition
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.Done || out.OperationID != "op-7" || out.PollAfter != engine.DefaultPollInterval {
		t.Errorf("recognition = %+v; want op-7 still running, checked again after %v", out, engine.DefaultPollInterval)
	}
}

// Scenario: A check the engine refuses for now waits instead of failing
func TestCheckRateLimitedIsAWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *engine.Error
		want time.Duration
	}{
		{"429 with Retry-After", &engine.Error{Kind: engine.Unavailable, Status: 429, RetryAfter: 90 * time.Second, Message: "slow down"}, 90 * time.Second},
		{"429 without a hint", &engine.Error{Kind: engine.Unavailable, Status: 429, Message: "slow down"}, engine.DefaultPollInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &fakeEngine{check: func(context.Context, string) (engine.Submission, error) { return engine.Submission{}, tc.err }}
			f := newFixture(t, eng)
			v, err := f.env.ExecuteActivity(f.acts.CheckRecognition, CheckInput{Call: schedule, Engine: "fake", OperationID: "op-7"})
			if err != nil {
				t.Fatalf("CheckRecognition: %v; want a running operation", err)
			}
			var out Recognition
			if err := v.Get(&out); err != nil {
				t.Fatal(err)
			}
			if out.Done || out.OperationID != "op-7" || out.PollAfter < tc.want {
				t.Errorf("recognition = %+v; want op-7 still running, checked again after at least %v", out, tc.want)
			}
		})
	}
	// A 503 is trouble, not a wait: it still spends an attempt.
	eng := &fakeEngine{check: func(context.Context, string) (engine.Submission, error) {
		return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Status: 503, Message: "down"}
	}}
	f := newFixture(t, eng)
	_, err := f.env.ExecuteActivity(f.acts.CheckRecognition, CheckInput{Call: schedule, Engine: "fake", OperationID: "op-7"})
	if appErr := appError(t, err); appErr.Type() != string(job.ServiceError) {
		t.Errorf("503 on a check: kind %q; want %q", appErr.Type(), job.ServiceError)
	}
}

// Scenario: Replies that cannot be delivered are recorded and do not fail
func TestSendReply(t *testing.T) {
	done := Reply{JobID: "tg-1-2", Source: job.SourceTelegram, State: job.Done, TranscriptKey: "jobs/tg-1-2/transcript.json"}
	storeTranscript := func(t *testing.T, f *fixture) {
		body, _ := json.Marshal(transcript.Document{Text: "go forward ten meters"})
		if _, err := f.blobs.Put(context.Background(), done.TranscriptKey, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		reply      Reply
		replier    bool
		wantReason job.Undelivered
		wantLevel  string
		delivered  int
	}{
		{"command-line job has nothing to deliver", Reply{JobID: "cli-1", Source: job.SourceCLI, State: job.Done}, false, "", "", 0},
		// Whether a reply is expected follows from the recipient, not from
		// the source.
		{"a job without a recipient expects no reply, whatever its source", done, true, "", "", 0},
		{"intake not running", withRecipient(done), false, job.UndeliveredIntakeNotRunning, "WARN", 0},
		{"recipient without an address", withAddress(done, ""), true, job.UndeliveredRecipientMissing, "ERROR", 0},
		{"delivered", withRecipient(done), true, "", "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &fakeEngine{})
			storeTranscript(t, f)
			rr := &recordingReplier{}
			if tc.replier {
				f.acts.Repliers[job.SourceTelegram] = rr
			}
			if _, err := f.env.ExecuteActivity(f.acts.SendReply, ReplyInput{Reply: tc.reply}); err != nil {
				t.Fatalf("SendReply: %v", err)
			}
			if len(rr.outcomes) != tc.delivered {
				t.Errorf("delivered %d replies; want %d", len(rr.outcomes), tc.delivered)
			}
			for _, reason := range []job.Undelivered{job.UndeliveredIntakeNotRunning, job.UndeliveredRecipientMissing} {
				want := 0.0
				if reason == tc.wantReason {
					want = 1
				}
				if got := testutil.ToFloat64(f.acts.Metrics.RepliesUndelivered.WithLabelValues(string(reason))); got != want {
					t.Errorf("undelivered{%s} = %v; want %v", reason, got, want)
				}
			}
			logs := f.logs.String()
			if tc.wantReason != "" {
				if !strings.Contains(logs, "level="+tc.wantLevel+" msg=\"reply undelivered\"") ||
					!strings.Contains(logs, "job_id=default-test-workflow-id step=SendReply") || !strings.Contains(logs, "reason="+string(tc.wantReason)) {
					t.Errorf("log lacks a %s record with job id and reason:\n%s", tc.wantLevel, logs)
				}
			} else if strings.Contains(logs, "undelivered") {
				t.Errorf("unexpected undelivered record:\n%s", logs)
			}
			if strings.Contains(logs, "go forward") {
				t.Errorf("the log holds the transcript:\n%s", logs)
			}
			if tc.delivered == 1 && rr.outcomes[0].Text != "go forward ten meters" {
				t.Errorf("delivered text = %q", rr.outcomes[0].Text)
			}
		})
	}
}

func withRecipient(r Reply) Reply { return withAddress(r, "1") }

func withAddress(r Reply, address job.Ref) Reply {
	r.Recipient = &job.Recipient{Address: address, Message: "2"}
	return r
}

// serviceErr is a failure of an intake's service as a Replier or Fetcher
// reports it.
type serviceErr struct {
	temporary bool
	delay     time.Duration
	kind      job.Kind
}

func (e serviceErr) Error() string             { return "service says no" }
func (e serviceErr) Temporary() bool           { return e.temporary }
func (e serviceErr) RetryDelay() time.Duration { return e.delay }
func (e serviceErr) Verdict() (job.Kind, bool) { return e.kind, e.kind != "" }

// Scenario: A retried reply resumes after the parts already sent
//
// Each attempt runs in an environment of its own over the same blob
// store, as a retry on another worker after the first one was killed: no
// heartbeat details carry over, only what the first attempt stored.
func TestSendReplyResumesAfterSentParts(t *testing.T) {
	tests := []struct {
		name string
		lose func(part int, recorded bool) bool
		// wantSent is every part that went out, over both attempts.
		wantSent []int
		wantWarn bool
	}{
		{"lost after the second part was recorded", func(p int, rec bool) bool { return p == 1 && rec }, []int{0, 1, 2}, false},
		{"lost with the second part in flight", func(p int, rec bool) bool { return p == 1 && !rec }, []int{0, 1, 1, 2}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first := newFixture(t, &fakeEngine{})
			body, _ := json.Marshal(transcript.Document{Text: "text"})
			if _, err := first.blobs.Put(context.Background(), "t.json", bytes.NewReader(body)); err != nil {
				t.Fatal(err)
			}
			rr := &recordingReplier{parts: 3, lose: tc.lose}
			first.acts.Repliers[job.SourceTelegram] = rr
			in := ReplyInput{Call: schedule, Reply: Reply{JobID: "tg-1-2", Source: job.SourceTelegram, Recipient: &job.Recipient{Address: "1"}, State: job.Done, TranscriptKey: "t.json"}}
			if _, err := first.env.ExecuteActivity(first.acts.SendReply, in); err == nil {
				t.Fatal("the lost attempt succeeded")
			}

			retry := newFixture(t, &fakeEngine{})
			retry.acts.Blobs, retry.blobs = first.blobs, first.blobs
			rr.lose = nil
			retry.acts.Repliers[job.SourceTelegram] = rr
			if _, err := retry.env.ExecuteActivity(retry.acts.SendReply, in); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rr.sent, tc.wantSent) {
				t.Errorf("parts sent = %v; want %v", rr.sent, tc.wantSent)
			}
			warned := strings.Contains(retry.logs.String(), "in flight")
			if warned != tc.wantWarn {
				t.Errorf("retry warned of a part in flight: %v; want %v\n%s", warned, tc.wantWarn, retry.logs.String())
			}
		})
	}
}

// Scenario: A reply that fits one message takes over the status message
func TestSendReplyReportsTheStatusMessage(t *testing.T) {
	for _, use := range []bool{false, true} {
		f := newFixture(t, &fakeEngine{})
		rr := &recordingReplier{delivery: Delivery{InStatusMessage: use}}
		f.acts.Repliers[job.SourceTelegram] = rr
		in := ReplyInput{Reply: Reply{JobID: "tg-1-2", Source: job.SourceTelegram, State: job.Failed, UseStatusMessage: use,
			Recipient: &job.Recipient{Address: "1", StatusMessage: "3"}}}
		v, err := f.env.ExecuteActivity(f.acts.SendReply, in)
		if err != nil {
			t.Fatal(err)
		}
		var d Delivery
		if err := v.Get(&d); err != nil {
			t.Fatal(err)
		}
		if d.InStatusMessage != use || len(rr.outcomes) != 1 || rr.outcomes[0].UseStatusMessage != use {
			t.Errorf("use %v: delivery %+v, outcomes %+v", use, d, rr.outcomes)
		}
	}
}

// Scenario: A reply the sender's service refuses for good is recorded, not retried
func TestSendReplyRefusedByService(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantErr    bool
		wantReason job.Undelivered
		wantDelay  time.Duration
	}{
		{"blocked by the user", serviceErr{temporary: false}, false, job.UndeliveredRecipientRefused, 0},
		{"rate limited", serviceErr{temporary: true, delay: 45 * time.Second}, true, "", 45 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &fakeEngine{})
			f.acts.Repliers[job.SourceTelegram] = &recordingReplier{err: tc.err}
			in := ReplyInput{Call: schedule, Reply: Reply{JobID: "tg-1-2", Source: job.SourceTelegram, Recipient: &job.Recipient{Address: "1"}, State: job.Failed}}
			_, err := f.env.ExecuteActivity(f.acts.SendReply, in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v; want error %v", err, tc.wantErr)
			}
			if err != nil {
				if appErr := appError(t, err); appErr.NextRetryDelay() != tc.wantDelay || appErr.Type() != string(job.ServiceError) {
					t.Errorf("error = %v (delay %v); want %s retried after %v", err, appErr.NextRetryDelay(), job.ServiceError, tc.wantDelay)
				}
			}
			if tc.wantReason != "" && testutil.ToFloat64(f.acts.Metrics.RepliesUndelivered.WithLabelValues(string(tc.wantReason))) != 1 {
				t.Errorf("undelivered{%s} not counted", tc.wantReason)
			}
		})
	}
}

type fakeFetcher struct {
	data []byte
	err  error
}

func (f fakeFetcher) Fetch(_ context.Context, _ string, w io.Writer) (int64, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := w.Write(f.data)
	return int64(n), err
}

// Scenario: The recording is fetched from the intake's service into the store
func TestFetchOriginal(t *testing.T) {
	tests := []struct {
		name      string
		fetcher   Fetcher
		wantKind  job.Kind
		retryable bool
	}{
		{"stored", fakeFetcher{data: []byte("OggS voice")}, "", false},
		{"too big for the service", fakeFetcher{err: serviceErr{kind: job.FileTooBig}}, job.FileTooBig, false},
		{"service down", fakeFetcher{err: serviceErr{temporary: true}}, job.ServiceError, true},
		{"no connection here", nil, job.IntakeNotRunning, true},
		{"empty file", fakeFetcher{}, job.EmptyAudio, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &fakeEngine{})
			f.acts.Fetchers = map[job.Source]Fetcher{}
			if tc.fetcher != nil {
				f.acts.Fetchers[job.SourceTelegram] = tc.fetcher
			}
			v, err := f.env.ExecuteActivity(f.acts.FetchOriginal, FetchInput{Source: job.SourceTelegram, FileID: "AwAD", Ext: ".ogg"})
			if tc.wantKind == "" {
				if err != nil {
					t.Fatal(err)
				}
				var out FetchOutput
				if err := v.Get(&out); err != nil {
					t.Fatal(err)
				}
				r, err := f.blobs.Open(context.Background(), out.Key)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				got, _ := io.ReadAll(r)
				if string(got) != "OggS voice" || out.Size != 10 || !strings.HasSuffix(out.Key, "/original.ogg") {
					t.Errorf("fetched %q into %s (%d bytes)", got, out.Key, out.Size)
				}
				return
			}
			appErr := appError(t, err)
			if appErr.Type() != string(tc.wantKind) || appErr.NonRetryable() == tc.retryable {
				t.Errorf("error = %v; want kind %s, retryable %v", err, tc.wantKind, tc.retryable)
			}
		})
	}
}

// slowStore is a blob store that is not on this machine, as S3 is: steps
// copy from it, and each read takes a while.
type slowStore struct {
	BlobStore
	pause time.Duration
	// copied is closed when a reader reaches the end.
	copied chan struct{}
	once   sync.Once
}

func (s *slowStore) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := s.BlobStore.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &slowReader{ReadCloser: r, s: s}, nil
}

type slowReader struct {
	io.ReadCloser
	s *slowStore
}

func (r *slowReader) Read(p []byte) (int, error) {
	time.Sleep(r.s.pause)
	n, err := r.ReadCloser.Read(p[:min(len(p), 4096)])
	if err == io.EOF {
		r.s.once.Do(func() { close(r.s.copied) })
	}
	return n, err
}

// Scenario: Steps heartbeat from their first byte, while the audio is still being copied
func TestStepsHeartbeatWhileCopying(t *testing.T) {
	testaudio.Require(t)
	defer func(d time.Duration) { heartbeatEvery = d }(heartbeatEvery)
	heartbeatEvery = 10 * time.Millisecond
	tests := []struct {
		name string
		run  func(f *fixture, key string) error
	}{
		{"convert", func(f *fixture, key string) error {
			_, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{Call: schedule, OriginalKey: key, Engine: "fake"})
			return err
		}},
		{"recognize", func(f *fixture, key string) error {
			_, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{Call: schedule, AudioKey: key, Engine: "fake"})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eng := &fakeEngine{format: audio.WAV16kMono, submit: func(context.Context, engine.Request) (engine.Submission, error) {
				return engine.Submission{Result: &engine.Result{Text: "go forward ten meters"}}, nil
			}}
			f := newFixture(t, eng)
			key := "jobs/default-test-workflow-id/original.ogg"
			f.put(t, key, testaudio.VoiceNote(t, t.TempDir()))
			slow := &slowStore{BlobStore: f.acts.Blobs, pause: 20 * time.Millisecond, copied: make(chan struct{})}
			f.acts.Blobs = slow
			var mu sync.Mutex
			duringCopy := 0
			f.env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
				mu.Lock()
				defer mu.Unlock()
				select {
				case <-slow.copied:
				default:
					duringCopy++
				}
			})
			if err := tc.run(f, key); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if duringCopy == 0 {
				t.Error("no heartbeat while the audio was copied out of the store; a long copy would lose the lease")
			}
		})
	}
}

// englishOnly is an engine that declares the languages it recognises.
type englishOnly struct{ fakeEngine }

func (englishOnly) Languages() []string { return []string{"en"} }

// Scenario: A job in a language its engine does not recognise fails at once, before any work
func TestConvertRefusesUnsupportedLanguage(t *testing.T) {
	f := newFixture(t, &fakeEngine{})
	f.acts.Engines["english"] = &englishOnly{}
	// Nothing is stored under the key: the verdict comes before any copy or
	// conversion.
	_, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{Call: schedule, OriginalKey: "jobs/x/missing.ogg", Engine: "english", Language: "ru-RU"})
	appErr := appError(t, err)
	if job.Kind(appErr.Type()) != job.UnsupportedLanguage || !appErr.NonRetryable() {
		t.Fatalf("error = %v; want a verdict of kind %s", err, job.UnsupportedLanguage)
	}
	for _, want := range []string{"english engine does not recognise ru-RU, only en", "TRANSCRIBER_ENGINE_ROUTES=ru=openai"} {
		if !strings.Contains(appErr.Message(), want) {
			t.Errorf("message %q lacks %q", appErr.Message(), want)
		}
	}
	for _, lang := range []string{"", "en", "en-GB"} {
		_, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{Call: schedule, OriginalKey: "jobs/x/missing.ogg", Engine: "english", Language: lang})
		if appErr := appError(t, err); job.Kind(appErr.Type()) == job.UnsupportedLanguage {
			t.Errorf("language %q refused: %v", lang, err)
		}
	}
}

// translatingEngine is a fake that translates.
type translatingEngine struct{ fakeEngine }

func (*translatingEngine) Translates() bool { return true }

// Scenario: A job's wishes reach the engine, and a translation only an engine that translates
func TestRecognizePassesWishesAndRefusesTranslation(t *testing.T) {
	var got engine.Request
	submit := func(_ context.Context, req engine.Request) (engine.Submission, error) {
		got = req
		return engine.Submission{Result: &engine.Result{Text: "hello", Words: []engine.Word{{Start: 0, End: time.Second, Text: "hello", Speaker: "A"}}}}, nil
	}
	in := RecognizeInput{Engine: "fake", Duration: time.Second, Speakers: true, SpeakersExpected: 3, Temperature: 0.4, Translate: true}

	f := newFixture(t, &fakeEngine{submit: submit})
	in.AudioKey = storedAudio(t, f)
	_, err := f.env.ExecuteActivity(f.acts.Recognize, in)
	if appErr := appError(t, err); appErr.Type() != string(job.EngineRejected) || !appErr.NonRetryable() || got.AudioPath != "" {
		t.Fatalf("translation by an engine that does not translate = %v (engine called: %v); want a verdict before any call", err, got.AudioPath != "")
	}

	f = newFixture(t, &fakeEngine{})
	f.acts.Engines["fake"] = &translatingEngine{fakeEngine{submit: submit}}
	in.AudioKey = storedAudio(t, f)
	v, err := f.env.ExecuteActivity(f.acts.Recognize, in)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Speakers || got.SpeakersExpected != 3 || got.Temperature != 0.4 || !got.Translate {
		t.Errorf("request = %+v; want the job's wishes", got)
	}
	var out Recognition
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	r, err := f.blobs.Open(context.Background(), out.TranscriptKey)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	doc, err := transcript.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Words) != 1 || doc.Words[0].Speaker != "A" {
		t.Errorf("stored words = %+v; want the engine's word with its speaker", doc.Words)
	}
}
