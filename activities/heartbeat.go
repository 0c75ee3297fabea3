package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeat reports liveness every interval until stop is called, so that
// a worker that dies in a long call loses its lease quickly while a live
// one keeps it however long the call takes.
func heartbeat(ctx context.Context, interval time.Duration) (stop func()) {
	return heartbeatWith(ctx, interval, nil)
}

// heartbeatWith is heartbeat that also reports progress: details, when not
// nil, gives what a retried attempt needs to resume.
func heartbeatWith(ctx context.Context, interval time.Duration, details func() any) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if details != nil {
					activity.RecordHeartbeat(ctx, details())
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done) }
}
