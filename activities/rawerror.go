package activities

import (
	"bytes"
	"context"
	"errors"

	"go.temporal.io/sdk/activity"

	"github.com/transcriber/transcriber/internal/engine"
)

// detailsOf makes the details of an application error: none when there is
// nothing to say, so that failures without a detail look as they did.
func detailsOf(detail []FailureDetails) []any {
	for _, d := range detail {
		if d != (FailureDetails{}) {
			return []any{d}
		}
	}
	return nil
}

// rawKept is an engine error whose raw answer this attempt stored.
type rawKept struct {
	err error
	key string
}

func (r *rawKept) Error() string { return r.err.Error() }
func (r *rawKept) Unwrap() error { return r.err }

// keepRawError stores the raw answer of an engine error under this
// attempt's keys, as a successful answer is kept, so that a refusal can be
// read as the provider wrote it. Failing to store it does not change the
// step's failure, which is the news; the store's error names only the key.
func (a *Activities) keepRawError(ctx context.Context, engineName string, err error) error {
	e, ok := engine.AsError(err)
	if !ok || len(e.Raw) == 0 {
		return err
	}
	key := attemptKey(ctx, "raw-error-"+engineName+rawExt(e.RawType))
	if _, perr := a.Blobs.Put(ctx, key, bytes.NewReader(e.Raw)); perr != nil {
		activity.GetLogger(ctx).Warn("raw answer of a failed engine call not stored", "key", key, "error", perr)
		return err
	}
	return &rawKept{err: err, key: key}
}

// failureDetail collects the code and the stored raw answer of an engine
// error.
func failureDetail(err error, e *engine.Error) FailureDetails {
	d := FailureDetails{Code: e.Code}
	var rk *rawKept
	if errors.As(err, &rk) {
		d.RawKey = rk.key
	}
	return d
}
