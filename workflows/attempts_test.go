package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/metrics"
)

// scriptedEngine fails each submission with the error its script gives
// for that attempt, and records when, on the test's clock, each arrived.
type scriptedEngine struct {
	now    func() time.Time
	script func(attempt int) error
	mu     sync.Mutex
	at     []time.Time
}

var _ activities.Recognizer = (*scriptedEngine)(nil)

func (e *scriptedEngine) Format() audio.Format { return audio.Format{Name: "wav", Ext: ".wav"} }

func (e *scriptedEngine) Submit(context.Context, engine.Request) (engine.Submission, error) {
	e.mu.Lock()
	e.at = append(e.at, e.now())
	n := len(e.at)
	e.mu.Unlock()
	return engine.Submission{}, e.script(n)
}

func (e *scriptedEngine) Check(context.Context, string) (engine.Submission, error) {
	return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Message: "no operations here"}
}

// waits are the pauses between consecutive submissions.
func (e *scriptedEngine) waits() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	var w []time.Duration
	for i := 1; i < len(e.at); i++ {
		w = append(w, e.at[i].Sub(e.at[i-1]))
	}
	return w
}

// realStepEnv is a workflow environment whose Recognize is the real step
// with its real classify, in front of a scripted engine: the delays and
// the attempt numbers are the ones production computes. Conversion and
// the reply are mocked.
func realStepEnv(t *testing.T, script func(attempt int) error) (*testsuite.TestWorkflowEnvironment, *scriptedEngine, Input) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	blobs, err := blob.NewLocal(t.TempDir())
	require.NoError(t, err)
	_, err = blobs.Put(context.Background(), converted.AudioKey, strings.NewReader("RIFF not really audio"))
	require.NoError(t, err)
	eng := &scriptedEngine{now: env.Now, script: script}
	env.RegisterActivity(&activities.Activities{
		Blobs:   blobs,
		Engines: map[string]activities.Recognizer{"local": eng},
		WorkDir: t.TempDir(),
	})
	env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	return env, eng, testInput()
}

func unavailable(int) error {
	return &engine.Error{Kind: engine.Unavailable, Status: 503, Message: "engine answered 503"}
}

// parkedFailure runs the job and returns the failure it parked with.
func parkedFailure(t *testing.T, env *testsuite.TestWorkflowEnvironment, in Input, want job.State) job.Failure {
	t.Helper()
	var notices []job.Failure
	env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.ReplyInput) (activities.Delivery, error) {
			if r.Failure != nil {
				notices = append(notices, *r.Failure)
			}
			return activities.Delivery{}, nil
		})
	env.ExecuteWorkflow(TranscribeRecording, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var r Result
	require.NoError(t, env.GetWorkflowResult(&r))
	require.Equal(t, want, r.State)
	require.NotNil(t, r.Failure)
	require.Len(t, notices, 1, "the sender is told once")
	require.Equal(t, *r.Failure, notices[0], "the sender is told what the job records")
	return *r.Failure
}

// Scenario: Every wait of the default schedule is kept, and the fifth failure gives up
func TestDefaultScheduleIsWaitedInFull(t *testing.T) {
	env, eng, in := realStepEnv(t, unavailable)
	in.Policy = Policy{Backoff: job.DefaultBackoff(), MaxAttempts: job.DefaultMaxAttempts, ParkFor: time.Hour}

	f := parkedFailure(t, env, in, job.Dead)

	require.Equal(t, []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute}, eng.waits(),
		"every wait of the default schedule, and no sixth attempt after the fifth failure")
	require.Equal(t, job.ServiceError, f.Kind)
	require.Equal(t, job.Transcribing, f.Step)
	require.Equal(t, 5, f.Attempts)
}

// Scenario: A step that keeps failing makes the job dead after the last attempt
func TestDeadJobCountsItsAttempts(t *testing.T) {
	env, eng, in := realStepEnv(t, unavailable)
	in.Policy.MaxAttempts = 3

	f := parkedFailure(t, env, in, job.Dead)

	require.Len(t, eng.waits(), 2, "three attempts")
	require.Equal(t, 3, f.Attempts)
}

// Scenario: A verdict on a later attempt records the attempts it took
func TestVerdictOnSecondAttemptCountsTwo(t *testing.T) {
	env, eng, in := realStepEnv(t, func(attempt int) error {
		if attempt == 1 {
			return unavailable(attempt)
		}
		return &engine.Error{Kind: engine.Unauthorized, Status: 401, Message: "invalid key"}
	})

	f := parkedFailure(t, env, in, job.Failed)

	require.Equal(t, []time.Duration{30 * time.Second}, eng.waits())
	require.Equal(t, job.EngineUnauthorized, f.Kind)
	require.Equal(t, 2, f.Attempts, "the attempts made, not the %d allowed", in.Policy.MaxAttempts)
}

// Scenario: Failures without a delay of their own back off geometrically up to the longest wait
func TestFallbackPolicyIsGeometric(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&activities.Activities{})
	in := testInput()
	in.Policy.MaxAttempts = 7
	env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	var at []time.Time
	// A lost worker's attempt comes back from Temporal with no delay of
	// its own, and the test environment does not retry timeouts: an
	// application error without a delay takes the same way through the
	// retry policy.
	env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RecognizeInput) (activities.Recognition, error) {
			at = append(at, env.Now())
			return activities.Recognition{}, temporal.NewApplicationError("the worker was lost", string(job.Internal))
		}).Times(7)
	env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()

	env.ExecuteWorkflow(TranscribeRecording, in)

	require.True(t, env.IsWorkflowCompleted())
	// 30s × (60)^(k/3): from the first wait to the longest in as many
	// steps as the schedule has, then the longest again.
	want := []time.Duration{30 * time.Second, 117450 * time.Millisecond, 459800 * time.Millisecond,
		30 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	require.Len(t, at, len(want)+1)
	for i, w := range want {
		require.InDelta(t, w.Seconds(), at[i+1].Sub(at[i]).Seconds(), 0.1, "wait %d", i+1)
	}
}

// failureFrom builds the error the workflow gets for an activity failure,
// the way a Temporal server reports it.
func failureFrom(t *testing.T, retry enumspb.RetryState, last *failurepb.Failure) error {
	t.Helper()
	return temporal.GetDefaultFailureConverter().FailureToError(&failurepb.Failure{
		Message: "activity error",
		FailureInfo: &failurepb.Failure_ActivityFailureInfo{ActivityFailureInfo: &failurepb.ActivityFailureInfo{
			ActivityType: nil, ActivityId: "5", RetryState: retry,
		}},
		Cause: last,
	})
}

func appFailure(t *testing.T, kind job.Kind, msg string, attempt int) *failurepb.Failure {
	t.Helper()
	info := &failurepb.ApplicationFailureInfo{Type: string(kind)}
	if attempt > 0 {
		details, err := converter.GetDefaultDataConverter().ToPayloads(activities.FailureDetails{Attempt: attempt})
		require.NoError(t, err)
		info.Details = details
	}
	return &failurepb.Failure{Message: msg, FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: info}}
}

// timeoutFailure is a timed-out attempt; Temporal gives it the failure of
// the attempt before as its cause.
func timeoutFailure(kind enumspb.TimeoutType, before *failurepb.Failure) *failurepb.Failure {
	return &failurepb.Failure{
		Message:     "activity " + kind.String() + " timeout",
		FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: kind}},
		Cause:       before,
	}
}

// Scenario: A timed-out last attempt is counted and named as a timeout
func TestFailureOfLastAttempt(t *testing.T) {
	const heartbeat = enumspb.TIMEOUT_TYPE_HEARTBEAT
	maxed := enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
	tests := []struct {
		name         string
		err          func(t *testing.T) error
		wantKind     job.Kind
		wantAttempts int
		wantDead     bool
	}{
		{"a failure the step reported names its attempt", func(t *testing.T) error {
			return failureFrom(t, maxed, appFailure(t, job.ServiceError, "503", 4))
		}, job.ServiceError, 4, true},
		{"a verdict names its attempt", func(t *testing.T) error {
			return failureFrom(t, enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, appFailure(t, job.NoSpeech, "nothing heard", 2))
		}, job.NoSpeech, 2, false},
		{"a timeout after a reported failure is one attempt more, and a timeout", func(t *testing.T) error {
			return failureFrom(t, maxed, timeoutFailure(heartbeat, appFailure(t, job.ServiceError, "503", 2)))
		}, job.Timeout, 3, true},
		{"timeouts after timeouts: Temporal says every attempt ran", func(t *testing.T) error {
			return failureFrom(t, maxed, timeoutFailure(heartbeat, timeoutFailure(heartbeat, nil)))
		}, job.Timeout, 4, true},
		{"a failure recorded before attempts were counted, attempts spent", func(t *testing.T) error {
			return failureFrom(t, maxed, appFailure(t, job.ServiceError, "503", 0))
		}, job.ServiceError, 4, true},
		{"a failure recorded before attempts were counted, retry state unknown", func(t *testing.T) error {
			return failureFrom(t, enumspb.RETRY_STATE_UNSPECIFIED, appFailure(t, job.ServiceError, "503", 0))
		}, job.ServiceError, 0, true},
		{"the workflow's own deadline is no attempt of a step", func(t *testing.T) error {
			return temporal.NewNonRetryableApplicationError("the engine did not finish", string(job.Timeout), nil)
		}, job.Timeout, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			var got job.Failure
			var dead bool
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				j := newJob(ctx, Input{Policy: Policy{MaxAttempts: 4}})
				j.s.State = job.Transcribing
				got, dead = j.failure(ctx, err)
				return nil
			}, workflow.RegisterOptions{Name: "failure"})
			env.ExecuteWorkflow("failure")
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, tc.wantKind, got.Kind)
			require.Equal(t, tc.wantAttempts, got.Attempts)
			require.Equal(t, tc.wantDead, dead)
		})
	}
}

// Scenario: Dead jobs are counted under the kind of what stopped them
func TestDeadKindsAreCounted(t *testing.T) {
	tests := []struct {
		name string
		kind job.Kind
		run  func(env *testsuite.TestWorkflowEnvironment)
	}{
		{"an operation past its deadline is a timeout", job.Timeout, func(env *testsuite.TestWorkflowEnvironment) {
			running := activities.Recognition{OperationID: "op-1", PollAfter: time.Minute}
			env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(running, nil).Once()
			env.OnActivity(a.CheckRecognition, mock.Anything, mock.Anything).Return(running, nil)
		}},
		{"an engine that cannot be reached is no_ack", job.NoAck, func(env *testsuite.TestWorkflowEnvironment) {
			env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(activities.Recognition{},
				temporal.NewApplicationError("dial tcp 127.0.0.1:9: connection refused", string(job.NoAck)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			var suite testsuite.WorkflowTestSuite
			suite.SetMetricsHandler(metrics.NewSDKHandler(reg, m))
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
			env.RegisterActivity(&activities.Activities{})
			env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
			env.OnActivity(a.SendReply, mock.Anything, mock.Anything).Return(activities.Delivery{}, nil).Once()
			tc.run(env)
			in := testInput()
			in.Policy.MaxAttempts = 2

			env.ExecuteWorkflow(TranscribeRecording, in)

			var r Result
			require.NoError(t, env.GetWorkflowResult(&r))
			require.Equal(t, job.Dead, r.State)
			require.Equal(t, tc.kind, r.Failure.Kind)
			require.Equal(t, 1.0, testutil.ToFloat64(m.Failures.WithLabelValues(string(tc.kind))))
			require.Equal(t, 1, testutil.CollectAndCount(m.Failures), "no other kind counted")
			require.Equal(t, 1.0, testutil.ToFloat64(m.Jobs.WithLabelValues(string(job.SourceTelegram), string(job.Dead))))
		})
	}
}
