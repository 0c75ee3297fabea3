package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

type workflowSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment
}

func TestWorkflow(t *testing.T) { suite.Run(t, new(workflowSuite)) }

func (s *workflowSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	s.env.RegisterActivity(&activities.Activities{})
}

func (s *workflowSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

func testInput() Input {
	return Input{
		Source:    job.SourceTelegram,
		Recipient: &job.Recipient{Address: "42", Message: "7"},
		Owner:     job.TelegramOwner(42),
		Original:  Original{Key: "jobs/j/original.ogg", Name: "voice.ogg", Size: 100},
		Engine:    "local",
		Policy:    Policy{Backoff: []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute}, MaxAttempts: 5, ParkFor: 24 * time.Hour},
	}
}

var converted = activities.ConvertOutput{AudioKey: "jobs/j/audio.wav", Duration: 3 * time.Second}

var recognized = activities.Recognition{Done: true, TranscriptKey: "jobs/j/transcript.json", RawKey: "jobs/j/raw-local.txt", Language: "en", Words: 4}

// engineFailingUntilHealthy converts once and lets recognition answer 503
// until the returned flag is set: with two attempts the job goes dead, and
// a revive after the flag finishes it (three recognitions in all).
func (s *workflowSuite) engineFailingUntilHealthy() *bool {
	healthy := new(bool)
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RecognizeInput) (activities.Recognition, error) {
			if *healthy {
				return recognized, nil
			}
			return activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))
		}).Times(3)
	return healthy
}

func (s *workflowSuite) status() Status {
	v, err := s.env.QueryWorkflow(QueryStatus)
	s.Require().NoError(err)
	var st Status
	s.Require().NoError(v.Get(&st))
	return st
}

func (s *workflowSuite) result() Result {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var r Result
	s.Require().NoError(s.env.GetWorkflowResult(&r))
	return r
}

// Scenario: A recording goes from accepted to done
// Scenario: A job's owner is on its status and set when it starts, not by the workflow
func (s *workflowSuite) Test_RecordingReachesDone() {
	var states []string
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if v, ok := sa.GetKeyword(StateKey); ok {
			states = append(states, v)
		}
		// The owner is set by the start options; an upsert of it would
		// be a command that recorded histories lack.
		if _, ok := sa.GetKeyword(OwnerKey); ok {
			s.Fail("the workflow upserted TranscriptionOwner")
		}
	}).Return(nil)
	s.env.OnActivity(a.Convert, mock.Anything, mock.MatchedBy(func(in activities.ConvertInput) bool {
		return in.OriginalKey == "jobs/j/original.ogg" && in.Engine == "local"
	})).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(in activities.RecognizeInput) bool {
		return in.AudioKey == converted.AudioKey && in.Duration == converted.Duration
	})).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Done && in.TranscriptKey == recognized.TranscriptKey && in.Failure == nil
	})).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	r := s.result()
	s.Equal(job.Done, r.State)
	s.Equal(recognized.TranscriptKey, r.TranscriptKey)
	s.Equal([]string{"accepted", "converting", "transcribing", "replying", "done"}, states)
	st := s.status()
	s.Equal(job.Done, st.State)
	s.Equal(3*time.Second, st.Duration)
	s.Equal("en", st.DetectedLanguage)
	s.Equal(4, st.Words)
	s.Equal("telegram:42", st.Owner)
	s.False(st.FinishedAt.IsZero())
}

// Scenario: Undecodable input fails the job at once without retries
func (s *workflowSuite) Test_VerdictFailsWithoutRetry() {
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(activities.ConvertOutput{},
		temporal.NewNonRetryableApplicationError("the file is not audio", string(job.UnsupportedFormat), nil)).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Failed && in.Failure != nil && in.Failure.Kind == job.UnsupportedFormat
	})).Return(activities.Delivery{}, nil).Once()
	var parked Status
	s.env.RegisterDelayedCallback(func() { parked = s.status() }, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Failed, parked.State)
	s.Require().NotNil(parked.Failure)
	s.Equal(job.UnsupportedFormat, parked.Failure.Kind)
	s.Equal(job.Converting, parked.Failure.Step)
	s.Equal("the file is not audio", parked.Failure.Message)
	r := s.result()
	s.Equal(job.Failed, r.State, "closes as failed when nobody revives it")
}

// Scenario: An engine operation is polled on a fixed timer
func (s *workflowSuite) Test_RunningOperationIsPolledOnFixedTimer() {
	const interval = 15 * time.Second
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		activities.Recognition{OperationID: "op-1", PollAfter: interval}, nil).Once()
	var checks []time.Time
	running := activities.Recognition{OperationID: "op-1", PollAfter: interval}
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.MatchedBy(func(in activities.CheckInput) bool {
		return in.OperationID == "op-1"
	})).Return(func(context.Context, activities.CheckInput) (activities.Recognition, error) {
		checks = append(checks, s.env.Now())
		if len(checks) < 4 {
			return running, nil
		}
		return recognized, nil
	}).Times(4)
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Done, s.result().State)
	s.Require().Len(checks, 4)
	for i := 1; i < len(checks); i++ {
		s.Equal(interval, checks[i].Sub(checks[i-1]), "check %d", i)
	}
}

// Scenario: Each check's answer sets the wait before the next check
func (s *workflowSuite) Test_CheckAnswerStretchesTheNextWait() {
	// The engine asks for longer waits as it gets busier, then for a
	// Retry-After it was refused for; each check honours the last answer.
	waits := []time.Duration{15 * time.Second, 30 * time.Second, 90 * time.Second, 15 * time.Second}
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		activities.Recognition{OperationID: "op-1", PollAfter: waits[0]}, nil).Once()
	var checks []time.Time
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.CheckInput) (activities.Recognition, error) {
			checks = append(checks, s.env.Now())
			if len(checks) < len(waits) {
				return activities.Recognition{OperationID: "op-1", PollAfter: waits[len(checks)]}, nil
			}
			return recognized, nil
		}).Times(len(waits))
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Done, s.result().State)
	s.Require().Len(checks, len(waits))
	for i := 1; i < len(checks); i++ {
		s.Equal(waits[i], checks[i].Sub(checks[i-1]), "wait before check %d", i+1)
	}
}

// Scenario: The provider's code and raw answer reach the job's failure
func (s *workflowSuite) Test_FailureCarriesProviderCodeAndRawKey() {
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(activities.Recognition{},
		temporal.NewApplicationErrorWithOptions("OpenAI refused the credentials: Incorrect API key provided", string(job.EngineUnauthorized),
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{activities.FailureDetails{Code: "invalid_api_key", RawKey: "jobs/j/raw-error-openai.json"}}})).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()
	var parked Status
	s.env.RegisterDelayedCallback(func() { parked = s.status() }, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Failed, parked.State)
	s.Require().NotNil(parked.Failure)
	s.Equal(job.EngineUnauthorized, parked.Failure.Kind)
	s.Equal("invalid_api_key", parked.Failure.Code)
	s.Equal("jobs/j/raw-error-openai.json", parked.Failure.RawKey)
	s.Equal("OpenAI refused the credentials: Incorrect API key provided", parked.Failure.Message, "the code is a field, the message unchanged")
}

// Scenario: Revive resumes a dead job at the step that stopped it
func (s *workflowSuite) Test_ReviveResumesFromFailedStep() {
	in := testInput()
	in.Policy.MaxAttempts = 2
	healthy := s.engineFailingUntilHealthy()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool { return in.State == job.Dead })).Return(activities.Delivery{}, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool { return in.State == job.Done })).Return(activities.Delivery{}, nil).Once()
	s.env.RegisterDelayedCallback(func() {
		s.Equal(job.Dead, s.status().State)
		*healthy = true
		// Operators may attach anything, as `temporal workflow signal
		// --input` does; the payload is not needed.
		s.env.SignalWorkflow(SignalRevive, map[string]string{"reason": "engine fixed"})
	}, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	r := s.result()
	s.Equal(job.Done, r.State)
	st := s.status()
	s.Equal(1, st.Revivals)
	s.Nil(st.Failure)
}

// Scenario: A revive sent while the job is running is ignored
func (s *workflowSuite) Test_ReviveWhileRunningIsIgnored() {
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).After(time.Minute).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(activities.Recognition{},
		temporal.NewNonRetryableApplicationError("nothing heard", string(job.NoSpeech), nil)).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(SignalRevive, nil) }, 10*time.Second)

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	r := s.result()
	s.Equal(job.Failed, r.State, "the early revive must not undo the later failure")
	s.Equal(job.NoSpeech, r.Failure.Kind)
}

// Scenario: An operation that never finishes ends at its deadline as timeout
func (s *workflowSuite) Test_OperationDeadlineMakesJobDead() {
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		activities.Recognition{OperationID: "op-1", PollAfter: time.Minute}, nil).Once()
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.Anything).Return(
		activities.Recognition{OperationID: "op-1", PollAfter: time.Minute}, nil)
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Dead && in.Failure.Kind == job.Timeout
	})).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	r := s.result()
	s.Equal(job.Dead, r.State)
	s.Equal(job.Timeout, r.Failure.Kind)
}

// Scenario: Cancelling a job stops it and reports cancelled
func (s *workflowSuite) Test_CancelStopsJob() {
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).After(time.Hour).Return(converted, nil).Maybe()
	s.env.RegisterDelayedCallback(func() { s.env.CancelWorkflow() }, time.Minute)

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.True(s.env.IsWorkflowCompleted())
	s.True(temporal.IsCanceledError(s.env.GetWorkflowError()))
	s.Equal(job.Cancelled, s.status().State)
}

// Scenario: The owner changes the language while a step runs
func (s *workflowSuite) Test_OwnerLanguageSurvivesStepResult() {
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).After(time.Minute).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(in activities.RecognizeInput) bool {
		return in.Language == "ru"
	})).Return(activities.Recognition{Done: true, TranscriptKey: "k", Language: "en"}, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateSetLanguage, "u1", &testUpdateCallback{s: s}, SetLanguageRequest{Language: "ru"})
		s.env.UpdateWorkflow(UpdateAnnotate, "u2", &testUpdateCallback{s: s}, AnnotateRequest{Title: "Standup", Note: "ask Ann"})
		s.env.UpdateWorkflow(UpdateSetLanguage, "u3", &testUpdateCallback{s: s, wantReject: true}, SetLanguageRequest{Language: "not a language!"})
	}, 10*time.Second)

	s.env.ExecuteWorkflow(TranscribeRecording, testInput())

	s.Equal(job.Done, s.result().State)
	st := s.status()
	s.Equal("ru", st.Language, "the owner's choice is kept")
	s.Equal("en", st.DetectedLanguage, "what the engine heard is recorded apart")
	s.Equal("Standup", st.Title)
	s.Equal("ask Ann", st.Note)
}

// Scenario: Back-off between attempts follows the configured schedule
func (s *workflowSuite) Test_RetryPolicyFollowsSchedule() {
	p := Policy{Backoff: []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute}, MaxAttempts: 5}
	rp := p.retryPolicy()
	s.Equal(30*time.Second, rp.InitialInterval)
	s.Equal(30*time.Minute, rp.MaximumInterval)
	s.EqualValues(5, rp.MaximumAttempts)
	s.InDelta(3.91, rp.BackoffCoefficient, 0.01)
	s.Contains(rp.NonRetryableErrorTypes, string(job.NoSpeech))
	even := Policy{Backoff: []time.Duration{time.Second, time.Second}, MaxAttempts: 3}.retryPolicy()
	s.Equal(1.0, even.BackoffCoefficient)
}

type testUpdateCallback struct {
	s          *workflowSuite
	wantReject bool
}

func (c *testUpdateCallback) Accept() { c.s.False(c.wantReject, "update accepted") }
func (c *testUpdateCallback) Reject(err error) {
	c.s.True(c.wantReject, "update rejected: %v", err)
}
func (c *testUpdateCallback) Complete(_ any, err error) {
	if !c.wantReject {
		c.s.NoError(err)
	}
}

// Scenario: A long wait continues as a new run and carries the job along
func (s *workflowSuite) Test_LongWaitContinuesAsNew() {
	running := activities.Recognition{OperationID: "op-1", PollAfter: time.Minute}
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(running, nil).Once()
	checks := 0
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.CheckInput) (activities.Recognition, error) {
			checks++
			if checks == 2 {
				// Temporal suggests a new run once the history is long.
				s.env.SetContinueAsNewSuggested(true)
			}
			return running, nil
		}).Times(2)
	in := testInput()
	in.Title = "standup"

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Require().True(s.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &can)
	var next Input
	s.Require().NoError(converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	s.Require().NotNil(next.Resume)
	st := *next.Resume
	s.Equal("op-1", st.OperationID)
	s.Equal(converted.AudioKey, st.AudioKey)
	s.Equal("standup", st.Title)
	s.Equal(job.Transcribing, st.State)
	s.False(st.OperationDeadline.IsZero())

	// The new run checks the same operation; it neither converts nor
	// submits again.
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.CheckRecognition, mock.Anything, mock.MatchedBy(func(in activities.CheckInput) bool {
		return in.OperationID == "op-1"
	})).Return(recognized, nil).Once()
	env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()
	env.ExecuteWorkflow(TranscribeRecording, next)
	s.Require().True(env.IsWorkflowCompleted())
	s.Require().NoError(env.GetWorkflowError())
	var r Result
	s.Require().NoError(env.GetWorkflowResult(&r))
	s.Equal(job.Done, r.State)
	env.AssertExpectations(s.T())
}

// Scenario: A job whose sender expects no reply skips the reply step
func (s *workflowSuite) Test_CommandLineJobSkipsReply() {
	in := testInput()
	in.Source, in.Recipient = job.SourceCLI, nil
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
}

// Scenario: Jobs started before the reply step became conditional still run it
func (s *workflowSuite) Test_OldCommandLineJobStillRunsReply() {
	in := testInput()
	in.Source, in.Recipient = job.SourceCLI, nil
	s.env.OnGetVersion(leanPublish, workflow.DefaultVersion, leanInspects).Return(workflow.DefaultVersion)
	s.env.OnGetVersion(replyOnlyWhenExpected, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
}

// Scenario: A Telegram job is acknowledged, fetched, and shows its progress
func (s *workflowSuite) Test_TelegramJobFetchesAndShowsProgress() {
	in := testInput()
	in.Original = Original{FileID: "AwACAgIAAxkBAAIB", Ext: ".ogg", Name: "voice.ogg"}
	s.env.OnActivity(a.Acknowledge, mock.Anything, mock.Anything).Return(job.Ref("555"), nil).Once()
	s.env.OnActivity(a.FetchOriginal, mock.Anything, mock.MatchedBy(func(in activities.FetchInput) bool {
		return in.FileID == "AwACAgIAAxkBAAIB" && in.Ext == ".ogg" && in.Source == job.SourceTelegram
	})).Return(activities.FetchOutput{Key: "jobs/j/original.ogg", Size: 8138}, nil).Once()
	var shown []job.State
	s.env.OnActivity(a.ShowProgress, mock.Anything, mock.MatchedBy(func(in activities.NoticeInput) bool {
		return in.Recipient.StatusMessage == "555"
	})).Return(func(_ context.Context, in activities.NoticeInput) error {
		shown = append(shown, in.State)
		if in.State == job.Converting {
			return errors.New("telegram hiccup") // a courtesy: the job goes on
		}
		return nil
	})
	s.env.OnActivity(a.Convert, mock.Anything, mock.MatchedBy(func(in activities.ConvertInput) bool {
		return in.OriginalKey == "jobs/j/original.ogg"
	})).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Done && in.Recipient.StatusMessage == "555" && in.Recipient.Message == "7"
	})).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal([]job.State{job.Fetching, job.Converting, job.Converting, job.Converting, job.Transcribing, job.Replying, job.Done}, shown,
		"every state after acceptance is shown; a failed update is tried three times")
	st := s.status()
	s.Equal("jobs/j/original.ogg", st.Original.Key)
	s.EqualValues(8138, st.Original.Size)
}

// Scenario: A file Telegram will not hand over fails the job with the reason
func (s *workflowSuite) Test_TelegramFileTooBigFails() {
	in := testInput()
	in.Original = Original{FileID: "big", Ext: ".ogg"}
	s.env.OnActivity(a.Acknowledge, mock.Anything, mock.Anything).Return(job.Ref("556"), nil).Once()
	s.env.OnActivity(a.ShowProgress, mock.Anything, mock.Anything).Return(nil)
	s.env.OnActivity(a.FetchOriginal, mock.Anything, mock.Anything).Return(activities.FetchOutput{},
		temporal.NewNonRetryableApplicationError("file is too big", string(job.FileTooBig), nil)).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.MatchedBy(func(in activities.ReplyInput) bool {
		return in.State == job.Failed && in.Failure.Kind == job.FileTooBig && in.Failure.Step == job.Fetching
	})).Return(activities.Delivery{}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Failed, s.result().State)
}

// Scenario: A lean job publishes only what changed and skips the reply state nobody waits for
func (s *workflowSuite) Test_LeanJobPublishesOnlyChanges() {
	in := testInput()
	in.Source, in.Recipient = job.SourceHTTP, nil
	// As jobctl starts a job: its first state, source and engine are set.
	s.Require().NoError(s.env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
		StateKey.ValueSet(string(job.Accepted)), SourceKey.ValueSet(string(job.SourceHTTP)), EngineKey.ValueSet("local"))))
	var upserts [][]string
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		var keys []string
		for k := range sa.GetUntypedValues() {
			keys = append(keys, k.GetName())
		}
		if v, ok := sa.GetKeyword(StateKey); ok {
			keys = append(keys, v)
		}
		upserts = append(upserts, keys)
	}).Return(nil)
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal([][]string{{"TranscriptionState", "converting"}, {"TranscriptionState", "transcribing"}, {"TranscriptionState", "done"}}, upserts)
}

// Scenario: A lean job whose engine takes its small recording as it is goes from accepted straight to transcribing, without a conversion step
func (s *workflowSuite) Test_LeanJobTakenAsIsSkipsConversion() {
	in := testInput()
	in.Source, in.Recipient = job.SourceHTTP, nil
	s.Require().NoError(s.env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
		StateKey.ValueSet(string(job.Accepted)), SourceKey.ValueSet(string(job.SourceHTTP)), EngineKey.ValueSet("local"))))
	var states []string
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(StateKey); ok {
			states = append(states, v)
		}
	}).Return(nil)
	s.env.OnActivity(a.Inspect, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		s.True(activity.GetInfo(args.Get(0).(context.Context)).IsLocalActivity, "Inspect runs as a local activity")
	}).Return(activities.InspectOutput{AsIs: true, Duration: 3 * time.Second}, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		ri := args.Get(1).(activities.RecognizeInput)
		s.Equal(in.Original.Key, ri.AudioKey, "the engine hears the original")
		s.Equal(3*time.Second, ri.Duration, "with the duration Inspect read")
	}).Return(recognized, nil).Once()

	// Each version marker costs a visibility write: a job started now
	// knows from lean-publish that it may inspect.
	s.env.OnGetVersion(localInspect, workflow.DefaultVersion, workflow.Version(1)).Run(func(mock.Arguments) {
		s.Fail("a job started at lean-publish 2 asked for local-inspect")
	}).Return(workflow.Version(1)).Maybe()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal([]string{"transcribing", "done"}, states)
}

// A job started at the first version of lean-publish, before it implied
// local-inspect, asks for it: with it the job inspects, without it the job
// converts as it began to.
func (s *workflowSuite) Test_FirstLeanVersionAsksForLocalInspect() {
	for _, v := range []workflow.Version{workflow.DefaultVersion, 1} {
		s.Run(fmt.Sprintf("local-inspect %d", v), func() {
			s.SetupTest()
			in := testInput()
			in.Source, in.Recipient = job.SourceHTTP, nil
			s.env.OnGetVersion(leanPublish, workflow.DefaultVersion, leanInspects).Return(workflow.Version(1))
			asked := 0
			s.env.OnGetVersion(localInspect, workflow.DefaultVersion, workflow.Version(1)).Run(func(mock.Arguments) { asked++ }).Return(v)
			if v == 1 {
				s.env.OnActivity(a.Inspect, mock.Anything, mock.Anything).Return(activities.InspectOutput{AsIs: true, Duration: 3 * time.Second}, nil).Once()
			} else {
				s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
			}
			s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()

			s.env.ExecuteWorkflow(TranscribeRecording, in)

			s.Equal(job.Done, s.result().State)
			s.Equal(1, asked)
		})
	}
}

// Scenario: A recording that Inspect does not pass, or that it fails on, is converted by the step with its attempts
func (s *workflowSuite) Test_NotTakenAsIsIsConverted() {
	for _, tc := range []struct {
		name string
		out  activities.InspectOutput
		err  error
	}{
		{"needs conversion", activities.InspectOutput{}, nil},
		{"inspect failed", activities.InspectOutput{}, errors.New("store unreachable")},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			in := testInput()
			in.Source, in.Recipient = job.SourceHTTP, nil
			s.env.OnActivity(a.Inspect, mock.Anything, mock.Anything).Return(tc.out, tc.err).Once()
			s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
			s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
				s.Equal(converted.AudioKey, args.Get(1).(activities.RecognizeInput).AudioKey)
			}).Return(recognized, nil).Once()

			s.env.ExecuteWorkflow(TranscribeRecording, in)

			s.Equal(job.Done, s.result().State)
			s.env.AssertExpectations(s.T())
		})
	}
}

// Scenario: A lean Telegram job shows its progress by local activities
func (s *workflowSuite) Test_LeanTelegramProgressIsLocal() {
	in := testInput()
	in.Recipient.StatusMessage = "555"
	var shown []job.State
	s.env.OnActivity(a.ShowProgress, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		if activity.IsActivity(args.Get(0).(context.Context)) && activity.GetInfo(args.Get(0).(context.Context)).IsLocalActivity {
			shown = append(shown, args.Get(1).(activities.NoticeInput).State)
		}
	}).Return(nil)
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	s.env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{InStatusMessage: true}, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Equal([]job.State{job.Accepted, job.Converting, job.Transcribing, job.Replying}, shown)
}
