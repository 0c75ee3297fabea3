package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/internal/httpapi"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/workflows"
)

const benchToken = "bench-token"

// apiBench serves the job API of this process against an embedded server,
// with no worker: the benchmarks measure intake only.
func apiBench(b *testing.B, maxUpload int64) (base, blobDir string) {
	b.Helper()
	dir := b.TempDir()
	cfg, err := config.Load(func(k string) string {
		return map[string]string{
			"TRANSCRIBER_DATA_DIR": dir, "TRANSCRIBER_API_TOKENS": benchToken,
			"TRANSCRIBER_MAX_UPLOAD_BYTES": fmt.Sprint(maxUpload),
		}[k]
	})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := devserver.Start(devserver.Options{Namespace: "default", SearchAttributes: workflows.SearchAttributes(),
		Logger: slog.New(slog.DiscardHandler), LogLevel: slog.LevelError})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr(), Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	blobs, err := blob.NewLocal(cfg.BlobDir())
	if err != nil {
		b.Fatal(err)
	}
	api, err := newAPI(cfg, &jobctl.Service{Client: c, Namespace: cfg.TemporalNamespace}, blobs, "", slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.NewHandler(httpapi.Options{API: api}))
	b.Cleanup(hs.Close)
	return hs.URL, cfg.BlobDir()
}

// oggBody yields an OGG signature and then n bytes of zeros, made as it is
// read, so the sender holds nothing either.
type oggBody struct{ left int64 }

func (o *oggBody) Read(p []byte) (int, error) {
	if o.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), o.left))
	clear(p[:n])
	o.left -= int64(n)
	return n, nil
}

func oggReader(size int64) io.Reader {
	return io.MultiReader(bytes.NewReader([]byte("OggS")), &oggBody{left: size - 4})
}

// BenchmarkAPIUploadMemory streams a 500 MB recording through POST
// /v1/jobs into the blob store and reports how much the live heap grew
// meanwhile (forcing a collection every 50 ms, so garbage does not count).
// The goal is under 64 MB: uploads go to disk, never whole into memory.
func BenchmarkAPIUploadMemory(b *testing.B) {
	const size = 500 << 20
	base, blobDir := apiBench(b, size+1)
	for i := 0; b.Loop(); i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var peak atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		})
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/jobs", oggReader(size))
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer "+benchToken)
		req.Header.Set("Content-Type", "audio/ogg")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("big-%d", i))
		resp, err := http.DefaultClient.Do(req)
		close(stop)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("upload = %d %s", resp.StatusCode, body)
		}
		growth := float64(int64(peak.Load())-int64(before.HeapAlloc)) / (1 << 20)
		b.ReportMetric(max(growth, 0), "heap-growth-MB")
		if growth > 64 {
			b.Errorf("the heap grew by %.1f MB during a %d MB upload; want under 64 MB", growth, size>>20)
		}
		// Each upload leaves 500 MB on disk; keep the machine's disk.
		b.StopTimer()
		if err := os.RemoveAll(filepath.Join(blobDir, "jobs")); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.SetBytes(size)
}

// BenchmarkAPIJobsAccepted submits small distinct recordings from several
// clients at once and reports the jobs accepted per second: stored, started
// on Temporal and answered 202.
func BenchmarkAPIJobsAccepted(b *testing.B) {
	base, _ := apiBench(b, 1<<20)
	var n atomic.Int64
	start := time.Now()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		body := make([]byte, 8<<10)
		copy(body, "OggS")
		for pb.Next() {
			copy(body[8:], fmt.Sprintf("%020d", n.Add(1)))
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/jobs", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+benchToken)
			req.Header.Set("Content-Type", "audio/ogg")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Errorf("upload = %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "jobs/s")
}
