package activities

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
)

// readBlob reads a stored object whole.
func readBlob(t *testing.T, f *fixture, key string) string {
	t.Helper()
	r, err := f.blobs.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// detailOf reads the FailureDetails of a step's error.
func detailOf(t *testing.T, err error) FailureDetails {
	t.Helper()
	appErr := appError(t, err)
	var d FailureDetails
	if !appErr.HasDetails() {
		return d
	}
	if err := appErr.Details(&d); err != nil {
		t.Fatalf("details: %v", err)
	}
	return d
}

// Scenario: An engine's error answer is kept and its code travels with the failure
func TestEngineErrorAnswerIsKept(t *testing.T) {
	const body = `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`
	for _, tc := range []struct {
		name      string
		err       *engine.Error
		check     bool
		wantKind  job.Kind
		wantRetry bool
	}{
		{"401 on submit is a verdict", (&engine.Error{Kind: engine.Unauthorized, Status: 401, Message: "refused", Code: "invalid_api_key"}).KeepRaw([]byte(body), "application/json"), false, job.EngineUnauthorized, false},
		{"503 on submit is retried", (&engine.Error{Kind: engine.Unavailable, Status: 503, Message: "down", Code: "UNAVAILABLE"}).KeepRaw([]byte(`{"code":14}`), "application/json"), false, job.ServiceError, true},
		{"failed operation on a check", (&engine.Error{Kind: engine.OperationFailed, Message: "could not recognise", Code: "INVALID_ARGUMENT"}).KeepRaw([]byte(`{"id":"op-7","done":true,"error":{"code":3}}`), "application/json"), true, job.OperationFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail := func() (engine.Submission, error) { return engine.Submission{}, tc.err }
			eng := &fakeEngine{
				submit: func(context.Context, engine.Request) (engine.Submission, error) { return fail() },
				check:  func(context.Context, string) (engine.Submission, error) { return fail() },
			}
			f := newFixture(t, eng)
			var err error
			if tc.check {
				_, err = f.env.ExecuteActivity(f.acts.CheckRecognition, CheckInput{Call: schedule, Engine: "fake", OperationID: "op-7"})
			} else {
				_, err = f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{Call: schedule, AudioKey: storedAudio(t, f), Engine: "fake"})
			}
			appErr := appError(t, err)
			if appErr.Type() != string(tc.wantKind) || appErr.NonRetryable() == tc.wantRetry {
				t.Errorf("error = %s retryable %v; want %s retryable %v", appErr.Type(), !appErr.NonRetryable(), tc.wantKind, tc.wantRetry)
			}
			d := detailOf(t, err)
			if d.Code != tc.err.Code {
				t.Errorf("Code = %q; want %q", d.Code, tc.err.Code)
			}
			if !strings.HasPrefix(d.RawKey, "jobs/") || !strings.HasSuffix(d.RawKey, "/raw-error-fake.json") {
				t.Fatalf("RawKey = %q; want the attempt's raw-error-fake.json under the job", d.RawKey)
			}
			if got := readBlob(t, f, d.RawKey); got != string(tc.err.Raw) {
				t.Errorf("stored raw answer = %q; want %q", got, tc.err.Raw)
			}
			// The raw answer may quote recognised text: it stays in the store.
			if strings.Contains(appErr.Error(), string(tc.err.Raw)) || strings.Contains(f.logs.String(), string(tc.err.Raw)) {
				t.Errorf("the raw answer reached the error text or the log")
			}
		})
	}
	t.Run("an error without a raw answer has no code or raw key", func(t *testing.T) {
		eng := &fakeEngine{submit: func(context.Context, engine.Request) (engine.Submission, error) {
			return engine.Submission{}, &engine.Error{Kind: engine.Unreachable, Message: "connection refused"}
		}}
		f := newFixture(t, eng)
		_, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{Call: schedule, AudioKey: storedAudio(t, f), Engine: "fake"})
		if d := detailOf(t, err); d.Code != "" || d.RawKey != "" || d.Attempt != 1 {
			t.Errorf("details = %+v; want only the attempt", d)
		}
	})
}

// Scenario: A no-speech verdict names the raw answer it was judged on
func TestNoSpeechNamesTheRawAnswer(t *testing.T) {
	eng := &fakeEngine{submit: func(context.Context, engine.Request) (engine.Submission, error) {
		return engine.Submission{Result: &engine.Result{Text: " ", Raw: []byte(`{"text":""}`), RawType: "application/json"}}, nil
	}}
	f := newFixture(t, eng)
	_, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{AudioKey: storedAudio(t, f), Engine: "fake"})
	if appErr := appError(t, err); appErr.Type() != string(job.NoSpeech) {
		t.Fatalf("error = %v; want %s", err, job.NoSpeech)
	}
	d := detailOf(t, err)
	if d.RawKey == "" || readBlob(t, f, d.RawKey) != `{"text":""}` {
		t.Errorf("RawKey = %q; want the stored answer without speech", d.RawKey)
	}
}

// Scenario: A chunked job's raw key lists every chunk's raw answer
func TestMergeListsTheChunksRawAnswers(t *testing.T) {
	f := newFixture(t, &fakeEngine{})
	ctx := context.Background()
	var parts []MergePart
	for i, text := range []string{"one", ""} {
		body, _ := json.Marshal(map[string]any{"engine": "fake", "text": text})
		key := "jobs/default-test-workflow-id/t" + string(rune('0'+i)) + ".json"
		raw := "jobs/default-test-workflow-id/raw" + string(rune('0'+i)) + ".json"
		for k, v := range map[string]string{key: string(body), raw: `{"chunk":` + string(rune('0'+i)) + `}`} {
			if _, err := f.blobs.Put(ctx, k, strings.NewReader(v)); err != nil {
				t.Fatal(err)
			}
		}
		parts = append(parts, MergePart{TranscriptKey: key, Offset: time.Duration(i) * 30 * time.Second, RawKey: raw})
	}
	v, err := f.env.ExecuteActivity(f.acts.MergeTranscripts, MergeInput{Call: schedule, Engine: "fake", Duration: time.Minute, Parts: parts})
	if err != nil {
		t.Fatalf("MergeTranscripts: %v", err)
	}
	var rec Recognition
	if err := v.Get(&rec); err != nil {
		t.Fatal(err)
	}
	var list rawChunks
	if err := json.Unmarshal([]byte(readBlob(t, f, rec.RawKey)), &list); err != nil {
		t.Fatalf("raw chunk list %q: %v", rec.RawKey, err)
	}
	if len(list.Chunks) != 2 || list.Chunks[0].RawKey != parts[0].RawKey || list.Chunks[1].RawKey != parts[1].RawKey || list.Chunks[1].OffsetSeconds != 30 {
		t.Errorf("raw chunk list = %+v; want both chunks' raw keys with their offsets", list)
	}
	// Silence in every chunk: the verdict names the same list.
	_, err = f.env.ExecuteActivity(f.acts.MergeTranscripts, MergeInput{Call: schedule, Engine: "fake", Parts: parts[1:]})
	if d := detailOf(t, err); d.RawKey == "" {
		t.Errorf("no-speech merge names no raw answer")
	}
}
