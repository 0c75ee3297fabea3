package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/deploy"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// scrapeSeries are written by Prometheus itself for every target it
// scrapes; no instance exports them.
var scrapeSeries = map[string]bool{"up": true}

// Scenario: Every metric the dashboard queries is exported by a running instance
func TestDashboardMetricsAreExported(t *testing.T) {
	requireSpeechTools(t)
	d, err := deploy.LoadDashboard(filepath.Join("..", "..", "deploy", "grafana", "dashboards", "transcriber.json"))
	if err != nil {
		t.Fatal(err)
	}
	engine := newOpenAIStandIn(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")

	// A job whose engine fails once, so that a step is retried, and one
	// that fails, so that the series labelled by outcome, failure kind,
	// engine and activity exist, as on any instance that has run jobs. The
	// retry matters beyond its failure: a worker starts the steps it
	// schedules itself without the task queue, and only a step that waited
	// there (a retry, or any step while the workers are busy) reports
	// schedule-to-start latency.
	engine.set(http.StatusServiceUnavailable)
	retrying := func(k string) string {
		if k == "TRANSCRIBER_RETRY_SCHEDULE" {
			return "1s"
		}
		return u.client(k)
	}
	note := testaudio.VoiceNote(t, t.TempDir())
	done := make(chan result, 1)
	go func() { done <- runCLI(t, retrying, "transcribe", note) }()
	waitFor(t, "the engine's first request", func() bool { return engine.count() >= 1 })
	engine.set(http.StatusOK)
	if r := awaitResult(t, done); r.code != 0 {
		t.Fatalf("transcribe: code %d\n%s", r.code, r.stderr)
	}
	if n := engine.count(); n != 2 {
		t.Fatalf("engine requests = %d; want 2, a failure and its retry", n)
	}
	bad := filepath.Join(t.TempDir(), "notes.mp3")
	if err := os.WriteFile(bad, []byte("not audio at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, u.client, "transcribe", bad); r.code == 0 {
		t.Fatalf("transcribe of a text file succeeded: %q", r.stdout)
	}

	code, body := get(t, "http://"+u.http+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	exported := deploy.SampleNames(body)
	queries := d.Queries()
	if len(queries) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	for _, q := range queries {
		names, err := deploy.MetricNames(q.Expr)
		if err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
			continue
		}
		for _, n := range names {
			if !exported[n] && !scrapeSeries[n] {
				t.Errorf("panel %q queries %s, which a running transcriber does not export; it has %q",
					q.Panel, n, alike(exported, n))
			}
		}
	}
}

// alike lists the exported series that share name's first two words, to
// show what was probably meant.
func alike(exported map[string]bool, name string) []string {
	parts := strings.SplitN(name, "_", 3)
	prefix := strings.Join(parts[:min(2, len(parts))], "_")
	var out []string
	for n := range exported {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
