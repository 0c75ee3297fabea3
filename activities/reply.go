package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/transcriber/transcriber/internal/job"
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
}

// ReplyInput is a Reply with the retry schedule of its step.
type ReplyInput struct {
	Call
	Reply
}

// Reasons a reply could not be delivered; the label of
// transcriber_replies_undelivered_total.
const (
	UndeliveredIntakeNotRunning = "intake_not_running"
	UndeliveredRecipientMissing = "recipient_missing"
)

// ExpectsReply reports whether the sender of a job from source waits for a
// reply. The command line prints the outcome itself and HTTP clients fetch
// it. The workflow asks this too, to skip a step with nothing to do.
func ExpectsReply(source job.Source) bool { return source == job.SourceTelegram }

// SendReply delivers the outcome to the sender. A reply that cannot be
// delivered is recorded and does not fail the job: the transcript is kept
// and the sender can still ask for it.
func (a *Activities) SendReply(ctx context.Context, in ReplyInput) error {
	if !ExpectsReply(in.Source) {
		return nil
	}
	log := activity.GetLogger(ctx)
	r, ok := a.Repliers[in.Source]
	if !ok {
		a.undelivered(UndeliveredIntakeNotRunning)
		log.Warn("reply undelivered", "job_id", in.JobID, "source", string(in.Source), "reason", UndeliveredIntakeNotRunning)
		return nil
	}
	if in.Recipient == nil || in.Recipient.ChatID == 0 {
		a.undelivered(UndeliveredRecipientMissing)
		log.Error("reply undelivered", "job_id", in.JobID, "source", string(in.Source), "reason", UndeliveredRecipientMissing)
		return nil
	}
	return classify(ctx, in.Call, r.Deliver(ctx, in.Reply))
}

func (a *Activities) undelivered(reason string) {
	if a.Metrics != nil {
		a.Metrics.RepliesUndelivered.WithLabelValues(reason).Inc()
	}
}
