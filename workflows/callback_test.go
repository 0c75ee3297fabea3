package workflows

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: An engine's callback ends the wait for its operation, and repeated callbacks are ignored
func (s *workflowSuite) Test_EngineCallbackWakesPolling() {
	in := testInput()
	in.Engine = "assemblyai"
	running := activities.Recognition{OperationID: "tr-1", PollAfter: time.Hour}
	start := s.env.Now()
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(running, nil).Once()
	var checks []time.Duration
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.MatchedBy(func(in activities.CheckInput) bool {
		return in.OperationID == "tr-1"
	})).Return(func(context.Context, activities.CheckInput) (activities.Recognition, error) {
		checks = append(checks, s.env.Now().Sub(start))
		return recognized, nil
	}).Once()
	// A callback about another operation wakes nothing.
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalEngineCallback, EngineCallback{OperationID: "tr-other", Status: "completed"})
	}, time.Minute)
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalEngineCallback, EngineCallback{OperationID: "tr-1", Status: "completed"})
	}, 2*time.Minute)
	// The reply is still being sent; the repeat must not cause another check.
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).After(10*time.Minute).Return(activities.Delivery{}, nil).Once()
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalEngineCallback, EngineCallback{OperationID: "tr-1", Status: "completed"})
	}, 3*time.Minute)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal([]time.Duration{2 * time.Minute}, checks, "one check, right after the callback, not after the hour")
}

// records is a logger that keeps the records a test asks about.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) add(level, msg string, kv ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, strings.TrimSpace(fmt.Sprintln(append([]any{level, msg}, kv...)...)))
}
func (r *records) Debug(msg string, kv ...any) { r.add("DEBUG", msg, kv...) }
func (r *records) Info(msg string, kv ...any)  { r.add("INFO", msg, kv...) }
func (r *records) Warn(msg string, kv ...any)  { r.add("WARN", msg, kv...) }
func (r *records) Error(msg string, kv ...any) { r.add("ERROR", msg, kv...) }

// count is how many records hold every part.
func (r *records) count(parts ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(m, p)
		}
		if all {
			n++
		}
	}
	return n
}

// Scenario: Callbacks the job does not wait for are logged and dropped
func TestStrayCallbacksAreLoggedAndDropped(t *testing.T) {
	logs := &records{}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(logs)
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&activities.Activities{})
	in := testInput()
	in.Engine = "assemblyai"
	env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(activities.Recognition{}, temporal.NewNonRetryableApplicationError("bad audio", string(job.EngineRejected), nil)).Once()
	env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()
	// A stranger's operation while the job converts, then the late result
	// of an operation while the job is failed.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalEngineCallback, EngineCallback{OperationID: "tr-stray", Status: "completed"})
	}, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalEngineCallback, EngineCallback{OperationID: "tr-late", Status: "completed"})
	}, time.Hour)

	env.ExecuteWorkflow(TranscribeRecording, in)

	if !env.IsWorkflowCompleted() {
		t.Fatal("the job did not close")
	}
	if n := logs.count("INFO engine callback dropped", "operation_id tr-stray reason the job waits for no such operation"); n != 1 {
		t.Errorf("the stray callback was logged %d times; want once:\n%s", n, strings.Join(logs.msgs, "\n"))
	}
	if n := logs.count("INFO engine callback dropped", "operation_id tr-late reason the job is failed or dead"); n != 1 {
		t.Errorf("the late callback was logged %d times; want once", n)
	}
}
