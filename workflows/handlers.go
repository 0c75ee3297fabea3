package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/internal/job"
)

// handle registers the query, the updates and the signals.
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
	// The update is the revive a caller waits on: the validator refuses a
	// job that is not parked, so the caller learns at once that nothing
	// happened and why, instead of asking first and signalling after (a
	// race). The signal stays for the Web UI and the Temporal CLI.
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRevive,
		func(ctx workflow.Context) (Status, error) {
			j.revived = true
			return j.s, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context) error {
			if !j.parked {
				return temporal.NewApplicationError(
					fmt.Sprintf("the job is %s; only failed or dead jobs can be revived", j.s.State),
					ErrTypeNotRevivable, j.s.State)
			}
			return nil
		}},
	); err != nil {
		return fmt.Errorf("register %s update: %w", UpdateRevive, err)
	}
	callbacks := workflow.GetSignalChannel(ctx, SignalEngineCallback)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var cb EngineCallback
			callbacks.Receive(ctx, &cb)
			if ctx.Err() != nil {
				return
			}
			// A callback is only a hint to check now. One the job has no
			// wait for is dropped with a record, so that a late or stray
			// call is visible and the set stays as small as the job's
			// operations.
			switch {
			case j.parked:
				j.logger(ctx).Info("engine callback dropped", "operation_id", cb.OperationID,
					"reason", "the job is failed or dead; a revive checks its operations anyway")
			case !j.awaits(cb.OperationID):
				j.logger(ctx).Info("engine callback dropped", "operation_id", cb.OperationID,
					"reason", "the job waits for no such operation")
			default:
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
