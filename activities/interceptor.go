package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/internal/metrics"
)

// Interceptor counts every executed activity by outcome (success, failure,
// cancelled) and logs each failure once, at WARN, with the job id and
// failure kind. Idle workers run
// nothing and so count and log nothing.
type Interceptor struct {
	interceptor.WorkerInterceptorBase
	Metrics *metrics.Metrics
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (i *Interceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: i.Metrics}
}

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	m *metrics.Metrics
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
		attrs := []any{"job_id", info.WorkflowExecution.ID, "activity", info.ActivityType.Name, "kind", kind, "error", err.Error()}
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
