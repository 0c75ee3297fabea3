package workflows

import (
	"encoding/json"
	"os"
	"path/filepath"
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
		// Added with the language check.
		"unsupported_language",
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

// The error types in recorded histories are declared kinds: a kind that
// running jobs carry cannot be dropped from the vocabulary unnoticed.
func TestRecordedErrorTypesAreDeclared(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("histories: %v, %v", files, err)
	}
	seen := 0
	var walk func(name string, v any)
	walk = func(name string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if info, ok := v["applicationFailureInfo"].(map[string]any); ok {
				typ, _ := info["type"].(string)
				seen++
				if !job.Kind(typ).Declared() && !slices.Contains(job.WebhookErrors(), job.WebhookError(typ)) {
					t.Errorf("%s: error type %q is not declared in internal/job", name, typ)
				}
			}
			for _, e := range v {
				walk(name, e)
			}
		case []any:
			for _, e := range v {
				walk(name, e)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		walk(filepath.Base(f), v)
	}
	if seen == 0 {
		t.Error("no application failures in the recorded histories; the test reads nothing")
	}
}
