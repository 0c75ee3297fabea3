package metrics

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNewRegistersAllSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	// Vectors without children are not gathered, so give each one a child.
	m.ActivityRuns.WithLabelValues("convert", "success").Inc()
	m.RepliesUndelivered.WithLabelValues("blocked").Inc()
	m.Failures.WithLabelValues("engine_rejected").Inc()
	m.Jobs.WithLabelValues("cli", "done").Inc()
	m.JobDuration.Observe(1)
	m.EngineRequestDuration.WithLabelValues("local").Observe(0.1)

	got := gather(t, reg)
	tests := []struct {
		name, typ string
		labels    []string
	}{
		{name: "transcriber_activity_runs_total", typ: "COUNTER", labels: []string{"activity", "outcome"}},
		{name: "transcriber_replies_undelivered_total", typ: "COUNTER", labels: []string{"reason"}},
		{name: FailuresTotal, typ: "COUNTER", labels: []string{"kind"}},
		{name: JobsTotal, typ: "COUNTER", labels: []string{"outcome", "source"}},
		{name: JobDurationSecond, typ: "HISTOGRAM"},
		{name: "transcriber_engine_request_duration_seconds", typ: "HISTOGRAM", labels: []string{"engine"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := got[tc.name]
			if !ok {
				t.Fatalf("gathered %v; want %s among them", names(got), tc.name)
			}
			if f.typ != tc.typ {
				t.Errorf("%s type = %s; want %s", tc.name, f.typ, tc.typ)
			}
			if !slices.Equal(f.labels, tc.labels) {
				t.Errorf("%s labels = %q; want %q", tc.name, f.labels, tc.labels)
			}
			if f.help == "" {
				t.Errorf("%s help is empty; want a description", tc.name)
			}
		})
	}
	if len(got) != len(tests) {
		t.Errorf("gathered %d series %v; want %d", len(got), names(got), len(tests))
	}
}

func TestNewRefusesASecondRegistration(t *testing.T) {
	// Two sets on one registry would split counts between them; New panics
	// so the mistake shows at start-up.
	reg := prometheus.NewRegistry()
	New(reg)
	defer func() {
		if recover() == nil {
			t.Errorf("second New on one registry did not panic; want a panic")
		}
	}()
	New(reg)
}

func TestJobDurationBuckets(t *testing.T) {
	// Jobs take from seconds to a day; a minute-long job must not land in
	// the +Inf bucket nor a day-long one in the first.
	reg := prometheus.NewRegistry()
	m := New(reg)
	for _, v := range []float64{0.5, 90, 86400} {
		m.JobDuration.Observe(v)
	}
	if got := testutil.CollectAndCount(m.JobDuration, JobDurationSecond); got != 1 {
		t.Errorf("series count = %d; want 1", got)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != JobDurationSecond {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if got := h.GetSampleCount(); got != 3 {
			t.Errorf("sample count = %d; want 3", got)
		}
		buckets := h.GetBucket()
		first, last := buckets[0], buckets[len(buckets)-1]
		if first.GetUpperBound() != 1 || first.GetCumulativeCount() != 1 {
			t.Errorf("first bucket = le %v count %d; want le 1 count 1", first.GetUpperBound(), first.GetCumulativeCount())
		}
		if last.GetUpperBound() != 86400 || last.GetCumulativeCount() != 3 {
			t.Errorf("last bucket = le %v count %d; want le 86400 count 3", last.GetUpperBound(), last.GetCumulativeCount())
		}
	}
}
