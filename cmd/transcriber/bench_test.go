package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/openai"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

// BenchmarkOrchestrationOverhead measures what a recording's trip through
// Temporal adds to the work itself: each iteration converts a voice note
// with ffmpeg and recognises it with an instant OpenAI-compatible stand-in,
// once by calling the two directly and once as a job on the embedded server
// with an in-process worker. It reports the median of the difference; the
// goal is under 100 ms. The baseline stays DESIGN's direct ffmpeg and
// engine call, although the job itself sends the voice note as it is: the
// conversion it saves is part of what the figure shows.
func BenchmarkOrchestrationOverhead(b *testing.B) {
	testaudio.Require(b)
	stand := newOpenAIStandIn(b)
	dir := b.TempDir()
	note := testaudio.VoiceNote(b, dir)

	cfg, err := config.Load(func(k string) string {
		return map[string]string{"OPENAI_BASE_URL": stand.URL + "/v1", "TRANSCRIBER_ENGINE": "openai"}[k]
	})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := devserver.Start(devserver.Options{Namespace: "default", SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			b.Error(err)
		}
	}()
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr(), Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	blobs, err := blob.NewLocal(filepath.Join(dir, "blobs"))
	if err != nil {
		b.Fatal(err)
	}
	tel := newTelemetry()
	acts, err := newActivities(cfg, blobs, tel, false)
	if err != nil {
		b.Fatal(err)
	}
	w := newWorkers(c, acts, tel, cfg.EngineConcurrency)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	tools, _ := audio.NewTools()
	eng, _ := openai.New(openai.Config{BaseURL: stand.URL + "/v1", Model: "whisper-1"}, nil)
	ctx := context.Background()

	direct := func() {
		out := filepath.Join(dir, "direct.flac")
		if _, err := tools.Convert(ctx, note, out, audio.FLAC16kMono, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := eng.Submit(ctx, engine.Request{AudioPath: out}); err != nil {
			b.Fatal(err)
		}
	}
	viaJob := func(i int) {
		id := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)
		f, err := os.Open(note)
		if err != nil {
			b.Fatal(err)
		}
		key := blob.JobKey(id, "original.ogg")
		if _, err := blobs.Put(ctx, key, f); err != nil {
			b.Fatal(err)
		}
		_ = f.Close() // only read
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL},
			workflows.WorkflowName, workflows.Input{Source: job.SourceCLI, Original: workflows.Original{Key: key}, Engine: "openai", Policy: policyFrom(cfg)})
		if err != nil {
			b.Fatal(err)
		}
		var r workflows.Result
		if err := run.Get(ctx, &r); err != nil || r.State != job.Done {
			b.Fatalf("job %s: %v %v", id, r.State, err)
		}
	}
	direct()
	viaJob(-1) // warm caches and connections
	overheads := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		direct()
		t1 := time.Now()
		viaJob(i)
		overheads = append(overheads, time.Since(t1)-t1.Sub(t0))
	}
	b.StopTimer()
	slices.Sort(overheads)
	b.ReportMetric(float64(overheads[len(overheads)/2].Microseconds())/1000, "median-overhead-ms")
}
