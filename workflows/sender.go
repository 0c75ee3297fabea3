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

// replyInStatusMessage marks the change that lets a reply that fits one
// message replace the status message's text, so that a retry after a
// crash edits it again instead of sending it twice, and stops the
// progress shown there from overwriting the reply. Jobs started before it
// send every reply and end their status message with "done".
const replyInStatusMessage = "reply-in-status-message"

func (j *jobState) reply(ctx workflow.Context, state job.State, f *job.Failure) error {
	r := j.s.Recipient
	if r == nil &&
		(j.s.Lean || workflow.GetVersion(ctx, replyOnlyWhenExpected, workflow.DefaultVersion, 1) >= 1) {
		return nil
	}
	opts := j.stepOptions(ctx, replyTimeout, heartbeatTimeout)
	if state == job.Done {
		opts = j.deliveryOptions(ctx)
	}
	in := activities.ReplyInput{
		Call: j.call(),
		Reply: activities.Reply{
			JobID: j.s.JobID, Source: j.s.Source, Recipient: r,
			State: state, TranscriptKey: j.s.TranscriptKey, Failure: f, Language: j.s.Language,
		},
	}
	// Only jobs with a status message ask for the version, so the
	// histories of the others replay unchanged.
	if r == nil || r.StatusMessage == "" ||
		!j.s.Lean && workflow.GetVersion(ctx, replyInStatusMessage, workflow.DefaultVersion, 1) < 1 {
		return workflow.ExecuteActivity(opts, a.SendReply, in).Get(ctx, nil)
	}
	in.UseStatusMessage = true
	var d activities.Delivery
	if err := workflow.ExecuteActivity(opts, a.SendReply, in).Get(ctx, &d); err != nil {
		return err
	}
	j.s.StatusMessageTaken = d.InStatusMessage
	return nil
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
	if r == nil || r.StatusMessage == "" || j.s.StatusMessageTaken || ctx.Err() != nil {
		return
	}
	in := activities.NoticeInput{JobID: j.s.JobID, Source: j.s.Source, Recipient: *r, State: s}
	var err error
	if j.s.Lean {
		// Editing the status message again is harmless, so a worker lost
		// in the middle costs nothing and the edit needs no task of its own.
		err = workflow.ExecuteLocalActivity(j.courtesyLocal(ctx), a.ShowProgress, in).Get(ctx, nil)
	} else {
		err = workflow.ExecuteActivity(j.courtesy(ctx), a.ShowProgress, in).Get(ctx, nil)
	}
	if err != nil && ctx.Err() == nil {
		j.logger(ctx).Info("status message not updated", "state", string(s), "error", err)
	}
}
