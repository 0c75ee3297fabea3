// Package workflows holds TranscribeRecording, the life of one recording:
// convert, recognise, reply, with failed and dead jobs parked until an
// operator revives them. It is deterministic orchestration only; all I/O
// happens in the activities.
package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/metrics"
)

// a is only used to name activity methods in a type-safe way.
var a *activities.Activities

// TranscribeRecording runs one job to its outcome.
func TranscribeRecording(ctx workflow.Context, in Input) (Result, error) {
	j := newJob(ctx, in)
	if err := j.handle(ctx); err != nil {
		return Result{}, err
	}
	if in.Resume == nil {
		v := workflow.GetVersion(ctx, leanPublish, workflow.DefaultVersion, leanInspects)
		j.s.Lean, j.s.Inspects = v >= 1, v >= leanInspects
	}
	// A lean job comes after service-defaults, so it need not ask.
	if in.Resume == nil && leftToService(in) && (j.s.Lean || workflow.GetVersion(ctx, serviceDefaults, workflow.DefaultVersion, 1) >= 1) {
		j.takeServiceDefaults(ctx, in)
	}
	if in.Resume == nil {
		if err := j.enter(ctx, job.Accepted); err != nil {
			return Result{}, err
		}
	}
	for {
		err := j.run(ctx)
		switch {
		case err == nil:
			j.finish(ctx, job.Done, nil)
			j.retain(ctx)
			return j.result(), nil
		case errors.Is(err, errContinueAsNew):
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return j.cancelled(ctx)
			}
			next := in
			next.Resume = &j.s
			return Result{}, workflow.NewContinueAsNewError(ctx, TranscribeRecording, next)
		case temporal.IsCanceledError(err) || ctx.Err() != nil:
			return j.cancelled(ctx)
		}
		f, dead := j.failure(ctx, err)
		if dead && j.fallBack(ctx, f) {
			continue
		}
		if revived := j.park(ctx, f, dead); !revived {
			if ctx.Err() != nil {
				return j.cancelled(ctx)
			}
			j.retain(ctx)
			return j.result(), nil
		}
	}
}

var errContinueAsNew = errors.New("continue as new")

// leanPublish marks the change that trims what a job costs the server,
// without changing what anyone sees: a state change is published to
// visibility only for the search attributes it changes (the job starts with
// its state, source and engine set), a job nobody waits a reply for goes
// from transcribing straight to done, and the progress in a sender's status
// message is shown by a local activity, which needs no task of its own.
// It implies every change before it, whose versions it no longer asks for.
// Jobs started before it run as they began.
const leanPublish = "lean-publish"

// leanInspects is the version of lean-publish that implies local-inspect:
// a job started at it records one version marker where it recorded two,
// and each marker costs the server a visibility write of its own.
const leanInspects workflow.Version = 2

// serviceDefaults marks the change that lets a job leave its engine and
// retry policy to the service that runs it. Only jobs that leave them ask,
// and no job before the change did, so older histories replay unchanged.
const serviceDefaults = "service-defaults"

// service names the defaults step in a type-safe way.
var service *activities.ServiceDefaults

// leftToService reports whether the intake left the engine or the whole
// retry policy to the service.
func leftToService(in Input) bool {
	return in.Engine == "" || in.Policy.isZero()
}

func (p Policy) isZero() bool {
	return len(p.Backoff) == 0 && p.MaxAttempts == 0 && p.ParkFor == 0 && p.Retain == 0 && p.OperationTimeout == 0
}

// takeServiceDefaults asks the worker running the job for the service's
// choices and takes those the intake left open. The step runs in the very
// worker that runs this code, so it is always there; should it still fail,
// the built-in policy applies and the log says so.
func (j *jobState) takeServiceDefaults(ctx workflow.Context, in Input) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
	})
	var d activities.Defaults
	if err := workflow.ExecuteLocalActivity(lctx, service.Choose, in.Language).Get(ctx, &d); err != nil {
		j.logger(ctx).Warn("the service's defaults are unknown; the built-in ones apply", "error", err)
		return
	}
	if in.Engine == "" {
		j.s.Engine, j.s.Fallback = d.Engine, d.Fallback
	}
	if in.Policy.isZero() {
		p := Policy{Backoff: d.Backoff, MaxAttempts: d.MaxAttempts, ParkFor: d.ParkFor, Retain: d.Retain, OperationTimeout: d.OperationTimeout}
		j.s.Policy = withPolicyDefaults(p)
	}
}

type jobState struct {
	s Status
	// parked is true while the job waits for revive; revive signals that
	// arrive at other times are ignored.
	parked  bool
	revived bool
	// stopping tells the chunks being recognised to stop at their next
	// check, for continue-as-new.
	stopping bool
	// failedChunk is the index of the chunk whose failure stopped the
	// recognition, -1 when none did.
	failedChunk int
	// called holds the operations an engine called back about that the job
	// has not checked since. Only a wait for that very operation consumes
	// an entry, so a repeated or stale callback wakes nothing.
	called map[string]bool
}

func newJob(ctx workflow.Context, in Input) *jobState {
	if in.Resume != nil {
		return &jobState{s: *in.Resume, failedChunk: -1, called: map[string]bool{}}
	}
	info := workflow.GetInfo(ctx)
	now := workflow.Now(ctx)
	accepted := in.AcceptedAt
	if accepted.IsZero() {
		accepted = now
	}
	p := withPolicyDefaults(in.Policy)
	return &jobState{failedChunk: -1, called: map[string]bool{}, s: Status{
		JobID:      info.WorkflowExecution.ID,
		State:      job.Accepted,
		Source:     in.Source,
		Engine:     in.Engine,
		Fallback:   in.Fallback,
		Language:   in.Language,
		Prompt:     in.Prompt,
		Title:      in.Title,
		Original:   in.Original,
		Recipient:  in.Recipient,
		Policy:     p,
		AcceptedAt: accepted,
		UpdatedAt:  now,

		WebhookURL: in.WebhookURL,

		Recognition: in.Recognition,

		Owner: in.Owner,
	}}
}

// withPolicyDefaults fills what p leaves open with the built-in defaults.
func withPolicyDefaults(p Policy) Policy {
	if len(p.Backoff) == 0 {
		p.Backoff = job.DefaultBackoff()
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = job.DefaultMaxAttempts
	}
	if p.ParkFor <= 0 {
		p.ParkFor = job.DefaultParkFor
	}
	return p
}

// run does the steps that are not done yet, so that a revived job resumes
// from the step that stopped it.
func (j *jobState) run(ctx workflow.Context) error {
	j.acknowledge(ctx)
	if j.s.Original.Key == "" && j.s.Original.FileID != "" {
		if err := j.enter(ctx, job.Fetching); err != nil {
			return err
		}
		var out activities.FetchOutput
		err := workflow.ExecuteActivity(j.stepOptions(ctx, fetchTimeout, heartbeatTimeout), a.FetchOriginal, activities.FetchInput{
			Call: j.call(), Source: j.s.Source, FileID: j.s.Original.FileID, Ext: j.s.Original.Ext,
		}).Get(ctx, &out)
		if err != nil {
			return err
		}
		j.s.Original.Key, j.s.Original.Size = out.Key, out.Size
	}
	if j.s.AudioKey == "" && !j.takenAsIs(ctx) {
		if err := j.enter(ctx, job.Converting); err != nil {
			return err
		}
		var out activities.ConvertOutput
		err := workflow.ExecuteActivity(j.stepOptions(ctx, convertTimeout, heartbeatTimeout), a.Convert, activities.ConvertInput{
			Call: j.call(), OriginalKey: j.s.Original.Key, Engine: j.s.Engine, Language: j.s.Language,
		}).Get(ctx, &out)
		if err != nil {
			return err
		}
		j.s.AudioKey, j.s.Duration = out.AudioKey, out.Duration
		j.s.Chunks, j.s.ChunksDone = nil, 0
		for _, c := range out.Chunks {
			j.s.Chunks = append(j.s.Chunks, Chunk{Piece: Piece{AudioKey: c.AudioKey, Duration: c.Duration}, Offset: c.Offset})
		}
	}
	if j.s.TranscriptKey == "" {
		if err := j.enter(ctx, job.Transcribing); err != nil {
			return err
		}
		recognize := j.recognizeWhole
		if len(j.s.Chunks) > 0 {
			recognize = j.recognizeChunks
		}
		if err := recognize(ctx); err != nil {
			return err
		}
	}
	if !j.s.Replied {
		if j.s.Recipient == nil && j.s.Lean {
			// Nothing to reply: the job is done once it is transcribed.
			j.s.Replied = true
			return nil
		}
		if err := j.enter(ctx, job.Replying); err != nil {
			return err
		}
		if err := j.reply(ctx, job.Done, nil); err != nil {
			return err
		}
		j.s.Replied = true
	}
	return nil
}

// localInspect marks the change that lets a lean job whose recording is
// small ask a local activity whether the engine takes it as it is, and go
// straight to transcribing when it does: one step, one state and their
// tasks and writes fewer for the common voice note. Conversion stays a step
// of its own, with its attempts and lease, for everything else.
const localInspect = "local-inspect"

// inspectMaxBytes bounds the recordings inspected in a local activity,
// which holds the job's workflow task while it copies and probes: above it
// no engine takes a recording in one request anyway.
const inspectMaxBytes = 32 << 20

// takenAsIs reports whether the engine takes the original as it is, asking
// Inspect when the job may; the audio is then the original.
func (j *jobState) takenAsIs(ctx workflow.Context) bool {
	if !j.s.Lean || j.s.Original.Size <= 0 || j.s.Original.Size > inspectMaxBytes ||
		!j.s.Inspects && workflow.GetVersion(ctx, localInspect, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	var out activities.InspectOutput
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: courtesyTimeout,
		// Any trouble leaves the recording to Convert and its attempts.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	err := workflow.ExecuteLocalActivity(lctx, a.Inspect, activities.ConvertInput{
		Call: j.call(), OriginalKey: j.s.Original.Key, Engine: j.s.Engine, Language: j.s.Language,
	}).Get(ctx, &out)
	if err != nil || !out.AsIs {
		return false
	}
	j.s.AudioKey, j.s.Duration = j.s.Original.Key, out.Duration
	j.s.Chunks, j.s.ChunksDone = nil, 0
	return true
}

// logger is the workflow's logger with the job's current state as the
// step; the worker's interceptor adds the job id.
func (j *jobState) logger(ctx workflow.Context) log.Logger {
	return log.With(workflow.GetLogger(ctx), "step", string(j.s.State))
}

// enter moves the job to a new state and publishes it to visibility and,
// for senders who watch a status message, to them.
func (j *jobState) enter(ctx workflow.Context, s job.State) error {
	j.s.State = s
	j.s.UpdatedAt = workflow.Now(ctx)
	var attrs []temporal.SearchAttributeUpdate
	published := workflow.GetTypedSearchAttributes(ctx)
	for _, kv := range []struct {
		key   temporal.SearchAttributeKeyKeyword
		value string
	}{{StateKey, string(s)}, {SourceKey, string(j.s.Source)}, {EngineKey, j.s.Engine}} {
		if v, ok := published.GetKeyword(kv.key); j.s.Lean && ok && v == kv.value {
			continue
		}
		attrs = append(attrs, kv.key.ValueSet(kv.value))
	}
	// Only a job flagged for review asks for the version, so every other
	// history replays unchanged.
	if j.s.NeedsCheck && workflow.GetVersion(ctx, reviewAttribute, workflow.DefaultVersion, 1) >= 1 {
		attrs = append(attrs, ReviewKey.ValueSet(ReviewNeedsCheck))
	}
	if len(attrs) > 0 {
		if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
			return fmt.Errorf("publish state %s: %w", s, err)
		}
	}
	j.showProgress(ctx, s)
	return nil
}

// reviewAttribute marks the change that publishes a recognition service's
// request for review as the TranscriptionReview search attribute.
const reviewAttribute = "review-attribute"

func (j *jobState) finish(ctx workflow.Context, state job.State, f *job.Failure) {
	j.s.FinishedAt = workflow.Now(ctx)
	if err := j.enter(ctx, state); err != nil {
		j.logger(ctx).Error("publish state failed", "error", err)
	}
	j.count(ctx, state, f)
	j.notify(ctx, state)
}

// count reports an outcome. The SDK's metrics handler skips replays, so a
// job is counted once per outcome however often its history is replayed.
func (j *jobState) count(ctx workflow.Context, state job.State, f *job.Failure) {
	h := workflow.GetMetricsHandler(ctx)
	h.WithTags(map[string]string{"source": string(j.s.Source), "outcome": string(state)}).Counter(metrics.JobsTotal).Inc(1)
	if f != nil {
		h.WithTags(map[string]string{"kind": string(f.Kind)}).Counter(metrics.FailuresTotal).Inc(1)
	}
	h.Timer(metrics.JobDurationSecond).Record(workflow.Now(ctx).Sub(j.s.AcceptedAt))
}

func (j *jobState) cancelled(ctx workflow.Context) (Result, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	j.finish(dctx, job.Cancelled, nil)
	return j.result(), temporal.NewCanceledError("the job was cancelled")
}

func (j *jobState) result() Result {
	return Result{State: j.s.State, TranscriptKey: j.s.TranscriptKey, Failure: j.s.Failure}
}
