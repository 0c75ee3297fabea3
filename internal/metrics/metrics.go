// Package metrics defines transcriber's Prometheus metrics and adapts the
// Temporal SDK's metrics to the same registry, so every role serves one
// /metrics with both.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transcriber/transcriber/internal/job"
)

// Metrics are the series transcriber itself reports. Series incremented
// from workflow code go through the Temporal SDK handler (see SDKHandler),
// which skips replays, so a job is counted once however often it is replayed.
type Metrics struct {
	ActivityRuns          *prometheus.CounterVec
	RepliesUndelivered    *prometheus.CounterVec
	Failures              *prometheus.CounterVec
	Jobs                  *prometheus.CounterVec
	JobDuration           prometheus.Histogram
	EngineRequestDuration *prometheus.HistogramVec
}

// Names of the series that workflow code reports through the SDK handler.
const (
	FailuresTotal     = "transcriber_failures_total"
	JobsTotal         = "transcriber_jobs_total"
	JobDurationSecond = "transcriber_job_duration_seconds"
)

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ActivityRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "transcriber_activity_runs_total",
			Help: "Activity executions by activity and outcome (success, failure or cancelled). Idle polling is not counted.",
		}, []string{"activity", "outcome"}),
		RepliesUndelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "transcriber_replies_undelivered_total",
			Help: "Replies that could not be delivered to the sender, by reason.",
		}, []string{"reason"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: FailuresTotal,
			Help: "Jobs that ended failed or dead, by failure kind.",
		}, []string{"kind"}),
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: JobsTotal,
			Help: "Jobs that reached an outcome (done, failed, dead, cancelled), by intake source.",
		}, []string{"source", "outcome"}),
		JobDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    JobDurationSecond,
			Help:    "Time from acceptance to outcome of a job.",
			Buckets: []float64{1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 12 * 3600, 86400},
		}),
		EngineRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "transcriber_engine_request_duration_seconds",
			Help:    "Duration of requests to a speech engine (submit and check), by engine.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 12),
		}, []string{"engine"}),
	}
	reg.MustRegister(m.ActivityRuns, m.RepliesUndelivered, m.Failures, m.Jobs, m.JobDuration, m.EngineRequestDuration)
	// An undelivered reply is rare, and a vector shows nothing before its
	// first increment: start every reason at zero so that rate() and the
	// dashboard show a flat line rather than "no data".
	for _, reason := range job.UndeliveredReasons() {
		m.RepliesUndelivered.WithLabelValues(string(reason))
	}
	return m
}
