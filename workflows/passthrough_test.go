package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// An engine that took the original as it is leaves the job's audio key
// pointing at the original; the fallback engine must not inherit it, since
// it may not read that file, but convert the original for itself.
func (s *workflowSuite) Test_FallbackConvertsTheOriginalTheEngineTookAsItIs() {
	in := testInput()
	in.Source, in.Recipient, in.Engine, in.Fallback = job.SourceCLI, nil, "openai", "local"
	in.Policy.MaxAttempts = 1
	s.env.OnActivity(a.Convert, mock.Anything, mock.MatchedBy(func(c activities.ConvertInput) bool { return c.Engine == "openai" })).
		Return(activities.ConvertOutput{AudioKey: in.Original.Key, Duration: 3 * time.Second}, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(r activities.RecognizeInput) bool {
		return r.Engine == "openai" && r.AudioKey == in.Original.Key
	})).Return(activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))).Once()
	s.env.OnActivity(a.Convert, mock.Anything, mock.MatchedBy(func(c activities.ConvertInput) bool {
		return c.Engine == "local" && c.OriginalKey == in.Original.Key
	})).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(r activities.RecognizeInput) bool {
		return r.Engine == "local" && r.AudioKey == converted.AudioKey
	})).Return(recognized, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal("openai", s.status().FallbackFrom)
}
