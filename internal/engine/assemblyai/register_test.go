package assemblyai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/assemblyai/assemblyaitest"
)

// Scenario: AssemblyAI's calls are checked by the engine's callback receiver
func TestCallbacksReadTheStandInsWebhook(t *testing.T) {
	const secret = "s3cret"
	receiver := NewCallbacks(secret)
	var (
		mu    sync.Mutex
		calls []engine.Callback
		errs  []error
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := receiver.ReadCallback(r)
		mu.Lock()
		calls, errs = append(calls, c), append(errs, err)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)

	srv := assemblyaitest.New(t, testKey)
	srv.NeverFinish()
	e, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, WebhookURL: hook.URL + "/v1/callbacks/assemblyai", WebhookSecret: secret}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := writeAudio(t, "a.flac", 2048)
	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, JobID: "tg-42-7"})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Complete(); !slices.Equal(got, []int{http.StatusOK}) {
		t.Fatalf("webhook answered %v; want one 200", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := engine.Callback{JobID: "tg-42-7", OperationID: sub.OperationID, Status: "completed"}
	if len(calls) != 1 || errs[0] != nil || calls[0] != want {
		t.Errorf("callbacks = %+v, %v; want %+v", calls, errs, want)
	}

	// What the stand-in would never send is refused.
	for _, tc := range []struct {
		name, job, token, body string
		forged                 bool
	}{
		{"no token", "tg-42-7", "", `{"transcript_id":"x"}`, true},
		{"another job's token", "tg-42-7", engine.CallbackToken(secret, "tg-42-8"), `{"transcript_id":"x"}`, true},
		{"no job", "", engine.CallbackToken(secret, ""), `{"transcript_id":"x"}`, true},
		{"a job id too long to be ours", strings.Repeat("j", maxJobID+1), engine.CallbackToken(secret, strings.Repeat("j", maxJobID+1)), `{"transcript_id":"x"}`, true},
		{"no transcript", "tg-42-7", engine.CallbackToken(secret, "tg-42-7"), `{"status":"completed"}`, false},
		{"a huge body", "tg-42-7", engine.CallbackToken(secret, "tg-42-7"), `{"transcript_id":"` + strings.Repeat("x", maxCallbackBody) + `"}`, false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/callbacks/assemblyai?job="+tc.job, strings.NewReader(tc.body))
		r.Header.Set(engine.CallbackHeader, tc.token)
		_, err := receiver.ReadCallback(r)
		if err == nil || errors.Is(err, engine.ErrCallbackToken) != tc.forged {
			t.Errorf("%s: error = %v; want one that says forged: %v", tc.name, err, tc.forged)
		}
	}
}
