package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: A job that leaves its engine and retry policy open takes the service's
func (s *workflowSuite) TestJobTakesTheServicesDefaults() {
	s.env.RegisterActivity(&activities.ServiceDefaults{
		Route: func(language string) (string, string) {
			if language == "ru" {
				return "speechkit", "openai"
			}
			return "openai", ""
		},
		Policy: activities.Defaults{Backoff: []time.Duration{time.Second}, MaxAttempts: 2, ParkFor: time.Hour},
	})
	in := testInput()
	in.Source, in.Recipient, in.Engine, in.Policy, in.Language = job.SourceCLI, nil, "", Policy{}, "ru"
	var converted activities.ConvertInput
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ci activities.ConvertInput) (activities.ConvertOutput, error) {
			converted = ci
			return activities.ConvertOutput{AudioKey: "jobs/j/audio.wav", Duration: 3 * time.Second}, nil
		}).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.ExecuteWorkflow(TranscribeRecording, in)
	s.Equal(job.Done, s.result().State)
	st := s.status()
	s.Equal("speechkit", st.Engine)
	s.Equal("openai", st.Fallback)
	s.Equal("speechkit", converted.Engine)
	s.Equal(Policy{Backoff: []time.Duration{time.Second}, MaxAttempts: 2, ParkFor: time.Hour}, st.Policy)
}

// A job that names its engine and policy keeps them and asks nothing.
func (s *workflowSuite) TestJobThatChoosesKeepsItsChoices() {
	s.env.RegisterActivity(&activities.ServiceDefaults{
		Route: func(string) (string, string) { panic("asked the service") },
	})
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Maybe()
	s.env.OnActivity(a.Acknowledge, mock.Anything, mock.Anything).Return(nil).Maybe()
	s.env.ExecuteWorkflow(TranscribeRecording, testInput())
	s.Equal(job.Done, s.result().State)
	s.Equal("local", s.status().Engine)
	s.Equal(5, s.status().Policy.MaxAttempts)
}
