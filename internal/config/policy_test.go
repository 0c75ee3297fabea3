package config

import (
	"slices"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/job"
)

// The persistence defaults are declared once, in internal/job; the
// settings show them as people type them and read them back unchanged.
func TestPolicyDefaultsAreTheJobs(t *testing.T) {
	c, err := Load(env())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.RetrySchedule, job.DefaultBackoff()) || c.MaxAttempts != job.DefaultMaxAttempts || c.ParkFor != job.DefaultParkFor {
		t.Errorf("defaults %v, %d, %v; want job's %v, %d, %v",
			c.RetrySchedule, c.MaxAttempts, c.ParkFor, job.DefaultBackoff(), job.DefaultMaxAttempts, job.DefaultParkFor)
	}
	want := map[string]string{
		"TRANSCRIBER_RETRY_SCHEDULE": "30s,2m,10m,30m",
		"TRANSCRIBER_MAX_ATTEMPTS":   "5",
		"TRANSCRIBER_PARK_FOR":       "720h",
	}
	for _, s := range Settings() {
		if w, ok := want[s[0]]; ok && s[2] != w {
			t.Errorf("default of %s = %q; want %q", s[0], s[2], w)
		}
	}
	for d, want := range map[time.Duration]string{
		30 * time.Second: "30s", 2 * time.Minute: "2m", 90 * time.Minute: "1h30m", 720 * time.Hour: "720h", 1500 * time.Millisecond: "1.5s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q; want %q", d, got, want)
		}
	}
}
