package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// Scenario: The SDK's own records get the job's fields
func TestJobFields(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(JobFields(slog.NewJSONHandler(&buf, nil)))

	// The SDK binds its tags with With, then logs.
	log.With("WorkflowID", "tg-1-2", "ActivityType", "Convert").Error("Activity error.")
	log.Info("Workflow panic", "WorkflowID", "cli-abc", "RunID", "r")
	// Transcriber's own records keep their fields.
	log.With("WorkflowID", "tg-1-2", "job_id", "tg-1-2", "step", "transcribing").Warn("job stopped")
	// Records about no job are left alone.
	log.Info("worker started", "role", "up")
	// A WorkflowID inside a group is not the record's.
	log.WithGroup("request").Info("nested", "WorkflowID", "x")

	got := records(t, buf.String())
	want := []struct{ job, step any }{{"tg-1-2", "Convert"}, {"cli-abc", "workflow"}, {"tg-1-2", "transcribing"}, {nil, nil}, {nil, nil}}
	for i, w := range want {
		if got[i][JobID] != w.job || got[i][Step] != w.step {
			t.Errorf("record %d (%s): job_id=%v step=%v; want %v, %v", i, got[i]["msg"], got[i][JobID], got[i][Step], w.job, w.step)
		}
	}
	if n := strings.Count(buf.String(), `"job_id"`); n != 3 {
		t.Errorf("job_id appears %d times; a record must never get it twice:\n%s", n, buf.String())
	}
}
