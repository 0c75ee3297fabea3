package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// notifier names the webhook step in a type-safe way.
var notifier *activities.Notifier

const (
	// notifyTimeout bounds one delivery attempt; the request itself gives up
	// sooner.
	notifyTimeout = time.Minute
)

// notifyRetry is the back-off of webhook deliveries: quick at first for a
// receiver that blinked, capped at five minutes, giving up after about half
// an hour. A receiver that refuses for good is not asked again.
var notifyRetry = &temporal.RetryPolicy{
	InitialInterval:        2 * time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        5 * time.Minute,
	MaximumAttempts:        12,
	NonRetryableErrorTypes: errorTypes(job.WebhookErrors()),
}

// notify tells the job's webhook URL that the job settled as done, failed
// or dead. Jobs without a webhook schedule nothing, so histories recorded
// before webhooks existed replay unchanged. A notice that cannot be
// delivered is logged and changes nothing about the job.
func (j *jobState) notify(ctx workflow.Context, state job.State) {
	if j.s.WebhookURL == "" || (state != job.Done && state != job.Failed && state != job.Dead) {
		return
	}
	in := activities.NotifyInput{
		URL:   j.s.WebhookURL,
		Event: activities.NewEvent(j.s.JobID, j.s.Source, state, j.s.Failure, workflow.Now(ctx)),
	}
	send := func(ctx workflow.Context) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: notifyTimeout,
			RetryPolicy:         notifyRetry,
		})
		err := workflow.ExecuteActivity(actx, notifier.Notify, in).Get(ctx, nil)
		if err != nil && ctx.Err() == nil {
			j.logger(ctx).Warn("webhook not delivered", "state", string(state), "error", err)
		}
	}
	if state == job.Done {
		// The job closes next; its notice goes out first.
		send(ctx)
		return
	}
	// A failed or dead job waits for revive next, and a receiver that is
	// down must not hold that up.
	workflow.Go(ctx, send)
}
