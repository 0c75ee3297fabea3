package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/testaudio"
)

// Scenario: JSON logs name the job, the workflow and the step on every record about a job
func TestJSONLogsNameJobAndStep(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	engine.set(http.StatusServiceUnavailable)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_LOG_FORMAT", "json",
		"TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")
	failing := func(k string) string {
		switch k {
		case "TRANSCRIBER_RETRY_SCHEDULE":
			return "100ms"
		case "TRANSCRIBER_MAX_ATTEMPTS":
			return "2"
		}
		return u.client(k)
	}
	r := runCLI(t, failing, "transcribe", testaudio.VoiceNote(t, t.TempDir()))
	id, state := jobOf(t, r.stderr)
	if state != "dead" {
		t.Fatalf("job %s is %s; want dead\n%s", id, state, r.stderr)
	}
	waitFor(t, "the job's records", func() bool { return strings.Contains(u.logs.String(), `"job stopped"`) })

	var about, stepFailed, jobStopped int
	for _, line := range strings.Split(strings.TrimSpace(u.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		wf, hasWF := rec["WorkflowID"]
		job, hasJob := rec["job_id"]
		if !hasWF && !hasJob {
			continue
		}
		about++
		if !hasWF || !hasJob || wf != job || rec["step"] == nil || rec["step"] == "" {
			t.Errorf("record about a job lacks job_id, WorkflowID or step: %s", line)
		}
		switch {
		case rec["msg"] == "step failed" && job == id && rec["step"] == "Recognize":
			stepFailed++
		case rec["msg"] == "job stopped" && job == id && rec["step"] == "transcribing":
			jobStopped++
		}
	}
	if stepFailed != 2 || jobStopped != 1 {
		t.Errorf("found %d 'step failed' records of Recognize and %d 'job stopped' of transcribing for %s; want 2 and 1\n%s",
			stepFailed, jobStopped, id, u.logs.String())
	}
	t.Logf("%d records about jobs, all with job_id, WorkflowID and step", about)
}
