package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		name, expr string
		want       []string
	}{
		{"bare name", `transcriber_jobs_total`, []string{"transcriber_jobs_total"}},
		{"matchers and range", `rate(transcriber_jobs_total{outcome="done", source=~"tele.*"}[5m])`, []string{"transcriber_jobs_total"}},
		{"aggregation clause before", `sum by (kind) (rate(transcriber_failures_total[$__rate_interval]))`, []string{"transcriber_failures_total"}},
		{"aggregation clause after", `sum(rate(transcriber_failures_total[5m])) without (instance, job)`, []string{"transcriber_failures_total"}},
		{"histogram quantile", `histogram_quantile(0.95, sum by (le, engine) (rate(transcriber_engine_request_duration_seconds_bucket[1h30m])))`,
			[]string{"transcriber_engine_request_duration_seconds_bucket"}},
		{"binary operation with matching", `sum by (activity) (rate(a_total{outcome="failure"}[5m])) / on (activity) group_left (x) sum by (activity) (rate(b_total[5m])) * 60`,
			[]string{"a_total", "b_total"}},
		{"keywords, numbers and offsets", `x > bool 1e3 and y offset 5m or z unless w == inf`, []string{"w", "x", "y", "z"}},
		{"subquery and at modifier", `max_over_time(rate(x[5m])[1h:1m] @ end())`, []string{"x"}},
		{"strings with braces", `label_replace(up{job="a{b}"}, "dst", "$1", "src", "(.*)")`, []string{"up"}},
		{"name matcher", `{__name__="temporal_request_total", namespace="default"}`, []string{"temporal_request_total"}},
		{"grafana variables", `sum by (job) (rate(x{instance=~"$instance", job="${job:regex}"}[$__interval]))`, []string{"x"}},
		{"duplicates once, sorted", `b + a + b`, []string{"a", "b"}},
		{"no metric", `vector(1)`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MetricNames(tc.expr)
			if err != nil {
				t.Fatalf("MetricNames(%q): %v", tc.expr, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("MetricNames(%q) = %q; want %q", tc.expr, got, tc.want)
			}
		})
	}
}

func TestMetricNamesRefusesBrokenExpressions(t *testing.T) {
	for _, expr := range []string{`rate(x{job="a"[5m])`, `x{job="a}`, `rate(x[5m)`, `x}`} {
		if got, err := MetricNames(expr); err == nil {
			t.Errorf("MetricNames(%q) = %q; want an error", expr, got)
		}
	}
}

func TestSampleNames(t *testing.T) {
	got := SampleNames(`# HELP a_total A.
# TYPE a_total counter
a_total{x="1"} 3
a_total{x="2"} 4
# TYPE h_seconds histogram
h_seconds_bucket{le="+Inf"} 1
h_seconds_sum 0.5
h_seconds_count 1
g 7
`)
	want := []string{"a_total", "g", "h_seconds_bucket", "h_seconds_count", "h_seconds_sum"}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("SampleNames = %q; want %q", names, want)
	}
}

// Scenario: Every dashboard query selects transcriber's or the Temporal SDK's series
func TestDashboardQueries(t *testing.T) {
	d, err := LoadDashboard(filepath.Join(root, "deploy", "grafana", "dashboards", "transcriber.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q; want both", d.UID, d.Title)
	}
	queries := d.Queries()
	if len(queries) < 10 {
		t.Fatalf("dashboard has %d queries; want the panels of the jobs, failures, replies, engines and task queue", len(queries))
	}
	shown := map[string]bool{}
	for _, q := range queries {
		names, err := MetricNames(q.Expr)
		if err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("panel %q query %q selects no metric", q.Panel, q.Expr)
		}
		for _, n := range names {
			shown[n] = true
			if !strings.HasPrefix(n, "transcriber_") && !strings.HasPrefix(n, "temporal_") && n != "up" {
				t.Errorf("panel %q selects %s, which transcriber does not export", q.Panel, n)
			}
			if strings.Contains(q.Expr, "histogram_quantile") && strings.HasSuffix(n, "_seconds") {
				t.Errorf("panel %q takes a quantile of %s; histograms are read from their _bucket series", q.Panel, n)
			}
		}
	}
	// What the operator needs to see is all there.
	for _, n := range []string{
		"transcriber_jobs_total", "transcriber_failures_total", "transcriber_replies_undelivered_total",
		"transcriber_engine_request_duration_seconds_bucket", "transcriber_activity_runs_total",
		"temporal_activity_schedule_to_start_latency_seconds_bucket",
	} {
		if !shown[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}
