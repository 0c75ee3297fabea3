package main

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/engine/assemblyai/assemblyaitest"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// Scenario: AssemblyAI's callback finishes the job without waiting for the next check
func TestAssemblyAICallbackWakesJob(t *testing.T) {
	requireSpeechTools(t)
	const key, secret = "aai-e2e-key", "callback-secret-e2e"
	aai := assemblyaitest.New(t, key)
	aai.SetResult(testaudio.GoForwardText, "en_us", nil)
	aai.NeverFinish()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// Checks come only every ten minutes: within the test, only the
	// webhook can finish the job.
	u := startUpWith(t, t.TempDir(), httpAddr, fmt.Sprintf("127.0.0.1:%d", freePort(t)), strconv.Itoa(freePort(t)),
		"TRANSCRIBER_ENGINE", "assemblyai", "ASSEMBLYAI_BASE_URL", aai.URL(), "ASSEMBLYAI_API_KEY", key,
		"ASSEMBLYAI_POLL_INTERVAL", "10m",
		"ASSEMBLYAI_WEBHOOK_URL", "http://"+httpAddr+"/v1/callbacks/assemblyai", "ASSEMBLYAI_WEBHOOK_SECRET", secret)
	done := make(chan result, 1)
	note := testaudio.VoiceNote(t, t.TempDir())
	go func() { done <- runCLI(t, u.client, "transcribe", note) }()
	waitFor(t, "the transcript created at AssemblyAI", func() bool { return len(aai.Created()) == 1 })
	created := aai.Created()[0]
	id := cliJobID(t, note, "assemblyai")
	if got, _ := created["webhook_url"].(string); !strings.HasSuffix(got, "/v1/callbacks/assemblyai?job="+id) {
		t.Errorf("webhook_url = %q; want the callback endpoint naming job %s", got, id)
	}
	if v, _ := created["webhook_auth_header_value"].(string); v == "" || strings.Contains(v, secret) {
		t.Errorf("webhook token = %q; want a token derived from, not equal to, the secret", v)
	}

	start := time.Now()
	if got := aai.Complete(); !slices.Equal(got, []int{http.StatusOK}) {
		t.Fatalf("webhook deliveries answered %v; want one 200", got)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the job did not finish after the webhook")
	}
	if r.code != 0 || !strings.Contains(r.stdout, testaudio.GoForwardText) {
		t.Fatalf("transcribe: code %d, out %q\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("done %v after the webhook", time.Since(start).Round(time.Millisecond))

	// AssemblyAI repeats a call it thinks went unanswered; the job is
	// closed by now, so the repeat is acknowledged and dropped.
	if got := aai.Redeliver(); !slices.Equal(got, []int{http.StatusOK}) {
		t.Errorf("repeated delivery answered %v; want 200", got)
	}
	waitFor(t, "the dropped callback logged", func() bool {
		return strings.Contains(u.logs.String(), "engine callback dropped: the job is not running")
	})

	// A call without the job's token is refused.
	req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/callbacks/assemblyai?job="+id,
		strings.NewReader(`{"transcript_id":"x","status":"completed"}`))
	req.Header.Set("X-Transcriber-Callback-Token", "guess")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged callback got %d; want 401", resp.StatusCode)
	}
	if strings.Contains(u.logs.String(), secret) {
		t.Error("the log holds the callback secret")
	}
}
