package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// Scenario: Recordings and transcripts are removed once the retention period after the job has passed
func TestRetentionRemovesJobObjects(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	dataDir := t.TempDir()
	u := startUp(t, dataDir, "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1",
		"TRANSCRIBER_RETENTION", "10s", "TRANSCRIBER_API_TOKENS", "ops:retention-token",
		// The job is the command line's; only an admin sees it over the API.
		"TRANSCRIBER_ADMINS", "ops")
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, u.client, "transcribe", note)
	if r.code != 0 || !strings.Contains(r.stdout, testaudio.GoForwardText) {
		t.Fatalf("transcribe: code %d, out %q\n%s", r.code, r.stdout, r.stderr)
	}
	id := cliJobID(t, note, "openai")
	jobDir := filepath.Join(dataDir, "blobs", filepath.FromSlash(blob.JobKey(id, "")))
	if entries, err := os.ReadDir(jobDir); err != nil || len(entries) == 0 {
		t.Fatalf("the job's objects are not kept during retention: %v %v", entries, err)
	}
	if got := showField(runCLI(t, u.client, "jobs", "show", id).stdout, "recordings"); !strings.HasPrefix(got, "kept until ") {
		t.Errorf("jobs show says recordings %q; want kept until a time", got)
	}
	waitFor(t, "the recordings removed", func() bool {
		return strings.HasPrefix(showField(runCLI(t, u.client, "jobs", "show", id).stdout, "recordings"), "removed ")
	})
	if _, err := os.Stat(jobDir); !os.IsNotExist(err) {
		t.Errorf("the job's directory is still there after retention: %v", err)
	}
	apiGet := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+u.http+path, nil)
		req.Header.Set("Authorization", "Bearer retention-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := apiGet("/v1/jobs/" + id + "/transcript"); code != http.StatusGone || !strings.Contains(body, `"removed"`) {
		t.Errorf("GET transcript after removal = %d %s; want 410 removed", code, body)
	}
	if code, body := apiGet("/v1/jobs/" + id); code != http.StatusOK || !strings.Contains(body, `"removed_at"`) {
		t.Errorf("GET job after removal = %d %s; want removed_at", code, body)
	}
	show := runCLI(t, u.client, "jobs", "show", id)
	if show.code != 0 || showField(show.stdout, "state") != "done" {
		t.Errorf("jobs show after removal: code %d\n%s%s", show.code, show.stdout, show.stderr)
	}
}
