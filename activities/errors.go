package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
)

// verdict is a definitive failure: the workflow fails the job at once.
// detail, when given, is what the workflow puts on the job's failure.
func verdict(kind job.Kind, msg string, detail ...FailureDetails) error {
	return temporal.NewApplicationErrorWithOptions(msg, string(kind), temporal.ApplicationErrorOptions{
		NonRetryable: true,
		Details:      detailsOf(detail),
		// The interceptor logs every failure once at WARN; benign keeps the
		// SDK from logging it again at ERROR.
		Category: temporal.ApplicationErrorCategoryBenign,
	})
}

// classify turns any error of a step into the application error the
// workflow acts on. It is the only place where errors get their kind, and
// every application error it returns names the attempt that failed.
func classify(ctx context.Context, call Call, err error) error {
	return withAttempt(ctx, kindOf(ctx, call, err))
}

// kindOf gives an error of a step its kind.
func kindOf(ctx context.Context, call Call, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// Cancelled or out of time: Temporal already knows, and its own
		// verdict (cancel or timeout) is the one that counts.
		return err
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err
	}
	var in *audio.InputError
	if errors.As(err, &in) {
		kind := job.UnsupportedFormat
		if errors.Is(in.Err, audio.ErrEmpty) {
			kind = job.EmptyAudio
		}
		return verdict(kind, in.Error())
	}
	if e, ok := engine.AsError(err); ok {
		d := failureDetail(err, e)
		if e.Kind.Verdict() || e.Final {
			return verdict(e.Kind, e.Error(), d)
		}
		return retry(ctx, call, e.Kind, e.Error(), e.RetryAfter, d)
	}
	var ve verdictError
	if errors.As(err, &ve) {
		if kind, ok := ve.Verdict(); ok {
			return verdict(kind, err.Error())
		}
	}
	var sf serviceFailure
	if errors.As(err, &sf) {
		if !sf.Temporary() {
			return verdict(job.ServiceRefused, err.Error())
		}
		return retry(ctx, call, job.ServiceError, err.Error(), sf.RetryDelay())
	}
	if errors.Is(err, errIntakeNotRunning) {
		return retry(ctx, call, job.IntakeNotRunning, err.Error(), 0)
	}
	return retry(ctx, call, job.Internal, err.Error(), 0)
}

// FailureDetails travel with a step's failure as its application error's
// details, for the workflow to record on the job's failure what only the
// attempt knows. The raw answer itself stays in the blob store: it may
// quote recognised text, and details end up in the history and the Web UI.
type FailureDetails struct {
	// Attempt is the attempt of the step that failed, from 1. Temporal
	// counts a timed-out attempt too, but no details come back from it.
	Attempt int `json:"attempt,omitempty"`
	// Code is the provider's own error code.
	Code string `json:"code,omitempty"`
	// RawKey is the key of the provider's raw answer in the blob store.
	RawKey string `json:"raw_key,omitempty"`
}

// withAttempt adds the failed attempt to an application error's details,
// beside what the step put there. Details another maker wrote are left as
// they are: details are positional, and only their maker can read them.
func withAttempt(ctx context.Context, err error) error {
	appErr, ok := err.(*temporal.ApplicationError)
	if !ok || !activity.IsActivity(ctx) {
		return err
	}
	var d FailureDetails
	if appErr.HasDetails() && appErr.Details(&d) != nil {
		return err
	}
	d.Attempt = int(activity.GetInfo(ctx).Attempt)
	return temporal.NewApplicationErrorWithOptions(appErr.Message(), appErr.Type(), temporal.ApplicationErrorOptions{
		NonRetryable:   appErr.NonRetryable(),
		Cause:          appErr.Unwrap(),
		Details:        []any{d},
		NextRetryDelay: appErr.NextRetryDelay(),
		Category:       appErr.Category(),
	})
}

// DetailsOf reads the details classify put on the failure of one attempt.
// It looks at err itself, not its causes: a cause's details belong to
// another failure.
func DetailsOf(err error) (FailureDetails, bool) {
	var d FailureDetails
	appErr, ok := err.(*temporal.ApplicationError)
	if !ok || !appErr.HasDetails() || appErr.Details(&d) != nil || d == (FailureDetails{}) {
		return FailureDetails{}, false
	}
	return d, true
}

// errIntakeNotRunning: the step needs the intake's service and this worker
// has no connection to it. Another worker may, so it is retried.
var errIntakeNotRunning = errors.New("the intake is not running here")

// retry is a temporary failure. Its delay follows the job's back-off
// schedule exactly, and never undercuts a wait the engine asked for.
func retry(ctx context.Context, call Call, kind job.Kind, msg string, retryAfter time.Duration, detail ...FailureDetails) error {
	var delay time.Duration
	if n := len(call.Backoff); n > 0 {
		i := int(activity.GetInfo(ctx).Attempt) - 1
		if i >= n {
			i = n - 1
		}
		if i < 0 {
			i = 0
		}
		delay = call.Backoff[i]
	}
	delay = max(delay, retryAfter)
	return temporal.NewApplicationErrorWithOptions(msg, string(kind), temporal.ApplicationErrorOptions{
		NextRetryDelay: delay,
		Category:       temporal.ApplicationErrorCategoryBenign,
		Details:        detailsOf(detail),
	})
}
