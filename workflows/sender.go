package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// replyOnlyWhenExpected marks the change that stopped scheduling a reply
// step for jobs whose sender expects none (the command line, HTTP): it was a
// round trip that did nothing. Jobs started before it still run the step.
const replyOnlyWhenExpected = "reply-only-when-expected"

func (j *jobState) reply(ctx workflow.Context, state job.State, f *job.Failure) error {
	if j.s.Recipient == nil &&
		workflow.GetVersion(ctx, replyOnlyWhenExpected, workflow.DefaultVersion, 1) >= 1 {
		return nil
	}
	opts := j.stepOptions(ctx, replyTimeout, heartbeatTimeout)
	if state == job.Done {
		opts = j.deliveryOptions(ctx)
	}
	return workflow.ExecuteActivity(opts, a.SendReply, activities.ReplyInput{
		Call: j.call(),
		Reply: activities.Reply{
			JobID: j.s.JobID, Source: j.s.Source, Recipient: j.s.Recipient,
			State: state, TranscriptKey: j.s.TranscriptKey, Failure: f, Language: j.s.Language,
		},
	}).Get(ctx, nil)
}

// acknowledge tells the sender once that the recording was accepted.
func (j *jobState) acknowledge(ctx workflow.Context) {
	r := j.s.Recipient
	if r == nil || r.StatusMessage != "" || j.s.Acknowledged {
		return
	}
	j.s.Acknowledged = true
	var id job.Ref
	err := workflow.ExecuteActivity(j.courtesy(ctx), a.Acknowledge, activities.NoticeInput{
		JobID: j.s.JobID, Source: j.s.Source, Recipient: *r,
	}).Get(ctx, &id)
	if err != nil {
		j.logger(ctx).Warn("sender not told of acceptance", "error", err)
		return
	}
	r.StatusMessage = id
}

func (j *jobState) showProgress(ctx workflow.Context, s job.State) {
	r := j.s.Recipient
	if r == nil || r.StatusMessage == "" || ctx.Err() != nil {
		return
	}
	err := workflow.ExecuteActivity(j.courtesy(ctx), a.ShowProgress, activities.NoticeInput{
		JobID: j.s.JobID, Source: j.s.Source, Recipient: *r, State: s,
	}).Get(ctx, nil)
	if err != nil && ctx.Err() == nil {
		j.logger(ctx).Info("status message not updated", "state", string(s), "error", err)
	}
}
