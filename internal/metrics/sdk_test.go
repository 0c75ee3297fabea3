package metrics

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdkmetrics "go.temporal.io/sdk/client"
)

// family is the part of a gathered metric family the tests compare, taken
// through the getters so the tests need no import of the protobuf types.
type family struct {
	typ, help string
	labels    []string
	series    []series
}

type series struct {
	labels map[string]string
	value  float64 // counter or gauge value, histogram sum
	count  uint64  // histogram sample count
}

func names(fams map[string]family) []string {
	return slices.Sorted(maps.Keys(fams))
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]family {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]family{}
	for _, f := range fams {
		fam := family{typ: f.GetType().String(), help: f.GetHelp()}
		for i, m := range f.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
				if i == 0 {
					fam.labels = append(fam.labels, l.GetName())
				}
			}
			switch fam.typ {
			case "COUNTER":
				s.value = m.GetCounter().GetValue()
			case "GAUGE":
				s.value = m.GetGauge().GetValue()
			case "HISTOGRAM":
				s.value, s.count = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
			}
			fam.series = append(fam.series, s)
		}
		out[f.GetName()] = fam
	}
	return out
}

// only returns the single series of name, failing the test otherwise.
func only(t *testing.T, fams map[string]family, name string) (family, series) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("gathered %v; want %s among them", names(fams), name)
	}
	if len(f.series) != 1 {
		t.Fatalf("%s has %d series %+v; want 1", name, len(f.series), f.series)
	}
	return f, f.series[0]
}

func newHandler(t *testing.T) (*prometheus.Registry, *Metrics, SDKHandler) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := New(reg)
	return reg, m, NewSDKHandler(reg, m)
}

func TestSDKCounterNames(t *testing.T) {
	tests := []struct {
		name, sdkName, want string
	}{
		{name: "gets _total", sdkName: "temporal_request", want: "temporal_request_total"},
		{name: "keeps _total", sdkName: "temporal_workflow_completed_total", want: "temporal_workflow_completed_total"},
		{name: "invalid characters", sdkName: "temporal.long-poll", want: "temporal_long_poll_total"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, h := newHandler(t)
			h.Counter(tc.sdkName).Inc(2)
			h.Counter(tc.sdkName).Inc(3)
			f, s := only(t, gather(t, reg), tc.want)
			if f.typ != "COUNTER" {
				t.Errorf("%s type = %s; want COUNTER", tc.want, f.typ)
			}
			if s.value != 5 {
				t.Errorf("%s = %v; want 5", tc.want, s.value)
			}
		})
	}
}

func TestSDKTimerNames(t *testing.T) {
	tests := []struct {
		name, sdkName, want string
	}{
		{name: "gets _seconds", sdkName: "temporal_request_latency", want: "temporal_request_latency_seconds"},
		{name: "keeps _seconds", sdkName: "temporal_activity_execution_seconds", want: "temporal_activity_execution_seconds"},
		{name: "invalid characters", sdkName: "temporal-poll.latency", want: "temporal_poll_latency_seconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, h := newHandler(t)
			h.Timer(tc.sdkName).Record(1500 * time.Millisecond)
			h.Timer(tc.sdkName).Record(250 * time.Millisecond)
			f, s := only(t, gather(t, reg), tc.want)
			if f.typ != "HISTOGRAM" {
				t.Errorf("%s type = %s; want HISTOGRAM", tc.want, f.typ)
			}
			if s.count != 2 || s.value != 1.75 {
				t.Errorf("%s count, sum = %d, %v; want 2, 1.75 (seconds)", tc.want, s.count, s.value)
			}
		})
	}
}

func TestSDKGauge(t *testing.T) {
	tests := []struct {
		name    string
		updates []float64
		want    float64
	}{
		{name: "one value", updates: []float64{3}, want: 3},
		{name: "last value wins", updates: []float64{3, 10, 7}, want: 7},
		{name: "down to zero", updates: []float64{5, 0}, want: 0},
		{name: "fractional", updates: []float64{0.25}, want: 0.25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, h := newHandler(t)
			for _, v := range tc.updates {
				h.WithTags(map[string]string{"poller_type": "workflow_task"}).Gauge("temporal_num_pollers").Update(v)
			}
			f, s := only(t, gather(t, reg), "temporal_num_pollers")
			if f.typ != "GAUGE" {
				t.Errorf("type = %s; want GAUGE", f.typ)
			}
			if s.value != tc.want {
				t.Errorf("temporal_num_pollers = %v; want %v", s.value, tc.want)
			}
			if s.labels["poller_type"] != "workflow_task" {
				t.Errorf("labels = %v; want poller_type=workflow_task", s.labels)
			}
		})
	}
}

func TestWithTags(t *testing.T) {
	tests := []struct {
		name          string
		parent, extra map[string]string
		want          map[string]string
	}{
		{name: "adds", parent: map[string]string{"a": "1"}, extra: map[string]string{"b": "2"}, want: map[string]string{"a": "1", "b": "2"}},
		{name: "overrides", parent: map[string]string{"a": "1", "b": "2"}, extra: map[string]string{"a": "9"}, want: map[string]string{"a": "9", "b": "2"}},
		{name: "from none", parent: nil, extra: map[string]string{"a": "1"}, want: map[string]string{"a": "1"}},
		{name: "nothing added", parent: map[string]string{"a": "1"}, extra: nil, want: map[string]string{"a": "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, root := newHandler(t)
			var parent sdkmetrics.MetricsHandler = root
			if tc.parent != nil {
				parent = root.WithTags(tc.parent)
			}
			before := maps.Clone(parent.(SDKHandler).tags)
			child := parent.WithTags(tc.extra).(SDKHandler)
			if !maps.Equal(child.tags, tc.want) {
				t.Errorf("child tags = %v; want %v", child.tags, tc.want)
			}
			if got := parent.(SDKHandler).tags; !maps.Equal(got, before) {
				t.Errorf("parent tags after WithTags = %v; want unchanged %v", got, before)
			}
			// The SDK may reuse its map; the handler must have copied it.
			for k := range tc.extra {
				tc.extra[k] = "mutated"
			}
			if !maps.Equal(child.tags, tc.want) {
				t.Errorf("child tags after caller changed its map = %v; want %v", child.tags, tc.want)
			}
		})
	}
}

func TestWithTagsLabelsSeries(t *testing.T) {
	reg, _, h := newHandler(t)
	parent := h.WithTags(map[string]string{"namespace": "default"})
	parent.WithTags(map[string]string{"task_queue": "q"}).Counter("temporal_request").Inc(1)
	parent.WithTags(map[string]string{"task_queue": "other"}).Counter("temporal_request").Inc(1)
	f := gather(t, reg)["temporal_request_total"]
	if len(f.series) != 2 {
		t.Fatalf("series = %+v; want two, one per task queue", f.series)
	}
	for _, s := range f.series {
		if s.labels["namespace"] != "default" || s.value != 1 {
			t.Errorf("series %v = %v; want namespace=default and 1", s.labels, s.value)
		}
	}
}

func TestKnownSeriesRouted(t *testing.T) {
	workflowTags := map[string]string{"namespace": "default", "task_queue": "transcriber", "workflow_type": "TranscribeRecording"}
	tests := []struct {
		name   string
		report func(h sdkmetrics.MetricsHandler)
		check  func(t *testing.T, m *Metrics)
		// families are all that may be gathered: the routed series, the
		// job duration histogram, which is gathered even when empty, and
		// the undelivered replies, which start at zero.
		families []string
	}{
		{
			name: "jobs",
			report: func(h sdkmetrics.MetricsHandler) {
				h.WithTags(map[string]string{"source": "cli", "outcome": "done"}).Counter(JobsTotal).Inc(2)
				h.WithTags(map[string]string{"source": "telegram", "outcome": "failed"}).Counter(JobsTotal).Inc(1)
			},
			check: func(t *testing.T, m *Metrics) {
				if got := testutil.ToFloat64(m.Jobs.WithLabelValues("cli", "done")); got != 2 {
					t.Errorf("jobs{cli,done} = %v; want 2", got)
				}
				if got := testutil.ToFloat64(m.Jobs.WithLabelValues("telegram", "failed")); got != 1 {
					t.Errorf("jobs{telegram,failed} = %v; want 1", got)
				}
			},
			families: []string{JobDurationSecond, JobsTotal, "transcriber_replies_undelivered_total"},
		},
		{
			name: "failures",
			report: func(h sdkmetrics.MetricsHandler) {
				h.WithTags(map[string]string{"kind": "engine_rejected"}).Counter(FailuresTotal).Inc(1)
				h.WithTags(map[string]string{"kind": "engine_rejected"}).Counter(FailuresTotal).Inc(1)
			},
			check: func(t *testing.T, m *Metrics) {
				if got := testutil.ToFloat64(m.Failures.WithLabelValues("engine_rejected")); got != 2 {
					t.Errorf("failures{engine_rejected} = %v; want 2", got)
				}
			},
			families: []string{FailuresTotal, JobDurationSecond, "transcriber_replies_undelivered_total"},
		},
		{
			name: "job duration",
			report: func(h sdkmetrics.MetricsHandler) {
				h.Timer(JobDurationSecond).Record(90 * time.Second)
				h.Timer(JobDurationSecond).Record(30 * time.Second)
			},
			check: func(t *testing.T, m *Metrics) {
				if got := testutil.CollectAndCount(m.JobDuration); got != 1 {
					t.Errorf("job duration series = %d; want 1", got)
				}
			},
			families: []string{JobDurationSecond, "transcriber_replies_undelivered_total"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, m, h := newHandler(t)
			tc.report(h.WithTags(workflowTags))
			tc.check(t, m)
			fams := gather(t, reg)
			// Routed series must not also appear as SDK series, for example
			// under a doubled suffix.
			if got := names(fams); !slices.Equal(got, tc.families) {
				t.Errorf("gathered %v; want only %v", got, tc.families)
			}
			if tc.name == "job duration" {
				_, s := only(t, fams, JobDurationSecond)
				if s.count != 2 || s.value != 120 {
					t.Errorf("job duration count, sum = %d, %v; want 2, 120", s.count, s.value)
				}
				if len(s.labels) != 0 {
					t.Errorf("job duration labels = %v; want none", s.labels)
				}
			}
		})
	}
}

func TestKnownNamesWithoutMetrics(t *testing.T) {
	// A handler built without transcriber's metrics still takes the names,
	// as plain SDK series.
	reg := prometheus.NewRegistry()
	h := NewSDKHandler(reg, nil)
	h.WithTags(map[string]string{"source": "cli", "outcome": "done"}).Counter(JobsTotal).Inc(1)
	h.Timer(JobDurationSecond).Record(time.Second)
	fams := gather(t, reg)
	if _, s := only(t, fams, JobsTotal); s.value != 1 {
		t.Errorf("%s = %v; want 1", JobsTotal, s.value)
	}
	if _, s := only(t, fams, JobDurationSecond); s.count != 1 {
		t.Errorf("%s count = %d; want 1", JobDurationSecond, s.count)
	}
}

func TestLabelMismatchCostsDetail(t *testing.T) {
	first := map[string]string{"namespace": "default", "task_queue": "q"}
	tests := []struct {
		name string
		tags map[string]string
		want map[string]string
	}{
		{name: "same", tags: first, want: first},
		{name: "missing label becomes empty", tags: map[string]string{"namespace": "other"}, want: map[string]string{"namespace": "other", "task_queue": ""}},
		{name: "extra label dropped", tags: map[string]string{"namespace": "n", "task_queue": "t", "operation": "Poll"}, want: map[string]string{"namespace": "n", "task_queue": "t"}},
		{name: "disjoint", tags: map[string]string{"operation": "Poll"}, want: map[string]string{"namespace": "", "task_queue": ""}},
		{name: "none", tags: nil, want: map[string]string{"namespace": "", "task_queue": ""}},
	}
	kinds := []struct {
		kind, series string
		report       func(h sdkmetrics.MetricsHandler)
	}{
		{kind: "counter", series: "temporal_request_total", report: func(h sdkmetrics.MetricsHandler) { h.Counter("temporal_request").Inc(1) }},
		{kind: "gauge", series: "temporal_pollers", report: func(h sdkmetrics.MetricsHandler) { h.Gauge("temporal_pollers").Update(1) }},
		{kind: "timer", series: "temporal_latency_seconds", report: func(h sdkmetrics.MetricsHandler) { h.Timer("temporal_latency").Record(time.Second) }},
	}
	for _, k := range kinds {
		for _, tc := range tests {
			t.Run(k.kind+"/"+tc.name, func(t *testing.T) {
				reg, _, h := newHandler(t)
				k.report(h.WithTags(first))
				k.report(h.WithTags(tc.tags))
				f := gather(t, reg)[k.series]
				if want := []string{"namespace", "task_queue"}; !slices.Equal(f.labels, want) {
					t.Errorf("%s labels = %q; want %q, those seen first", k.series, f.labels, want)
				}
				found := false
				for _, s := range f.series {
					found = found || maps.Equal(s.labels, tc.want)
				}
				if !found {
					t.Errorf("%s series = %+v; want one labelled %v", k.series, f.series, tc.want)
				}
			})
		}
	}
}

func TestTagKeysSanitised(t *testing.T) {
	tests := []struct {
		name string
		tags map[string]string
		want map[string]string
	}{
		{name: "dash", tags: map[string]string{"task-queue": "q"}, want: map[string]string{"task_queue": "q"}},
		{name: "dot", tags: map[string]string{"a.b": "x"}, want: map[string]string{"a_b": "x"}},
		{name: "colon", tags: map[string]string{"a:b": "x"}, want: map[string]string{"a_b": "x"}},
		{name: "non-ASCII", tags: map[string]string{"задача": "x"}, want: map[string]string{"_": "x"}},
		{name: "leading digit", tags: map[string]string{"1st": "x"}, want: map[string]string{"_1st": "x"}},
		{name: "reserved prefix", tags: map[string]string{"__name": "x"}, want: map[string]string{"_name": "x"}},
		{name: "empty key", tags: map[string]string{"": "x"}, want: map[string]string{"_": "x"}},
		{name: "keys that clean to one name", tags: map[string]string{"a.b": "dot", "a-b": "dash"}, want: map[string]string{"a_b": "dash"}},
		{name: "invalid UTF-8 value", tags: map[string]string{"k": "a\xffb"}, want: map[string]string{"k": "a\uFFFDb"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, kind := range []string{"counter", "gauge", "timer"} {
				reg, _, h := newHandler(t)
				th := h.WithTags(tc.tags)
				var series string
				switch kind {
				case "counter":
					th.Counter("c").Inc(1)
					series = "c_total"
				case "gauge":
					th.Gauge("g").Update(1)
					series = "g"
				case "timer":
					th.Timer("t").Record(time.Second)
					series = "t_seconds"
				}
				_, s := only(t, gather(t, reg), series)
				if !maps.Equal(s.labels, tc.want) {
					t.Errorf("%s labels = %v; want %v", kind, s.labels, tc.want)
				}
			}
		})
	}
}

func TestTimerTaggedLe(t *testing.T) {
	// "le" names the buckets of a histogram; a tag of that name must neither
	// panic nor replace them.
	reg, _, h := newHandler(t)
	h.WithTags(map[string]string{"le": "x"}).Timer("t").Record(time.Second)
	_, s := only(t, gather(t, reg), "t_seconds")
	if want := map[string]string{"_le": "x"}; !maps.Equal(s.labels, want) {
		t.Errorf("labels = %v; want %v", s.labels, want)
	}
	h.WithTags(map[string]string{"le": "y"}).Counter("c").Inc(1)
	if _, s := only(t, gather(t, reg), "c_total"); s.labels["le"] != "y" {
		t.Errorf("counter labels = %v; want le=y, only histograms reserve it", s.labels)
	}
}

func TestNameCollisionsDoNotPanic(t *testing.T) {
	tags1 := map[string]string{"a": "1"}
	tags2 := map[string]string{"a": "1", "b": "2"}
	tests := []struct {
		name string
		do   func(h SDKHandler)
		// want is the family that must still count after the collision.
		want      string
		wantValue float64
	}{
		{
			name: "gauge named like a counter",
			do: func(h SDKHandler) {
				h.WithTags(tags1).Counter("x").Inc(1)
				h.WithTags(tags2).Gauge("x_total").Update(5)
				h.WithTags(tags1).Counter("x").Inc(1)
			},
			want: "x_total", wantValue: 2,
		},
		{
			name: "counter named like a gauge",
			do: func(h SDKHandler) {
				h.WithTags(tags1).Gauge("y_total").Update(3)
				h.WithTags(tags2).Counter("y").Inc(1)
				h.WithTags(tags1).Gauge("y_total").Update(4)
			},
			want: "y_total", wantValue: 4,
		},
		{
			name: "timer named like a gauge",
			do: func(h SDKHandler) {
				h.WithTags(tags1).Gauge("z_seconds").Update(3)
				h.WithTags(tags2).Timer("z").Record(time.Second)
				h.WithTags(tags1).Gauge("z_seconds").Update(6)
			},
			want: "z_seconds", wantValue: 6,
		},
		{
			name: "gauge named like a timer",
			do: func(h SDKHandler) {
				h.WithTags(tags1).Timer("w").Record(time.Second)
				h.WithTags(tags2).Gauge("w_seconds").Update(1)
				h.WithTags(tags1).Timer("w").Record(time.Second)
			},
			want: "w_seconds", wantValue: 2,
		},
		{
			name: "SDK counter named like transcriber's",
			do: func(h SDKHandler) {
				h.WithTags(tags2).Counter("transcriber_activity_runs").Inc(1)
				h.WithTags(tags2).Gauge("transcriber_replies_undelivered_total").Update(1)
				h.WithTags(tags2).Timer("transcriber_engine_request_duration").Record(time.Second)
			},
		},
		{
			name: "gauge named like a routed series",
			do: func(h SDKHandler) {
				h.Gauge(JobsTotal).Update(1)
				h.Gauge(JobDurationSecond).Update(1)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, h := newHandler(t)
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v; want the colliding metric dropped", r)
				}
			}()
			tc.do(h)
			fams := gather(t, reg)
			if tc.want == "" {
				return
			}
			_, s := only(t, fams, tc.want)
			got := s.value
			if s.count > 0 {
				got = float64(s.count)
			}
			if got != tc.wantValue {
				t.Errorf("%s = %v; want %v", tc.want, got, tc.wantValue)
			}
		})
	}
}

func TestSDKHandlerConcurrentUse(t *testing.T) {
	const goroutines, rounds = 8, 200
	reg, m, h := newHandler(t)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine uses its own tag sets, so label sets race to be
			// the first one a series sees.
			for i := range rounds {
				th := h.WithTags(map[string]string{"task_queue": "q", "worker": fmt.Sprint(g % 2)})
				if i%3 == 0 {
					th = th.WithTags(map[string]string{"extra": "x"})
				}
				th.Counter("temporal_request").Inc(1)
				th.Gauge("temporal_pollers").Update(float64(i))
				th.Timer("temporal_latency").Record(time.Millisecond)
				th.WithTags(map[string]string{"source": "cli", "outcome": "done"}).Counter(JobsTotal).Inc(1)
				th.Timer(JobDurationSecond).Record(time.Second)
			}
		}()
	}
	wg.Wait()
	fams := gather(t, reg)
	var total float64
	for _, s := range fams["temporal_request_total"].series {
		total += s.value
	}
	if total != goroutines*rounds {
		t.Errorf("temporal_request_total sums to %v; want %d", total, goroutines*rounds)
	}
	var timed uint64
	for _, s := range fams["temporal_latency_seconds"].series {
		timed += s.count
	}
	if timed != goroutines*rounds {
		t.Errorf("temporal_latency_seconds count = %d; want %d", timed, goroutines*rounds)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("cli", "done")); got != goroutines*rounds {
		t.Errorf("jobs{cli,done} = %v; want %d", got, goroutines*rounds)
	}
	if _, s := only(t, fams, JobDurationSecond); s.count != goroutines*rounds {
		t.Errorf("job duration count = %d; want %d", s.count, goroutines*rounds)
	}
}
