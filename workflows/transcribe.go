// Package workflows holds TranscribeRecording, the life of one recording:
// convert, recognise, reply, with failed and dead jobs parked until an
// operator revives them. It is deterministic orchestration only; all I/O
// happens in the activities.
package workflows

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/metrics"
)

// a is only used to name activity methods in a type-safe way.
var a *activities.Activities

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
var verdictKinds = []string{
	string(job.EmptyAudio), string(job.UnsupportedFormat), string(job.TooLong), string(job.NoSpeech),
	string(job.EngineRejected), string(job.EngineUnauthorized), string(job.OperationFailed), string(job.EngineNotConfigured),
	string(job.FileTooBig), string(job.SourceFileMissing), string(job.ServiceRefused),
}

var languagePattern = regexp.MustCompile(`^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$`)

// TranscribeRecording runs one job to its outcome.
func TranscribeRecording(ctx workflow.Context, in Input) (Result, error) {
	j := newJob(ctx, in)
	if err := j.handle(ctx); err != nil {
		return Result{}, err
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
	p := in.Policy
	if len(p.Backoff) == 0 {
		p.Backoff = DefaultBackoff
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.ParkFor <= 0 {
		p.ParkFor = DefaultParkFor
	}
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

		CallbackURL: in.CallbackURL,
	}}
}

// handle registers the query, the updates and the revive signal.
func (j *jobState) handle(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		return j.s, nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", QueryStatus, err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSetLanguage,
		func(ctx workflow.Context, req SetLanguageRequest) (Status, error) {
			j.s.Language = req.Language
			j.s.UpdatedAt = workflow.Now(ctx)
			return j.s, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req SetLanguageRequest) error {
			if req.Language != "" && !languagePattern.MatchString(req.Language) {
				return fmt.Errorf("language %q is not a language code such as en or ru", req.Language)
			}
			if j.s.State.Settled() && j.s.State != job.Failed && j.s.State != job.Dead {
				return fmt.Errorf("the job is %s; its language can no longer change", j.s.State)
			}
			return nil
		}},
	); err != nil {
		return fmt.Errorf("register %s update: %w", UpdateSetLanguage, err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAnnotate,
		func(ctx workflow.Context, req AnnotateRequest) (Status, error) {
			if req.Title != "" {
				j.s.Title = req.Title
			}
			if req.Note != "" {
				j.s.Note = req.Note
			}
			j.s.UpdatedAt = workflow.Now(ctx)
			return j.s, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req AnnotateRequest) error {
			if len(req.Title) > 1000 || len(req.Note) > 10000 {
				return errors.New("title is limited to 1000 bytes and note to 10000")
			}
			return nil
		}},
	); err != nil {
		return fmt.Errorf("register %s update: %w", UpdateAnnotate, err)
	}
	callbacks := workflow.GetSignalChannel(ctx, SignalEngineCallback)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var cb EngineCallback
			callbacks.Receive(ctx, &cb)
			if ctx.Err() != nil {
				return
			}
			if cb.OperationID != "" {
				j.called[cb.OperationID] = true
			}
		}
	})
	revive := workflow.GetSignalChannel(ctx, SignalRevive)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			revive.Receive(ctx, nil)
			if ctx.Err() != nil {
				return
			}
			if j.parked {
				j.revived = true
			} else {
				j.logger(ctx).Info("revive ignored: the job is not failed or dead", "state", string(j.s.State))
			}
		}
	})
	return nil
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
	if j.s.AudioKey == "" {
		if err := j.enter(ctx, job.Converting); err != nil {
			return err
		}
		var out activities.ConvertOutput
		err := workflow.ExecuteActivity(j.stepOptions(ctx, convertTimeout, heartbeatTimeout), a.Convert, activities.ConvertInput{
			Call: j.call(), OriginalKey: j.s.Original.Key, Engine: j.s.Engine,
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

// recognizeWhole recognises the recording in one piece.
func (j *jobState) recognizeWhole(ctx workflow.Context) error {
	return j.recognize(ctx, &j.s.Piece, false)
}

// recognize submits a piece of audio, then checks a running operation on
// the engine's fixed interval until it finishes or its deadline passes.
// Checks that find the operation still running are successes and spend no
// attempt. The engine's steps run on its own task queue, whose workers take
// no more of them at once than the engine's concurrency allows.
func (j *jobState) recognize(ctx workflow.Context, p *Piece, chunk bool) error {
	ctx = workflow.WithTaskQueue(ctx, EngineTaskQueue(j.s.Engine))
	if p.OperationID == "" {
		timeout := recognizeBase + recognizePerAudio*p.Duration
		var rec activities.Recognition
		err := workflow.ExecuteActivity(j.stepOptions(ctx, timeout, heartbeatTimeout), a.Recognize, activities.RecognizeInput{
			Call: j.call(), AudioKey: p.AudioKey, Engine: j.s.Engine, Language: j.s.Language, Prompt: j.s.Prompt,
			Duration: p.Duration, Chunk: chunk,
		}).Get(ctx, &rec)
		if err != nil {
			return err
		}
		if rec.Done {
			p.recognized(rec)
			return nil
		}
		p.OperationID = rec.OperationID
		p.OperationDeadline = workflow.Now(ctx).Add(operationBase + operationPerAudio*p.Duration)
		p.PollInterval, p.FirstCheckAfter = rec.PollAfter, rec.FirstCheckAfter
	}
	for {
		if !workflow.Now(ctx).Before(p.OperationDeadline) {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the engine did not finish the operation by its deadline %s", p.OperationDeadline.Format(time.RFC3339)),
				string(job.Timeout), nil)
		}
		info := workflow.GetInfo(ctx)
		if j.stopping || info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > historyLimit {
			return errContinueAsNew
		}
		wait := p.PollInterval
		if p.FirstCheckAfter > 0 {
			wait = p.FirstCheckAfter
		}
		// A callback from the engine ends the wait early; without one the
		// fixed interval decides.
		op := p.OperationID
		if _, err := workflow.AwaitWithTimeout(ctx, min(wait, p.OperationDeadline.Sub(workflow.Now(ctx))), func() bool {
			return j.called[op]
		}); err != nil {
			return err
		}
		delete(j.called, op)
		p.FirstCheckAfter = 0
		var rec activities.Recognition
		err := workflow.ExecuteActivity(j.stepOptions(ctx, checkTimeout, 0), a.CheckRecognition, activities.CheckInput{
			Call: j.call(), Engine: j.s.Engine, OperationID: p.OperationID, Duration: p.Duration, Chunk: chunk,
		}).Get(ctx, &rec)
		if err != nil {
			return err
		}
		if rec.Done {
			p.recognized(rec)
			return nil
		}
	}
}

func (p *Piece) recognized(rec activities.Recognition) {
	p.TranscriptKey, p.RawKey = rec.TranscriptKey, rec.RawKey
	p.DetectedLanguage, p.Words = rec.Language, rec.Words
	p.OperationID, p.OperationDeadline = "", time.Time{}
}

// recognizeChunks recognises the chunks of a split recording in parallel,
// each with its own retries, then merges their transcripts. After a chunk
// fails no new chunk starts; those in flight finish and keep their results,
// so a revived job recognises only the chunks still missing.
func (j *jobState) recognizeChunks(ctx workflow.Context) error {
	var (
		failed   error
		inFlight int
		wg       = workflow.NewWaitGroup(ctx)
	)
	j.failedChunk = -1
	for i := range j.s.Chunks {
		c := &j.s.Chunks[i]
		if c.TranscriptKey != "" {
			continue
		}
		if err := workflow.Await(ctx, func() bool {
			return inFlight < maxChunksInFlight || failed != nil || j.stopping
		}); err != nil {
			break
		}
		if failed != nil || j.stopping {
			break
		}
		inFlight++
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			err := j.recognize(ctx, &c.Piece, true)
			inFlight--
			switch {
			case err == nil:
				j.s.ChunksDone++
				j.s.UpdatedAt = workflow.Now(ctx)
			case errors.Is(err, errContinueAsNew):
				j.stopping = true
			case failed == nil:
				failed, j.failedChunk = err, i
			}
		})
	}
	wg.Wait(ctx)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case failed != nil:
		return failed
	case j.stopping:
		return errContinueAsNew
	}
	parts := make([]activities.MergePart, len(j.s.Chunks))
	for i, c := range j.s.Chunks {
		parts[i] = activities.MergePart{TranscriptKey: c.TranscriptKey, Offset: c.Offset}
	}
	var rec activities.Recognition
	err := workflow.ExecuteActivity(j.stepOptions(ctx, mergeTimeout, 0), a.MergeTranscripts, activities.MergeInput{
		Call: j.call(), Engine: j.s.Engine, Duration: j.s.Duration, Parts: parts,
	}).Get(ctx, &rec)
	if err != nil {
		return err
	}
	j.s.recognized(rec)
	return nil
}

// logger is the workflow's logger with the job's current state as the
// step; the worker's interceptor adds the job id.
func (j *jobState) logger(ctx workflow.Context) log.Logger {
	return log.With(workflow.GetLogger(ctx), "step", string(j.s.State))
}

// replyOnlyWhenExpected marks the change that stopped scheduling a reply
// step for jobs whose sender expects none (the command line, HTTP): it was a
// round trip that did nothing. Jobs started before it still run the step.
const replyOnlyWhenExpected = "reply-only-when-expected"

func (j *jobState) reply(ctx workflow.Context, state job.State, f *job.Failure) error {
	if !activities.ExpectsReply(j.s.Source) &&
		workflow.GetVersion(ctx, replyOnlyWhenExpected, workflow.DefaultVersion, 1) >= 1 {
		return nil
	}
	return workflow.ExecuteActivity(j.stepOptions(ctx, replyTimeout, heartbeatTimeout), a.SendReply, activities.ReplyInput{
		Call: j.call(),
		Reply: activities.Reply{
			JobID: j.s.JobID, Source: j.s.Source, Recipient: j.s.Recipient,
			State: state, TranscriptKey: j.s.TranscriptKey, Failure: f,
		},
	}).Get(ctx, nil)
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

// enter moves the job to a new state and publishes it to visibility and,
// for senders who watch a status message, to them.
func (j *jobState) enter(ctx workflow.Context, s job.State) error {
	j.s.State = s
	j.s.UpdatedAt = workflow.Now(ctx)
	err := workflow.UpsertTypedSearchAttributes(ctx,
		StateKey.ValueSet(string(s)),
		SourceKey.ValueSet(string(j.s.Source)),
		EngineKey.ValueSet(j.s.Engine),
	)
	if err != nil {
		return fmt.Errorf("publish state %s: %w", s, err)
	}
	j.showProgress(ctx, s)
	return nil
}

// courtesy runs a step that only informs the sender: a few quick attempts,
// and the job goes on without it. Command-line and HTTP jobs, whose senders
// watch no status message, never run one.
func (j *jobState) courtesy(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: courtesyTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3,
		},
	})
}

// acknowledge tells the sender once that the recording was accepted.
func (j *jobState) acknowledge(ctx workflow.Context) {
	r := j.s.Recipient
	if !activities.ExpectsReply(j.s.Source) || r == nil || r.StatusMessageID != 0 || j.s.Acknowledged {
		return
	}
	j.s.Acknowledged = true
	var id int
	err := workflow.ExecuteActivity(j.courtesy(ctx), a.Acknowledge, activities.NoticeInput{
		JobID: j.s.JobID, Source: j.s.Source, Recipient: *r,
	}).Get(ctx, &id)
	if err != nil {
		j.logger(ctx).Warn("sender not told of acceptance", "error", err)
		return
	}
	r.StatusMessageID = id
}

func (j *jobState) showProgress(ctx workflow.Context, s job.State) {
	r := j.s.Recipient
	if !activities.ExpectsReply(j.s.Source) || r == nil || r.StatusMessageID == 0 || ctx.Err() != nil {
		return
	}
	err := workflow.ExecuteActivity(j.courtesy(ctx), a.ShowProgress, activities.NoticeInput{
		JobID: j.s.JobID, Source: j.s.Source, Recipient: *r, State: s,
	}).Get(ctx, nil)
	if err != nil && ctx.Err() == nil {
		j.logger(ctx).Info("status message not updated", "state", string(s), "error", err)
	}
}

// failure reads what stopped a step. A definitive verdict fails the job. A
// retryable failure reaches the workflow only once Temporal has spent every
// attempt on it, and time that ran out is the same kind of exhaustion: both
// make the job dead.
func (j *jobState) failure(ctx workflow.Context, err error) (job.Failure, bool) {
	f := job.Failure{Kind: job.Internal, Step: j.s.State, Message: err.Error(), At: workflow.Now(ctx)}
	dead := true
	var appErr *temporal.ApplicationError
	var timeoutErr *temporal.TimeoutError
	switch {
	case errors.As(err, &appErr):
		f.Kind, f.Message = job.Kind(appErr.Type()), appErr.Message()
		dead = !(appErr.NonRetryable() || slices.Contains(verdictKinds, appErr.Type())) || f.Kind == job.Timeout
	case errors.As(err, &timeoutErr):
		f.Kind = job.Timeout
		f.Message = fmt.Sprintf("the step did not finish in time (%s timeout)", timeoutName(timeoutErr.TimeoutType()))
	}
	var actErr *temporal.ActivityError
	if dead && errors.As(err, &actErr) && actErr.RetryState() != enumspb.RETRY_STATE_TIMEOUT {
		f.Attempts = j.s.Policy.MaxAttempts
	}
	if j.failedChunk >= 0 {
		f.Message = fmt.Sprintf("chunk %d of %d: %s", j.failedChunk+1, len(j.s.Chunks), f.Message)
		j.failedChunk = -1
	}
	return f, dead
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
	logger.Info("job revived", "from_step", string(f.Step))
	return true
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
