package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: The retry policies never retry exactly the declared verdicts
func TestNonRetryableErrorTypes(t *testing.T) {
	// The sets as they were spelled out by hand before they were derived
	// from internal/job: the derivation must not have changed them.
	steps := []string{
		"empty_audio", "unsupported_format", "too_long", "no_speech",
		"engine_rejected", "engine_unauthorized", "operation_failed", "engine_not_configured",
		"file_too_big", "source_file_missing", "service_refused",
	}
	webhooks := []string{"webhook_refused", "webhook_not_configured"}
	p := Policy{Backoff: []time.Duration{time.Second}, MaxAttempts: 5}
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"steps", p.retryPolicy().NonRetryableErrorTypes, steps},
		{"webhooks", notifyRetry.NonRetryableErrorTypes, webhooks},
	} {
		got := slices.Sorted(slices.Values(tc.got))
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: NonRetryableErrorTypes = %q; want %q", tc.name, got, want)
		}
	}
	for _, k := range job.Kinds() {
		if got := slices.Contains(p.retryPolicy().NonRetryableErrorTypes, string(k)); got != k.Verdict() {
			t.Errorf("%s: never retried = %v; want its Verdict(), %v", k, got, k.Verdict())
		}
	}
}
