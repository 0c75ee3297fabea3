package workflows

import (
	"math"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

const (
	// convertTimeout bounds one conversion attempt. ffmpeg decodes the
	// longest accepted recording (hours) in a few minutes; a lost worker is
	// noticed much sooner through the heartbeat.
	convertTimeout = 30 * time.Minute
	// recognizeBase and recognizePerAudio size one recognition attempt from
	// the audio's duration: pocketsphinx needs about a quarter of real time
	// on one core, remote engines less; three times real time leaves room
	// for a busy machine.
	recognizeBase     = 10 * time.Minute
	recognizePerAudio = 3
	// heartbeatTimeout is how soon a silent worker loses its lease on a long
	// step. Steps heartbeat every few seconds.
	heartbeatTimeout = 30 * time.Second
	// fetchTimeout bounds one download from the intake's service; files
	// there are at most a few gigabytes and heartbeats catch a lost worker.
	fetchTimeout = 30 * time.Minute
	// courtesyTimeout bounds one status-message update to the sender.
	courtesyTimeout = 30 * time.Second
	// checkTimeout bounds one status request to an engine.
	checkTimeout = 2 * time.Minute
	// replyTimeout bounds one delivery attempt, a document upload included.
	replyTimeout = 5 * time.Minute
	// operationBase and operationPerAudio size the wait for an engine
	// operation: providers promise results within a small multiple of the
	// audio's duration.
	operationBase     = 30 * time.Minute
	operationPerAudio = 4
	// mergeTimeout bounds joining the chunks' transcripts, a few reads and
	// one write of text.
	mergeTimeout = 5 * time.Minute
	// maxChunksInFlight bounds the engine steps one job has scheduled at
	// once; the engine's workers bound how many of them run.
	maxChunksInFlight = 100
	// removeTimeout bounds removing a job's objects: a few hundred deletes
	// at most.
	removeTimeout = 10 * time.Minute
	// historyLimit starts a new run before the event history of a long wait
	// grows large; Temporal also suggests continue-as-new on its own limits.
	historyLimit = 2000
)

// verdictKinds never retry, whatever an activity says.
var verdictKinds = errorTypes(job.Verdicts())

// errorTypes spells kinds the way a retry policy names error types.
func errorTypes[K ~string](kinds []K) []string {
	types := make([]string, len(kinds))
	for i, k := range kinds {
		types[i] = string(k)
	}
	return types
}

func (j *jobState) call() activities.Call {
	return activities.Call{Backoff: j.s.Policy.Backoff}
}

// stepOptions gives a step its lease and retry policy. Every attempt starts
// on a fresh counter when the step is called again after a revive.
func (j *jobState) stepOptions(ctx workflow.Context, startToClose, heartbeat time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: startToClose,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy:         j.s.Policy.retryPolicy(),
	})
}

// deliveryOptions are the reply step's of a transcribed job: the transcript
// exists, so an outage of the sender's service longer than the back-off
// (the default schedule gives up after about 42 minutes) must not make the
// job dead. The step keeps trying, at the schedule's longest wait, for as
// long as a parked job would wait for revive; a revive in the meantime
// runs it at once. Failure notices keep the bounded attempts, since the
// job has to park after them.
func (j *jobState) deliveryOptions(ctx workflow.Context) workflow.Context {
	p := j.s.Policy
	rp := p.retryPolicy()
	// Enough attempts to span the whole wait at the longest interval;
	// the schedule-to-close timeout is what ends them.
	rp.MaximumAttempts = int32(min(int64(p.ParkFor/max(slices.Max(p.Backoff), time.Second))+int64(len(p.Backoff))+1, math.MaxInt32))
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    replyTimeout,
		HeartbeatTimeout:       heartbeatTimeout,
		ScheduleToCloseTimeout: j.s.Policy.ParkFor,
		RetryPolicy:            rp,
	})
}

// retryPolicy approximates the back-off schedule for failures that carry no
// delay of their own (timeouts, crashed workers): a geometric series from
// the first to the longest wait. Failures reported by a step use the exact
// schedule through their NextRetryDelay.
func (p Policy) retryPolicy() *temporal.RetryPolicy {
	first, longest := p.Backoff[0], slices.Max(p.Backoff)
	coefficient := 1.0
	if n := len(p.Backoff); n > 1 && longest > first && first > 0 {
		coefficient = math.Pow(float64(longest)/float64(first), 1/float64(n-1))
	}
	return &temporal.RetryPolicy{
		InitialInterval:        max(first, time.Millisecond),
		BackoffCoefficient:     coefficient,
		MaximumInterval:        max(longest, time.Millisecond),
		MaximumAttempts:        int32(p.MaxAttempts),
		NonRetryableErrorTypes: verdictKinds,
	}
}

// courtesy runs a step that only informs the sender: a few quick attempts,
// and the job goes on without it. Command-line and HTTP jobs, whose senders
// watch no status message, never run one.
func (j *jobState) courtesy(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: courtesyTimeout,
		RetryPolicy:         courtesyRetry(),
	})
}

// courtesyLocal is courtesy for a local activity.
func (j *jobState) courtesyLocal(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: courtesyTimeout,
		RetryPolicy:         courtesyRetry(),
	})
}

func courtesyRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3,
	}
}
