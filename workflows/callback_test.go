package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"

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
