package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/transcript"
)

// Reply is the outcome of a job on its way back to the sender.
type Reply struct {
	JobID     string         `json:"job_id"`
	Source    job.Source     `json:"source"`
	Recipient *job.Recipient `json:"recipient,omitempty"`
	// State is done, failed or dead.
	State         job.State    `json:"state"`
	TranscriptKey string       `json:"transcript_key,omitempty"`
	Failure       *job.Failure `json:"failure,omitempty"`
	// Language is the job's speech language, which a notice may name.
	Language string `json:"language,omitempty"`
	// UseStatusMessage lets a reply that fits one message replace the
	// status message's text: an edit repeated by a retry changes nothing,
	// where a message sent twice arrives twice. Only a workflow that stops
	// showing progress in a status message the reply took over sets it;
	// jobs started before it would overwrite the transcript with "done".
	UseStatusMessage bool `json:"use_status_message,omitempty"`
}

// ReplyInput is a Reply with the retry schedule of its step.
type ReplyInput struct {
	Call
	Reply
}

// Outcome is what a Replier delivers: the reply with the transcript's text
// read from the store. It stays inside the worker process.
type Outcome struct {
	JobID     string
	Recipient job.Recipient
	State     job.State
	Text      string
	Failure   *job.Failure
	Language  string
	// UseStatusMessage is Reply.UseStatusMessage.
	UseStatusMessage bool
}

// SendReply delivers the outcome to the sender, when the job has a
// recipient: the command line prints the outcome itself and HTTP clients
// fetch it, so their jobs have none. A reply that cannot be
// delivered is recorded and does not fail the job: the transcript is kept
// and the sender can still ask for it. A long reply goes out in parts,
// each recorded in the blob store before and after it is sent (see
// partLog); heartbeats only keep the lease.
func (a *Activities) SendReply(ctx context.Context, in ReplyInput) (Delivery, error) {
	if in.Recipient == nil {
		return Delivery{}, nil
	}
	r, ok := a.Repliers[in.Source]
	if !ok {
		a.undelivered(ctx, in.Source, job.UndeliveredIntakeNotRunning)
		return Delivery{}, nil
	}
	if in.Recipient.Address == "" {
		a.undelivered(ctx, in.Source, job.UndeliveredRecipientMissing)
		return Delivery{}, nil
	}
	out := Outcome{JobID: in.JobID, Recipient: *in.Recipient, State: in.State, Failure: in.Failure, Language: in.Language,
		UseStatusMessage: in.UseStatusMessage}
	if in.State == job.Done {
		doc, err := transcript.Load(ctx, a.Blobs, in.TranscriptKey)
		if err != nil {
			return Delivery{}, classify(ctx, in.Call, err)
		}
		out.Text = doc.Text
	}
	parts, err := a.openPartLog(ctx)
	if err != nil {
		return Delivery{}, classify(ctx, in.Call, err)
	}
	stop := heartbeat(ctx, heartbeatEvery)
	d, err := r.Deliver(ctx, out, parts)
	stop()
	var sf serviceFailure
	if err != nil && ctx.Err() == nil && errors.As(err, &sf) && !sf.Temporary() {
		a.undelivered(ctx, in.Source, job.UndeliveredRecipientRefused)
		return Delivery{}, nil
	}
	return d, classify(ctx, in.Call, err)
}

// partLog keeps a reply's progress in a small object next to the job's
// other objects. Heartbeat details would not do: the SDK sends them at
// most every few seconds and a killed worker loses the last ones, so a
// retry would send again parts that had arrived.
type partLog struct {
	blobs BlobStore
	key   string
	rec   partRecord
}

// partRecord is the stored progress: Sent parts went out; Sending, when
// set, is the part whose fate is unknown until Delivered records it.
type partRecord struct {
	Sent    int  `json:"sent"`
	Sending *int `json:"sending,omitempty"`
}

// openPartLog reads the progress of this reply step. The key is the
// step's own, the same for every attempt of it and new for the next reply
// of the job (after a revive, or in a new run).
func (a *Activities) openPartLog(ctx context.Context) (*partLog, error) {
	info := activity.GetInfo(ctx)
	l := &partLog{blobs: a.Blobs, key: blob.JobKey(info.WorkflowExecution.ID,
		fmt.Sprintf("%s-%s/reply.json", info.WorkflowExecution.RunID, info.ActivityID))}
	rc, err := a.Blobs.Open(ctx, l.key)
	if errors.Is(err, blob.ErrNotFound) {
		l.resumeFromHeartbeat(ctx)
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read reply progress: %w", err)
	}
	defer rc.Close()
	if err := json.NewDecoder(rc).Decode(&l.rec); err != nil {
		return nil, fmt.Errorf("read reply progress %s: %w", l.key, err)
	}
	if l.rec.Sending != nil {
		activity.GetLogger(ctx).Warn("a reply part was in flight when the last attempt ended; it is sent again and may arrive twice",
			"part", *l.rec.Sending+1)
	}
	return l, nil
}

// resumeFromHeartbeat picks up the count of parts that an attempt of the
// previous release kept in its heartbeat details, so that a reply in
// flight during an upgrade does not start over.
func (l *partLog) resumeFromHeartbeat(ctx context.Context) {
	var sent int
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &sent) == nil && sent > 0 {
		l.rec.Sent = sent
	}
}

func (l *partLog) Sent() int { return l.rec.Sent }

func (l *partLog) Sending(ctx context.Context, i int) error {
	return l.write(ctx, partRecord{Sent: i, Sending: &i})
}

func (l *partLog) Delivered(ctx context.Context, i int) error {
	return l.write(ctx, partRecord{Sent: i + 1})
}

func (l *partLog) write(ctx context.Context, rec partRecord) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := l.blobs.Put(ctx, l.key, bytes.NewReader(body)); err != nil {
		return fmt.Errorf("record reply progress: %w", err)
	}
	l.rec = rec
	return nil
}

// undelivered records a reply that will not reach its sender: a WARN for
// the configurations that explain it, an ERROR for a recipient without an
// address, which only a damaged record has. Never the text.
func (a *Activities) undelivered(ctx context.Context, source job.Source, reason job.Undelivered) {
	if a.Metrics != nil {
		a.Metrics.RepliesUndelivered.WithLabelValues(string(reason)).Inc()
	}
	log := activity.GetLogger(ctx)
	if reason == job.UndeliveredRecipientMissing {
		log.Error("reply undelivered", "source", string(source), "reason", string(reason))
		return
	}
	log.Warn("reply undelivered", "source", string(source), "reason", string(reason))
}
