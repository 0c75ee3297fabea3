package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: Undelivered replies start at zero
func TestUndeliveredReasons(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	reasons := job.UndeliveredReasons()
	if got := testutil.CollectAndCount(m.RepliesUndelivered); got != len(reasons) {
		t.Errorf("series of a fresh RepliesUndelivered = %d; want one per reason, %d", got, len(reasons))
	}
	for _, reason := range reasons {
		if got := testutil.ToFloat64(m.RepliesUndelivered.WithLabelValues(string(reason))); got != 0 {
			t.Errorf("replies_undelivered_total{reason=%q} = %v; want 0", reason, got)
		}
	}
}
