package main

import (
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/transcriber/transcriber/internal/testaudio"
)

// Scenario: A prompt sent to the API reaches the OpenAI-compatible server
func TestPromptReachesEngine(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1",
		"TRANSCRIBER_API_TOKENS", apiToken)
	base := "http://" + u.http
	note, err := os.ReadFile(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	body, ctype := multipartUpload(t, "voice.ogg", note, "prompt", "Kubernetes, Temporal")
	c := apiDo(t, http.MethodPost, base+"/v1/jobs", apiToken, body, "Content-Type", ctype)
	if c.status != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs = %d %s", c.status, c.body)
	}
	var a accepted
	c.json(t, &a)
	waitState(t, base, a.ID, "done")
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if !slices.Equal(engine.prompts, []string{"Kubernetes, Temporal"}) {
		t.Errorf("the engine received prompts %q; want the job's", engine.prompts)
	}
}
