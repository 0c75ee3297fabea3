package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetrics "go.temporal.io/sdk/client"
)

// SDKHandler lets the Temporal SDK report into a Prometheus registry. The SDK
// emits counters, gauges and timers by name with free-form tags; each name
// becomes one vector whose labels are the tags seen first. Later calls with
// other tags fill missing labels with "" and drop unknown ones, so a
// mismatch costs detail, never a panic. Counters get the conventional
// "_total" suffix and timers become histograms in seconds.
type SDKHandler struct {
	s    *sdkState
	tags map[string]string
}

type sdkState struct {
	reg      prometheus.Registerer
	mu       sync.Mutex
	counters map[string]*prometheus.CounterVec
	gauges   map[string]*prometheus.GaugeVec
	timers   map[string]*prometheus.HistogramVec
	labels   map[string][]string
	// known are transcriber's own series reported from workflow code.
	known *Metrics
}

var _ sdkmetrics.MetricsHandler = SDKHandler{}

// NewSDKHandler returns a handler that registers what the SDK reports with
// reg, routing transcriber's own workflow series to m.
func NewSDKHandler(reg prometheus.Registerer, m *Metrics) SDKHandler {
	return SDKHandler{s: &sdkState{
		reg:      reg,
		counters: map[string]*prometheus.CounterVec{},
		gauges:   map[string]*prometheus.GaugeVec{},
		timers:   map[string]*prometheus.HistogramVec{},
		labels:   map[string][]string{},
		known:    m,
	}}
}

// WithTags returns a handler that adds tags to everything it reports.
func (h SDKHandler) WithTags(tags map[string]string) sdkmetrics.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	maps.Copy(merged, h.tags)
	maps.Copy(merged, tags)
	return SDKHandler{s: h.s, tags: merged}
}

// Counter implements MetricsHandler.
func (h SDKHandler) Counter(name string) sdkmetrics.MetricsCounter {
	if h.s.known != nil {
		switch name {
		case FailuresTotal:
			return counterFunc(func(d int64) { h.s.known.Failures.WithLabelValues(h.tags["kind"]).Add(float64(d)) })
		case JobsTotal:
			return counterFunc(func(d int64) {
				h.s.known.Jobs.WithLabelValues(h.tags["source"], h.tags["outcome"]).Add(float64(d))
			})
		}
	}
	full := sanitize(name)
	if !strings.HasSuffix(full, "_total") {
		full += "_total"
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	vec, ok := h.s.counters[full]
	if !ok {
		vec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: full, Help: "Temporal SDK counter " + name + "."}, h.s.labelNames(full, h.tags))
		if err := h.s.reg.Register(vec); err != nil {
			return counterFunc(func(int64) {})
		}
		h.s.counters[full] = vec
	}
	c := vec.WithLabelValues(h.s.values(full, h.tags)...)
	return counterFunc(func(d int64) { c.Add(float64(d)) })
}

// Gauge implements MetricsHandler.
func (h SDKHandler) Gauge(name string) sdkmetrics.MetricsGauge {
	full := sanitize(name)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	vec, ok := h.s.gauges[full]
	if !ok {
		vec = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: full, Help: "Temporal SDK gauge " + name + "."}, h.s.labelNames(full, h.tags))
		if err := h.s.reg.Register(vec); err != nil {
			return gaugeFunc(func(float64) {})
		}
		h.s.gauges[full] = vec
	}
	g := vec.WithLabelValues(h.s.values(full, h.tags)...)
	return gaugeFunc(g.Set)
}

// Timer implements MetricsHandler.
func (h SDKHandler) Timer(name string) sdkmetrics.MetricsTimer {
	if h.s.known != nil && name == JobDurationSecond {
		return timerFunc(func(d time.Duration) { h.s.known.JobDuration.Observe(d.Seconds()) })
	}
	full := sanitize(name)
	if !strings.HasSuffix(full, "_seconds") {
		full += "_seconds"
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	vec, ok := h.s.timers[full]
	if !ok {
		vec = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    full,
			Help:    "Temporal SDK timer " + name + ".",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 11),
		}, h.s.labelNames(full, h.tags))
		if err := h.s.reg.Register(vec); err != nil {
			return timerFunc(func(time.Duration) {})
		}
		h.s.timers[full] = vec
	}
	o := vec.WithLabelValues(h.s.values(full, h.tags)...)
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

func (s *sdkState) labelNames(name string, tags map[string]string) []string {
	names := make([]string, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		names = append(names, sanitize(k))
	}
	s.labels[name] = names
	return names
}

func (s *sdkState) values(name string, tags map[string]string) []string {
	byLabel := make(map[string]string, len(tags))
	for k, v := range tags {
		byLabel[sanitize(k)] = v
	}
	names := s.labels[name]
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = byLabel[n]
	}
	return vals
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == ':' {
			return r
		}
		return '_'
	}, s)
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }
