// Package logging makes every record about a job findable by one field.
// Temporal's SDK logs its own records about workflows and activities (an
// activity's error, a workflow task's panic) with WorkflowID and
// ActivityType; transcriber's records carry job_id and step. JobFields
// gives the SDK's records the same two fields, so that an operator filters
// one job's records, whoever wrote them, with job_id alone.
package logging

import (
	"context"
	"log/slog"
)

// Field names shared by every record about a job.
const (
	JobID = "job_id"
	Step  = "step"
)

// The SDK's names (go.temporal.io/sdk/internal/log tags).
const (
	sdkWorkflowID   = "WorkflowID"
	sdkActivityType = "ActivityType"
)

// JobFields wraps h so that a record with the SDK's WorkflowID also has
// job_id, and step: the activity type for activity records, "workflow" for
// the SDK's records about a workflow task. Records that already have them
// keep their own.
func JobFields(h slog.Handler) slog.Handler { return &handler{next: h} }

type handler struct {
	next slog.Handler
	// What the attributes bound with WithAttrs already say.
	workflowID, activityType string
	hasJobID, hasStep        bool
	// grouped is set once WithGroup was called: later attributes are not
	// at the top level, so they say nothing about the record's fields.
	grouped bool
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	workflowID, activityType, hasJobID, hasStep := h.workflowID, h.activityType, h.hasJobID, h.hasStep
	if !h.grouped {
		r.Attrs(func(a slog.Attr) bool {
			workflowID, activityType, hasJobID, hasStep = note(a, workflowID, activityType, hasJobID, hasStep)
			return true
		})
	}
	if workflowID == "" {
		return h.next.Handle(ctx, r)
	}
	var extra []slog.Attr
	if !hasJobID {
		extra = append(extra, slog.String(JobID, workflowID))
	}
	if !hasStep {
		step := activityType
		if step == "" {
			step = "workflow"
		}
		extra = append(extra, slog.String(Step, step))
	}
	if len(extra) > 0 {
		r = r.Clone()
		r.AddAttrs(extra...)
	}
	return h.next.Handle(ctx, r)
}

func note(a slog.Attr, workflowID, activityType string, hasJobID, hasStep bool) (string, string, bool, bool) {
	switch a.Key {
	case sdkWorkflowID:
		workflowID = a.Value.String()
	case sdkActivityType:
		activityType = a.Value.String()
	case JobID:
		hasJobID = true
	case Step:
		hasStep = true
	}
	return workflowID, activityType, hasJobID, hasStep
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	if !h.grouped {
		for _, a := range attrs {
			c.workflowID, c.activityType, c.hasJobID, c.hasStep = note(a, c.workflowID, c.activityType, c.hasJobID, c.hasStep)
		}
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.grouped = c.grouped || name != ""
	return &c
}
