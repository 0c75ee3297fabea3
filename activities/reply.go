package activities

import (
	"context"
	"errors"
	"sync/atomic"

	"go.temporal.io/sdk/activity"

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
}

// SendReply delivers the outcome to the sender, when the job has a
// recipient: the command line prints the outcome itself and HTTP clients
// fetch it, so their jobs have none. A reply that cannot be
// delivered is recorded and does not fail the job: the transcript is kept
// and the sender can still ask for it. A long reply goes out in parts; a
// retried attempt resumes after the parts its predecessor sent, which it
// finds in the step's heartbeat details.
func (a *Activities) SendReply(ctx context.Context, in ReplyInput) error {
	if in.Recipient == nil {
		return nil
	}
	r, ok := a.Repliers[in.Source]
	if !ok {
		a.undelivered(ctx, in.Source, job.UndeliveredIntakeNotRunning)
		return nil
	}
	if in.Recipient.Address == "" {
		a.undelivered(ctx, in.Source, job.UndeliveredRecipientMissing)
		return nil
	}
	out := Outcome{JobID: in.JobID, Recipient: *in.Recipient, State: in.State, Failure: in.Failure, Language: in.Language}
	if in.State == job.Done {
		doc, err := transcript.Load(ctx, a.Blobs, in.TranscriptKey)
		if err != nil {
			return classify(ctx, in.Call, err)
		}
		out.Text = doc.Text
	}
	sent := 0
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &sent)
	}
	var done atomic.Int64
	done.Store(int64(sent))
	stop := heartbeatWith(ctx, heartbeatEvery, func() any { return int(done.Load()) })
	err := r.Deliver(ctx, out, sent, func(n int) {
		done.Store(int64(n))
		activity.RecordHeartbeat(ctx, n)
	})
	stop()
	var sf serviceFailure
	if err != nil && ctx.Err() == nil && errors.As(err, &sf) && !sf.Temporary() {
		a.undelivered(ctx, in.Source, job.UndeliveredRecipientRefused)
		return nil
	}
	return classify(ctx, in.Call, err)
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
