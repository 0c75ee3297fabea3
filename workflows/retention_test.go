package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: A closed job's recordings are removed after the retention period, and its status says so
func (s *workflowSuite) Test_RetentionRemovesRecordings() {
	in := testInput()
	in.Source, in.Recipient = job.SourceCLI, nil
	in.Policy.Retain = 72 * time.Hour
	start := s.env.Now()
	var removedAt time.Duration
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.RemoveRecordings, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RemoveInput) (activities.RemoveOutput, error) {
			removedAt = s.env.Now().Sub(start)
			return activities.RemoveOutput{Objects: 4}, nil
		}).Once()
	var kept Status
	s.env.RegisterDelayedCallback(func() { kept = s.status() }, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal(job.Done, kept.State, "the job is done while its recordings are kept")
	s.Equal(72*time.Hour, kept.RemoveAt.Sub(start).Round(time.Minute))
	s.True(kept.RemovedAt.IsZero())
	s.Equal(72*time.Hour, removedAt.Round(time.Minute))
	st := s.status()
	s.False(st.RemovedAt.IsZero(), "the status says the recordings are gone")
	s.Equal(job.Done, st.State)
}

// Scenario: A failed job's recordings are kept through its park and then for the retention period
func (s *workflowSuite) Test_RetentionAfterPark() {
	in := testInput()
	in.Source, in.Recipient = job.SourceCLI, nil
	in.Policy.ParkFor, in.Policy.Retain = 24*time.Hour, 48*time.Hour
	start := s.env.Now()
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(activities.ConvertOutput{},
		temporal.NewNonRetryableApplicationError("not audio", string(job.UnsupportedFormat), nil)).Once()
	var removedAt time.Duration
	s.env.OnActivity(a.RemoveRecordings, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RemoveInput) (activities.RemoveOutput, error) {
			removedAt = s.env.Now().Sub(start)
			return activities.RemoveOutput{Objects: 1}, nil
		}).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Failed, s.result().State)
	s.Equal(72*time.Hour, removedAt.Round(time.Minute), "removed a retention period after the park ended")
}
