package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/internal/job"
)

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
			if err := job.CheckLanguage(req.Language); err != nil {
				return err
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
