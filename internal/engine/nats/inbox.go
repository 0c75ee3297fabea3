package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Job is what the inbox needs to know of a job to judge a result for it.
type Job struct {
	// State is the job's state; Settled says it takes no more results.
	State   string
	Settled bool
	// OperationID is the engine operation the job waits for now, and
	// Deadline when it stops waiting; empty when it waits for none.
	OperationID string
	Deadline    time.Time
}

// Jobs finds jobs and wakes them.
type Jobs interface {
	// Lookup finds a job; one that never existed is ErrUnknownJob.
	Lookup(ctx context.Context, jobID string) (Job, error)
	// Wake tells a job that its operation has a result to check now.
	Wake(ctx context.Context, jobID, operationID, status string) error
}

// errNotYet: the job has not yet recorded the submission a result answers.
var errNotYet = errors.New("the job has not recorded the submission yet")

// ErrUnknownJob: no job has the id.
var ErrUnknownJob = errors.New("no such job")

// Inbox applies the results services publish. Every worker with the engine
// runs one on the same durable consumer, so each envelope is handled by
// one of them; keeping the first result of a submission in the bucket
// makes a repeat of it change nothing, whichever worker sees it.
type Inbox struct {
	X      *Exchange
	Jobs   Jobs
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// retryIn is the wait before a result that met trouble of ours (the
// Temporal server or the bucket did not answer) is handed over again.
const retryIn = 5 * time.Second

// Run consumes results until ctx ends.
func (in *Inbox) Run(ctx context.Context) error {
	var cons jetstream.Consumer
	for {
		_, err := in.X.Ensure(ctx)
		if err == nil {
			cons, err = in.X.JS.CreateOrUpdateConsumer(ctx, ResultsStream, jetstream.ConsumerConfig{
				Durable: InboxConsumer, Description: "transcriber workers apply recognition results",
				AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, FilterSubject: ResultsSubject,
			})
		}
		if err == nil {
			break
		}
		in.Logger.Warn("recognition inbox waits for the broker", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryIn):
		}
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("recognition inbox: %w", err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			in.Logger.Warn("recognition inbox", "error", err)
			// A broken consumer fails every call at once; pace the retries.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		in.handle(ctx, msg)
	}
}

func (in *Inbox) now() time.Time {
	if in.Now != nil {
		return in.Now()
	}
	return time.Now()
}

// handle settles one envelope: acknowledged once it is applied or judged
// for good, handed back when our own side could not judge it yet.
func (in *Inbox) handle(ctx context.Context, msg jetstream.Msg) {
	redo, err := in.apply(ctx, msg.Headers().Get(jetstream.MsgIDHeader), msg.Data())
	if err != nil && !redo {
		in.Logger.Warn("recognition result", "error", err)
	}
	if redo {
		delay := retryIn
		if errors.Is(err, errNotYet) {
			delay = time.Second
		} else {
			in.Logger.Warn("recognition result handed back for later", "msg_id", msg.Headers().Get(jetstream.MsgIDHeader), "error", err)
		}
		_ = msg.NakWithDelay(delay)
		return
	}
	if err := msg.Ack(); err != nil {
		in.Logger.Warn("recognition result not acknowledged", "msg_id", msg.Headers().Get(jetstream.MsgIDHeader), "error", err)
	}
}

// apply judges an envelope and keeps it when it is the first result of the
// submission the job waits for. redo asks for the envelope again later.
// The log names ids, statuses and reasons, never the text.
func (in *Inbox) apply(ctx context.Context, msgID string, body []byte) (redo bool, err error) {
	r, err := ReadResult(msgID, body)
	if err != nil {
		in.Logger.Warn("recognition result refused", "msg_id", msgID, "error", err)
		return false, nil
	}
	log := in.Logger.With("job_id", r.JobID, "msg_id", msgID, "status", r.Status, "service", r.Service.Name)
	j, err := in.Jobs.Lookup(ctx, r.JobID)
	if errors.Is(err, ErrUnknownJob) {
		log.Warn("recognition result for an unknown job")
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if !r.Final() {
		log.Info("recognition service took the job")
		return false, nil
	}
	op := OperationID(r.JobID, r.Submission)
	drop := func(reason string) (bool, error) {
		log.Info("recognition result dropped", "reason", reason, "state", j.State)
		return false, nil
	}
	switch {
	case j.Settled:
		return drop("the job has settled")
	case j.OperationID == "":
		// A quick service can answer before the job has recorded the
		// submission its publish made; it will record it in a moment.
		return true, errNotYet
	case j.OperationID != op:
		return drop("the job waits for no such submission")
	case !j.Deadline.IsZero() && in.now().After(j.Deadline):
		return drop("it came after the reply deadline")
	}
	kv, err := in.X.Ensure(ctx)
	if err != nil {
		return true, err
	}
	if _, err := kv.Create(ctx, resultKey(r.JobID, r.Submission), body); errors.Is(err, jetstream.ErrKeyExists) {
		log.Info("recognition result already applied; the repeat changes nothing")
		return false, nil
	} else if err != nil {
		return true, err
	}
	log.Info("recognition result applied")
	if err := in.Jobs.Wake(ctx, r.JobID, op, r.Status); err != nil {
		// The result is kept; the job's next check finds it anyway.
		log.Warn("job not woken for its result; its next check reads it", "error", err)
	}
	return false, nil
}
