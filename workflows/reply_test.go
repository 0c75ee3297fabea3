package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// statusMessageJob mocks the steps of a Telegram job whose status message
// is 555, and returns the states shown in it.
func (s *workflowSuite) statusMessageJob() *[]job.State {
	shown := &[]job.State{}
	s.env.OnActivity(a.Acknowledge, mock.Anything, mock.Anything).Return(job.Ref("555"), nil).Once()
	s.env.OnActivity(a.ShowProgress, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.NoticeInput) error {
		*shown = append(*shown, in.State)
		return nil
	})
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	return shown
}

// Scenario: A transcript in the status message is not overwritten by the job's progress
func (s *workflowSuite) Test_ReplyInStatusMessageEndsItsProgress() {
	shown := s.statusMessageJob()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Done && in.UseStatusMessage && in.Recipient.StatusMessage == "555"
	})).Return(activities.Delivery{InStatusMessage: true}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Done, s.result().State)
	s.Equal([]job.State{job.Converting, job.Transcribing, job.Replying}, *shown, "done is not shown over the transcript")
	s.True(s.status().StatusMessageTaken)
}

// Scenario: A reply sent as messages of its own leaves the status message to say done
func (s *workflowSuite) Test_ReplyBesideStatusMessageShowsDone() {
	shown := s.statusMessageJob()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.UseStatusMessage
	})).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal([]job.State{job.Converting, job.Transcribing, job.Replying, job.Done}, *shown)
	s.False(s.status().StatusMessageTaken)
}

// Scenario: Jobs started before replies went into the status message send them and show done
func (s *workflowSuite) Test_ReplyInStatusMessageBeforeTheChange() {
	s.env.OnGetVersion(leanPublish, workflow.DefaultVersion, leanInspects).Return(workflow.DefaultVersion)
	s.env.OnGetVersion(replyInStatusMessage, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	shown := s.statusMessageJob()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return !in.UseStatusMessage
	})).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Done, s.result().State)
	s.Equal([]job.State{job.Converting, job.Transcribing, job.Replying, job.Done}, *shown)
}

// Scenario: A revived job shows its progress again where its failure notice was, and delivers its transcript
func (s *workflowSuite) Test_RevivedJobTakesBackItsStatusMessage() {
	in := testInput()
	in.Policy.MaxAttempts = 1
	healthy := false
	shown := s.statusMessageJob()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RecognizeInput) (activities.Recognition, error) {
			if healthy {
				return recognized, nil
			}
			return activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))
		}).Twice()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Dead && in.UseStatusMessage
	})).Return(activities.Delivery{InStatusMessage: true}, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Done && in.UseStatusMessage
	})).Return(activities.Delivery{InStatusMessage: true}, nil).Once()
	var parked Status
	var shownWhileParked []job.State
	s.env.RegisterDelayedCallback(func() {
		parked = s.status()
		shownWhileParked = append(shownWhileParked, *shown...)
		healthy = true
		s.env.SignalWorkflow(SignalRevive, nil)
	}, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.True(parked.StatusMessageTaken, "the failure notice took over the status message")
	s.Equal([]job.State{job.Converting, job.Transcribing, job.Dead}, shownWhileParked)
	s.Equal([]job.State{job.Converting, job.Transcribing, job.Dead, job.Transcribing, job.Replying}, *shown,
		"after the revive the progress replaces the notice; done does not replace the transcript")
}
