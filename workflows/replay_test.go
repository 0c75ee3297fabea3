package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Scenario: Recorded histories replay, so a non-deterministic change fails CI
//
// The histories in testdata/histories were recorded from real jobs on the
// embedded server (go test ./cmd/transcriber -run TestRecordWorkflowHistories
// -update-histories). Jobs of those shapes may be running somewhere; if the
// workflow can no longer replay them, a change to its command sequence
// needs workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d recorded histories; want the done, polled, failed, dead-revived and cancelled ones", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Errorf("replay %s: %v", f, err)
			}
		})
	}
}

// A replay test that cannot fail proves nothing: changing the command
// sequence must break it.
func TestReplayDetectsNonDeterminism(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "histories", "done-local.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The recorded job ran Convert first; a workflow that began with
	// Recognize instead is a different command sequence.
	broken := strings.Replace(string(body), `"name": "Convert"`, `"name": "Recognize"`, 1)
	path := filepath.Join(t.TempDir(), "broken.json")
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, path); err == nil {
		t.Error("replaying a history with another command sequence succeeded")
	}
}
