package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: The job waits for a recognition service as long as the engine told the service, and a revive submits afresh
func (s *workflowSuite) Test_EngineDeadlineEndsTheWait() {
	in := testInput()
	in.Engine = "nats"
	in.Policy.ParkFor = time.Hour
	start := s.env.Now()
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	var submissions []int
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecognizeInput) (activities.Recognition, error) {
			submissions = append(submissions, in.Submission)
			if len(submissions) == 1 {
				return activities.Recognition{OperationID: "j:1", PollAfter: time.Hour, OperationTimeout: 5 * time.Second}, nil
			}
			return activities.Recognition{OperationID: "j:2", PollAfter: time.Hour, OperationTimeout: time.Minute}, nil
		}).Twice()
	// The wait ends on the deadline with a last look at the operation.
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.MatchedBy(func(in activities.CheckInput) bool {
		return in.OperationID == "j:1"
	})).Return(activities.Recognition{OperationID: "j:1", PollAfter: time.Hour}, nil).Once()
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.MatchedBy(func(in activities.CheckInput) bool {
		return in.OperationID == "j:2"
	})).Return(activities.Recognition{Done: true, TranscriptKey: "jobs/j/transcript.json", Service: "gpu-box", ServiceVersion: "3", NeedsCheck: true}, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil)
	var dead Status
	s.env.RegisterDelayedCallback(func() {
		dead = s.status()
		s.env.SignalWorkflow(SignalRevive, nil)
	}, 10*time.Minute)
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalEngineCallback, EngineCallback{OperationID: "j:2", Status: "needs_check"})
	}, 11*time.Minute)
	var review []temporal.SearchAttributeUpdate
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		attrs := args.Get(0).(temporal.SearchAttributes)
		if v, ok := attrs.GetKeyword(ReviewKey); ok && v == ReviewNeedsCheck {
			review = append(review, ReviewKey.ValueSet(v))
		}
	}).Return(nil)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal(job.Dead, dead.State)
	s.Require().NotNil(dead.Failure)
	s.Equal(job.Timeout, dead.Failure.Kind)
	s.Equal(5*time.Second, dead.Failure.At.Sub(start), "dead on the engine's deadline, not the policy's half hour")
	s.Equal([]int{1, 2}, submissions)
	st := s.status()
	s.Equal("gpu-box", st.Service)
	s.Equal("3", st.ServiceVersion)
	s.True(st.NeedsCheck)
	s.NotEmpty(review, "the review search attribute is upserted")
}
