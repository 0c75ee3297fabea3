package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// recognizeWhole recognises the recording in one piece.
func (j *jobState) recognizeWhole(ctx workflow.Context) error {
	return j.recognize(ctx, &j.s.Piece, false)
}

// recognize submits a piece of audio, then checks a running operation
// after the wait each answer names until it finishes or its deadline passes.
// Checks that find the operation still running are successes and spend no
// attempt. The engine's steps run on its own task queue, whose workers take
// no more of them at once than the engine's concurrency allows.
func (j *jobState) recognize(ctx workflow.Context, p *Piece, chunk bool) error {
	ctx = workflow.WithTaskQueue(ctx, EngineTaskQueue(j.s.Engine))
	if p.OperationID == "" {
		timeout := recognizeBase + recognizePerAudio*p.Duration
		j.s.Submissions++
		var rec activities.Recognition
		err := workflow.ExecuteActivity(j.stepOptions(ctx, timeout, heartbeatTimeout), a.Recognize, activities.RecognizeInput{
			Call: j.call(), AudioKey: p.AudioKey, Engine: j.s.Engine, Language: j.s.Language, Prompt: j.s.Prompt,
			Duration: p.Duration, Chunk: chunk, Submission: j.s.Submissions, Speakers: j.s.Recognition.Speakers,
			SpeakersExpected: j.s.Recognition.SpeakersExpected, Temperature: j.s.Recognition.Temperature,
			Translate: j.s.Recognition.Translate,
		}).Get(ctx, &rec)
		if err != nil {
			return err
		}
		if rec.Done {
			p.recognized(rec)
			return nil
		}
		p.OperationID = rec.OperationID
		limit := j.s.Policy.operationTimeout(p.Duration)
		if rec.OperationTimeout > 0 {
			// The engine told its provider when the job stops waiting;
			// the job keeps that promise rather than a policy of its own.
			limit = rec.OperationTimeout
		}
		p.OperationDeadline = workflow.Now(ctx).Add(limit)
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
			delete(j.called, op)
			p.recognized(rec)
			return nil
		}
		// Only a running operation with a wait asks for the version, so
		// histories recorded before it replay unchanged.
		if rec.PollAfter > 0 && rec.PollAfter != p.PollInterval &&
			workflow.GetVersion(ctx, pollAfterEachCheck, workflow.DefaultVersion, 1) >= 1 {
			p.PollInterval = rec.PollAfter
		}
	}
}

// pollAfterEachCheck marks the change that makes each check's answer set
// the wait before the next one: an engine stretches it to share a quota of
// checks among its operations, or to honour the Retry-After of a check it
// refused for now. Before it, the wait the submit answered held for the
// whole operation.
const pollAfterEachCheck = "poll-after-each-check"

// awaits reports whether the job waits for the engine operation now.
func (j *jobState) awaits(op string) bool {
	if op == "" {
		return false
	}
	if j.s.OperationID == op {
		return true
	}
	for _, c := range j.s.Chunks {
		if c.OperationID == op {
			return true
		}
	}
	return false
}

func (p *Piece) recognized(rec activities.Recognition) {
	p.TranscriptKey, p.RawKey = rec.TranscriptKey, rec.RawKey
	p.DetectedLanguage, p.Words = rec.Language, rec.Words
	p.Service, p.ServiceVersion, p.NeedsCheck = rec.Service, rec.ServiceVersion, rec.NeedsCheck
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
		parts[i] = activities.MergePart{TranscriptKey: c.TranscriptKey, Offset: c.Offset, RawKey: c.RawKey}
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

// operationTimeout is how long an engine operation on audio that lasts d
// may run.
func (p Policy) operationTimeout(d time.Duration) time.Duration {
	if p.OperationTimeout > 0 {
		return p.OperationTimeout
	}
	return operationBase + operationPerAudio*d
}
