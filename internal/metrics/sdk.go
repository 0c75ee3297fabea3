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
// "_total" suffix and timers become histograms in seconds. A name that the
// registry already holds as another metric is not reported at all.
type SDKHandler struct {
	s    *sdkState
	tags map[string]string
}

type sdkState struct {
	reg      prometheus.Registerer
	mu       sync.Mutex
	counters map[string]sdkVec[*prometheus.CounterVec]
	gauges   map[string]sdkVec[*prometheus.GaugeVec]
	timers   map[string]sdkVec[*prometheus.HistogramVec]
	// known are transcriber's own series reported from workflow code.
	known *Metrics
}

// sdkVec keeps a registered vector with its label names. They live together
// because counters, gauges and timers may clean up to the same name; label
// names shared by name would let a failed registration of one kind change
// the labels another kind's vector is fed with.
type sdkVec[V any] struct {
	vec    V
	labels []string
}

var _ sdkmetrics.MetricsHandler = SDKHandler{}

// NewSDKHandler returns a handler that registers what the SDK reports with
// reg, routing transcriber's own workflow series to m.
func NewSDKHandler(reg prometheus.Registerer, m *Metrics) SDKHandler {
	return SDKHandler{s: &sdkState{
		reg:      reg,
		counters: map[string]sdkVec[*prometheus.CounterVec]{},
		gauges:   map[string]sdkVec[*prometheus.GaugeVec]{},
		timers:   map[string]sdkVec[*prometheus.HistogramVec]{},
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
			return counterFunc(func(d int64) { h.s.known.Failures.WithLabelValues(h.tag("kind")).Add(float64(d)) })
		case JobsTotal:
			return counterFunc(func(d int64) {
				h.s.known.Jobs.WithLabelValues(h.tag("source"), h.tag("outcome")).Add(float64(d))
			})
		}
	}
	full := sanitize(name)
	if !strings.HasSuffix(full, "_total") {
		full += "_total"
	}
	labels := labelsOf(h.tags, false)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	v, ok := h.s.counters[full]
	if !ok {
		v.labels = slices.Sorted(maps.Keys(labels))
		v.vec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: full, Help: "Temporal SDK counter " + name + "."}, v.labels)
		if err := h.s.reg.Register(v.vec); err != nil {
			return counterFunc(func(int64) {})
		}
		h.s.counters[full] = v
	}
	c := v.vec.WithLabelValues(values(v.labels, labels)...)
	return counterFunc(func(d int64) { c.Add(float64(d)) })
}

// Gauge implements MetricsHandler.
func (h SDKHandler) Gauge(name string) sdkmetrics.MetricsGauge {
	full := sanitize(name)
	labels := labelsOf(h.tags, false)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	v, ok := h.s.gauges[full]
	if !ok {
		v.labels = slices.Sorted(maps.Keys(labels))
		v.vec = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: full, Help: "Temporal SDK gauge " + name + "."}, v.labels)
		if err := h.s.reg.Register(v.vec); err != nil {
			return gaugeFunc(func(float64) {})
		}
		h.s.gauges[full] = v
	}
	g := v.vec.WithLabelValues(values(v.labels, labels)...)
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
	labels := labelsOf(h.tags, true)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	v, ok := h.s.timers[full]
	if !ok {
		v.labels = slices.Sorted(maps.Keys(labels))
		v.vec = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    full,
			Help:    "Temporal SDK timer " + name + ".",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 11),
		}, v.labels)
		if err := h.s.reg.Register(v.vec); err != nil {
			return timerFunc(func(time.Duration) {})
		}
		h.s.timers[full] = v
	}
	o := v.vec.WithLabelValues(values(v.labels, labels)...)
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

// tag is the value of a tag as a label value; the client panics on invalid
// UTF-8, and tag values such as workflow types come from users.
func (h SDKHandler) tag(key string) string {
	return strings.ToValidUTF8(h.tags[key], "\uFFFD")
}

// labelsOf turns tags into label names and values. Keys that clean up to
// the same name keep the value of the first key in sorted order, so the
// outcome does not depend on map order; duplicate label names would make
// the registry refuse the whole metric. Histograms reserve "le" for their
// buckets and panic on a label of that name.
func labelsOf(tags map[string]string, histogram bool) map[string]string {
	out := make(map[string]string, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		n := labelName(k)
		if histogram && n == "le" {
			n = "_le"
		}
		if _, dup := out[n]; !dup {
			out[n] = strings.ToValidUTF8(tags[k], "\uFFFD")
		}
	}
	return out
}

// values orders the label values as names, the labels a vector was created
// with: missing ones become "" and others are dropped.
func values(names []string, labels map[string]string) []string {
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = labels[n]
	}
	return vals
}

// labelName makes a tag key a label name the classic exposition format and
// the registry accept: no ":" (metric names only), no leading digit, not
// empty and not starting with the "__" the registry keeps for itself.
func labelName(k string) string {
	n := strings.ReplaceAll(sanitize(k), ":", "_")
	for strings.HasPrefix(n, "__") {
		n = n[1:]
	}
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		n = "_" + n
	}
	return n
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
