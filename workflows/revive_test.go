package workflows

import (
	"context"
	"errors"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: A revive update refuses a running job and says why
func (s *workflowSuite) Test_ReviveUpdateRefusesRunningJob() {
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).After(time.Minute).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()
	var rejected error
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateRevive, "early", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { rejected = err },
			OnAccept:   func() { s.Fail("a running job accepted revive") },
			OnComplete: func(any, error) {},
		})
	}, 10*time.Second)

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Done, s.result().State, "the refused revive changed nothing")
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(rejected, &appErr), "rejected with %v; want an application error", rejected)
	s.Equal(ErrTypeNotRevivable, appErr.Type())
	var state job.State
	s.Require().NoError(appErr.Details(&state))
	s.Equal(job.Converting, state)
	s.Contains(appErr.Message(), "the job is converting")
	s.Zero(s.status().Revivals)
}

// Scenario: A revive update resumes a dead job and answers with the failure it revived
func (s *workflowSuite) Test_ReviveUpdateResumesDeadJob() {
	in := testInput()
	in.Policy.MaxAttempts = 2
	healthy := s.engineFailingUntilHealthy()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Twice()
	var answer Status
	var answered bool
	s.env.RegisterDelayedCallback(func() {
		*healthy = true
		s.env.UpdateWorkflow(UpdateRevive, "operator", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { s.Fail("revive of a dead job refused", "%v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				s.Require().NoError(err)
				answer, answered = v.(Status), true
			},
		})
	}, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Require().True(answered, "the revive update never completed")
	s.Equal(job.Dead, answer.State)
	s.Require().NotNil(answer.Failure)
	s.Equal(job.Transcribing, answer.Failure.Step)
	s.Equal(1, s.status().Revivals)
}

// deadOnDeadline runs a job whose engine operation never finishes until
// its deadline makes it dead, then revives it; the engine answers the next
// submission at once.
func (s *workflowSuite) deadOnDeadline(in Input) (submits, checks *int) {
	submits, checks = new(int), new(int)
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RecognizeInput) (activities.Recognition, error) {
			*submits++
			if *submits == 1 {
				return activities.Recognition{OperationID: "op-1", PollAfter: time.Minute}, nil
			}
			return recognized, nil
		})
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.CheckInput) (activities.Recognition, error) {
			*checks++
			return activities.Recognition{OperationID: "op-1", PollAfter: time.Minute}, nil
		})
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil)
	// The deadline of a 3 s recording is a little over half an hour.
	s.env.RegisterDelayedCallback(func() {
		s.Require().Equal(job.Dead, s.status().State)
		s.env.SignalWorkflow(SignalRevive, nil)
	}, 2*time.Hour)
	s.env.ExecuteWorkflow(TranscribeRecording, in)
	return submits, checks
}

// Scenario: A job dead on its operation deadline, revived, submits afresh and finishes
func (s *workflowSuite) Test_ReviveAfterOperationDeadlineSubmitsAfresh() {
	submits, _ := s.deadOnDeadline(testInput())

	r := s.result()
	s.Equal(job.Done, r.State, "the revived job must call the engine again, not die on the old deadline")
	s.Equal(2, *submits)
	st := s.status()
	s.Empty(st.OperationID)
	s.Equal(1, st.Revivals)
}

// Jobs revived before the change keep failing on the old deadline when
// they replay, as they did.
func (s *workflowSuite) Test_ReviveAfterOperationDeadlineBeforeTheChange() {
	s.env.OnGetVersion(freshOperationAfterRevive, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	submits, _ := s.deadOnDeadline(testInput())

	r := s.result()
	s.Equal(job.Dead, r.State)
	s.Equal(job.Timeout, r.Failure.Kind)
	s.Equal(1, *submits)
}

// Scenario: A transcript whose reply outlasts the back-off keeps trying instead of going dead
func (s *workflowSuite) Test_ReplyOfTranscriptOutlastsBackoff() {
	in := testInput()
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	start := s.env.Now()
	attempts := 0
	var deliveredAfter time.Duration
	// Telegram is down for six hours: far past the five attempts of the
	// schedule, which give up after about 42 minutes.
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(func(context.Context, activities.ReplyInput) (activities.Delivery, error) {
		attempts++
		if s.env.Now().Sub(start) < 6*time.Hour {
			return activities.Delivery{}, temporal.NewApplicationError("telegram answered 502", string(job.ServiceError))
		}
		deliveredAfter = s.env.Now().Sub(start)
		return activities.Delivery{}, nil
	})

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State, "a transcript that waits for its sender's service is not dead")
	s.Greater(attempts, in.Policy.MaxAttempts)
	s.GreaterOrEqual(deliveredAfter, 6*time.Hour)
	s.Less(deliveredAfter, 6*time.Hour+45*time.Minute, "retries go on at the schedule's longest wait")
}
