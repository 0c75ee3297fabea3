package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/internal/metrics"
)

// Interceptor counts every executed activity by outcome (success, failure,
// cancelled) and logs each failure once, at WARN, with the failure kind.
// Idle workers run nothing and so count and log nothing. Every record a
// step or a job logs carries job_id and step (the step's or the job's
// state), besides the SDK's WorkflowID, so that one job's records are found
// by one field in JSON logs.
type Interceptor struct {
	interceptor.WorkerInterceptorBase
	Metrics *metrics.Metrics
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (i *Interceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (w *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&workflowOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

// GetLogger adds the job id; the workflow adds the step, which only it
// knows.
func (w *workflowOutbound) GetLogger(ctx workflow.Context) log.Logger {
	return log.With(w.Next.GetLogger(ctx), "job_id", workflow.GetInfo(ctx).WorkflowExecution.ID)
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (i *Interceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: i.Metrics}
}

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	m *metrics.Metrics
}

func (a *activityInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	return a.Next.Init(&activityOutbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: outbound}})
}

type activityOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
}

func (a *activityOutbound) GetLogger(ctx context.Context) log.Logger {
	info := activity.GetInfo(ctx)
	return log.With(a.Next.GetLogger(ctx), "job_id", info.WorkflowExecution.ID, "step", info.ActivityType.Name)
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	info := activity.GetInfo(ctx)
	outcome := "success"
	if err != nil {
		outcome = "failure"
		kind := "internal"
		var appErr *temporal.ApplicationError
		switch {
		case errors.As(err, &appErr):
			kind = appErr.Type()
		case errors.Is(err, context.Canceled) || temporal.IsCanceledError(err):
			outcome, kind = "cancelled", "cancelled"
		case errors.Is(err, context.DeadlineExceeded):
			kind = "timeout"
		}
		log := activity.GetLogger(ctx)
		attrs := []any{"kind", kind, "error", err.Error()}
		if outcome == "cancelled" {
			// The job was cancelled or the step's lease moved elsewhere:
			// nothing failed here.
			log.Info("step stopped", attrs...)
		} else {
			log.Warn("step failed", attrs...)
		}
	}
	if a.m != nil {
		a.m.ActivityRuns.WithLabelValues(info.ActivityType.Name, outcome).Inc()
	}
	return res, err
}
