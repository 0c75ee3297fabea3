package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/metrics"
)

// failure reads what stopped a step. A definitive verdict fails the job. A
// retryable failure reaches the workflow only once Temporal has spent every
// attempt on it, and time that ran out is the same kind of exhaustion: both
// make the job dead. What the last attempt met decides: a step that timed
// out after an earlier attempt failed otherwise is a timeout.
func (j *jobState) failure(ctx workflow.Context, err error) (job.Failure, bool) {
	f := job.Failure{Kind: job.Internal, Step: j.s.State, Message: err.Error(), At: workflow.Now(ctx)}
	dead := true
	var appErr *temporal.ApplicationError
	var timeoutErr *temporal.TimeoutError
	switch {
	case errors.As(err, &timeoutErr):
		f.Kind = job.Timeout
		f.Message = fmt.Sprintf("the step did not finish in time (%s timeout)", timeoutName(timeoutErr.TimeoutType()))
	case errors.As(err, &appErr):
		f.Kind, f.Message = job.Kind(appErr.Type()), appErr.Message()
		dead = !(appErr.NonRetryable() || f.Kind.Verdict()) || f.Kind == job.Timeout
		if d, ok := activities.DetailsOf(appErr); ok {
			f.Code, f.RawKey = d.Code, d.RawKey
		}
	}
	f.Attempts = attemptsMade(err, j.s.Policy.MaxAttempts)
	if j.failedChunk >= 0 {
		f.Message = fmt.Sprintf("chunk %d of %d: %s", j.failedChunk+1, len(j.s.Chunks), f.Message)
		j.failedChunk = -1
	}
	return f, dead
}

// attemptsMade counts the attempts a step made before it stopped, from
// what Temporal hands back with its last failure; 0 when that does not
// tell. A failure the step reported names its attempt in its details. A
// timed-out attempt reports nothing, but Temporal gives the failure of the
// attempt before it as its cause, and that one names its own. When it
// does not (a timeout after a timeout, or failures recorded before
// attempts were counted), the retry state still says whether every
// attempt the policy allows was spent.
func attemptsMade(err error, maxAttempts int) int {
	var actErr *temporal.ActivityError
	if !errors.As(err, &actErr) {
		// The workflow's own verdict, such as an operation's deadline:
		// no attempt of a step failed.
		return 0
	}
	last := actErr.Unwrap()
	if d, ok := activities.DetailsOf(last); ok {
		return d.Attempt
	}
	if timeoutErr, ok := last.(*temporal.TimeoutError); ok {
		if d, ok := activities.DetailsOf(timeoutErr.Unwrap()); ok {
			return d.Attempt + 1
		}
	}
	if actErr.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
		return maxAttempts
	}
	return 0
}

// fallBack hands a job whose engine gave up on recognising it to the
// fallback engine, once. The fallback starts from the original, since it
// may want the audio in another format or cut otherwise; the primary's
// failure is counted and logged, and the job names the engine that gave up.
func (j *jobState) fallBack(ctx workflow.Context, f job.Failure) bool {
	fb := j.s.Fallback
	if f.Step != job.Transcribing || fb == "" || fb == j.s.Engine || j.s.FallbackFrom != "" {
		return false
	}
	j.logger(ctx).Warn("engine gave up; the fallback engine takes the job",
		"engine", j.s.Engine, "fallback", fb, "kind", string(f.Kind))
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": string(f.Kind)}).Counter(metrics.FailuresTotal).Inc(1)
	j.s.FallbackFrom, j.s.Engine = j.s.Engine, fb
	j.s.Piece, j.s.Chunks, j.s.ChunksDone = Piece{}, nil, 0
	return true
}

func timeoutName(t enumspb.TimeoutType) string {
	switch t {
	case enumspb.TIMEOUT_TYPE_HEARTBEAT:
		return "heartbeat"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
		return "schedule-to-close"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		return "schedule-to-start"
	}
	return "start-to-close"
}

// park is the one place where a job becomes failed or dead: it records the
// failure, tells the sender, and waits for revive. It reports whether the
// job was revived.
func (j *jobState) park(ctx workflow.Context, f job.Failure, dead bool) bool {
	state := job.Failed
	if dead {
		state = job.Dead
	}
	j.s.Failure = &f
	logger := j.logger(ctx)
	logger.Warn("job stopped", "state", string(state), "kind", string(f.Kind))
	if err := j.enter(ctx, state); err != nil {
		logger.Error("publish state failed", "error", err)
	}
	j.count(ctx, state, &f)
	if err := j.reply(ctx, state, &f); err != nil && ctx.Err() == nil {
		logger.Warn("failure notice not delivered", "error", err)
	}
	j.notify(ctx, state)
	j.parked, j.revived = true, false
	ok, err := workflow.AwaitWithTimeout(ctx, j.s.Policy.ParkFor, func() bool { return j.revived })
	j.parked = false
	if err != nil || !ok {
		if err == nil {
			j.s.FinishedAt = workflow.Now(ctx)
		}
		return false
	}
	j.s.Revivals++
	j.s.Failure = nil
	// The failure notice in the status message is no longer true: the
	// message shows the revived job's progress again, and its transcript
	// then replaces it like any other. An edit makes no sound, but the
	// sender who asked for the retry is watching, and a job revived by an
	// operator leaves no stale notice beside its transcript.
	j.s.StatusMessageTaken = false
	j.dropStaleOperations(ctx)
	logger.Info("job revived", "from_step", string(f.Step))
	return true
}

// freshOperationAfterRevive marks the change that makes a revived job
// submit afresh the pieces whose engine operation outlived its deadline.
// Before it, the past deadline failed the revived job again at once,
// without a call to the engine, and told the sender a second time.
const freshOperationAfterRevive = "fresh-operation-after-revive"

// dropStaleOperations forgets the engine operations whose deadline has
// passed, so that their pieces are submitted again with a new deadline. An
// operation still within its deadline is kept and checked as before.
func (j *jobState) dropStaleOperations(ctx workflow.Context) {
	now := workflow.Now(ctx)
	pieces := []*Piece{&j.s.Piece}
	for i := range j.s.Chunks {
		pieces = append(pieces, &j.s.Chunks[i].Piece)
	}
	var stale []*Piece
	for _, p := range pieces {
		if p.OperationID != "" && !now.Before(p.OperationDeadline) {
			stale = append(stale, p)
		}
	}
	// Only jobs with something stale ask for the version, so the histories
	// of every other revive replay unchanged.
	if len(stale) == 0 || workflow.GetVersion(ctx, freshOperationAfterRevive, workflow.DefaultVersion, 1) < 1 {
		return
	}
	for _, p := range stale {
		p.OperationID, p.OperationDeadline, p.FirstCheckAfter = "", time.Time{}, 0
	}
}

// retain keeps a closed job's recordings and transcripts for the policy's
// retention, then removes them and says so in the job's status. The job's
// state stays what it was; the run stays open only as the timer that does
// this, so the status query keeps answering. A job cancelled meanwhile
// keeps everything, as cancelling promises.
func (j *jobState) retain(ctx workflow.Context) {
	keep := j.s.Policy.Retain
	if keep <= 0 || ctx.Err() != nil {
		return
	}
	j.s.RemoveAt = workflow.Now(ctx).Add(keep)
	if err := workflow.Sleep(ctx, keep); err != nil {
		return
	}
	var out activities.RemoveOutput
	err := workflow.ExecuteActivity(j.stepOptions(ctx, removeTimeout, 0), a.RemoveRecordings, activities.RemoveInput{Call: j.call()}).Get(ctx, &out)
	if err != nil {
		j.logger(ctx).Warn("recordings not removed after retention; remove them by hand", "error", err)
		return
	}
	j.s.RemovedAt = workflow.Now(ctx)
	j.s.UpdatedAt = j.s.RemovedAt
}
