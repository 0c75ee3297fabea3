package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/testaudio"
)

// fixedLatencyEnv makes the test binary, started again, serve an
// OpenAI-compatible engine that answers every request after a fixed delay:
// the engine of the load benchmark, in a process of its own so that its
// work is not counted as the service's.
const fixedLatencyEnv = "TRANSCRIBER_BENCH_FIXED_LATENCY_ENGINE"

func init() {
	addr := os.Getenv(fixedLatencyEnv)
	if addr == "" {
		return
	}
	latency, err := time.ParseDuration(os.Getenv(fixedLatencyEnv + "_LATENCY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixed-latency engine:", err)
		os.Exit(2)
	}
	err = http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(latency)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"text":"go forward ten meters"}`)
	}))
	fmt.Fprintln(os.Stderr, "fixed-latency engine:", err)
	os.Exit(1)
}

// startFixedLatencyEngine runs the engine process and returns its base URL.
func startFixedLatencyEngine(b *testing.B, latency time.Duration) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // the child binds it
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), fixedLatencyEnv+"="+addr, fixedLatencyEnv+"_LATENCY="+latency.String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return "http://" + addr + "/v1"
		}
		if time.Now().After(deadline) {
			b.Fatal("the fixed-latency engine did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkThousandJobs sends BENCH_JOBS (default 1000) short voice notes
// through the HTTP API of one `up` to an engine that answers in 200 ms, at
// engine concurrency 4, and reports how long they took as a ratio to the
// ideal N × latency / concurrency, and how many uploads per second the API
// accepted while jobs ran. DESIGN's bar is 1.10 of the ideal.
func BenchmarkThousandJobs(b *testing.B) {
	requireSpeechTools(b)
	n := benchJobs(1000)
	const latency, concurrency = 200 * time.Millisecond, 4
	engine := startFixedLatencyEngine(b, latency)
	note, err := os.ReadFile(testaudio.VoiceNote(b, b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f := runLoad(b, n, concurrency, engine, note)
		ideal := time.Duration(n) * latency / concurrency
		b.ReportMetric(f.took.Seconds()/ideal.Seconds(), "x-ideal")
		b.ReportMetric(float64(n)/f.accepted.Seconds(), "uploads/s")
		b.ReportMetric(f.cpuPerJob(n), "cpu-ms/job")
		b.Logf("%d jobs in %v, ideal %v (%.2fx); uploads accepted at %.0f/s while jobs ran; %.0f ms of CPU per job in the service and its tools (DESIGN: at most 100)",
			n, f.took.Round(time.Second), ideal, f.took.Seconds()/ideal.Seconds(), float64(n)/f.accepted.Seconds(), f.cpuPerJob(n))
	}
}

// BenchmarkShortJobCPU sends BENCH_JOBS (default 200) voice notes through
// one `up` to the fixed-latency OpenAI-compatible engine twice in the same
// run: once with OPENAI_ALWAYS_CONVERT=true, which converts every note to
// FLAC as every job did before originals went to engines as they are, and
// once as the service runs by default. It reports the CPU per job of each,
// service and tools together, and the default's as a share of the
// converting one's.
func BenchmarkShortJobCPU(b *testing.B) {
	requireSpeechTools(b)
	n := benchJobs(200)
	const latency, concurrency = 200 * time.Millisecond, 4
	engine := startFixedLatencyEngine(b, latency)
	note, err := os.ReadFile(testaudio.VoiceNote(b, b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	ideal := time.Duration(n) * latency / concurrency
	for b.Loop() {
		c := runLoad(b, n, concurrency, engine, note, "OPENAI_ALWAYS_CONVERT", "true")
		a := runLoad(b, n, concurrency, engine, note)
		converted, asIs := c.cpuPerJob(n), a.cpuPerJob(n)
		b.ReportMetric(converted, "cpu-ms/job-converted")
		b.ReportMetric(asIs, "cpu-ms/job")
		b.ReportMetric(asIs/converted, "x-converted")
		b.Logf("%d voice notes: %.1f ms of CPU per job sent as they are, %.1f ms converted to FLAC (%.2fx); all done in %.2fx the ideal %v, %.2fx converted",
			n, asIs, converted, asIs/converted, a.took.Seconds()/ideal.Seconds(), ideal, c.took.Seconds()/ideal.Seconds())
	}
}

func benchJobs(def int) int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_JOBS")); err == nil && v > 0 {
		return v
	}
	return def
}

// loadFigures are what one load run measured.
type loadFigures struct {
	// took is from the first upload to the last job done; accepted to
	// the last upload accepted; cpu is the service's and its tools'.
	took, accepted, cpu time.Duration
}

func (f loadFigures) cpuPerJob(n int) float64 {
	return float64(f.cpu.Microseconds()) / 1000 / float64(n)
}

// runLoad starts one `up` with the extra settings, uploads n copies of note
// from eight clients, waits for every job to be done and stops it.
func runLoad(b *testing.B, n, concurrency int, engine string, note []byte, extra ...string) loadFigures {
	b.Helper()
	httpAddr := listenAddr(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	settings := append([]string{
		"TRANSCRIBER_DATA_DIR", b.TempDir(), "TRANSCRIBER_HTTP_ADDR", httpAddr, "TRANSCRIBER_UI_ADDR", "off",
		"TRANSCRIBER_TEMPORAL_PORT", strconv.Itoa(listenPort(b)), "TRANSCRIBER_ENGINE", "openai",
		"OPENAI_BASE_URL", engine, "TRANSCRIBER_ENGINE_CONCURRENCY", strconv.Itoa(concurrency),
		"TRANSCRIBER_API_TOKENS", benchToken, "TRANSCRIBER_LOG_LEVEL", "error"}, extra...)
	go func() {
		done <- run(ctx, []string{"up"}, env(settings...), nil, io.Discard, logs)
	}()
	base := "http://" + httpAddr
	benchWaitReady(b, base)

	cpuBefore := cpuTime(b)
	start := time.Now()
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/jobs", bytes.NewReader(note))
				req.Header.Set("Authorization", "Bearer "+benchToken)
				req.Header.Set("Content-Type", "audio/ogg")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("load-%d", i))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				var a struct{ ID string }
				err = json.NewDecoder(resp.Body).Decode(&a)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusAccepted {
					b.Errorf("submit %d: %d %v", i, resp.StatusCode, err)
					return
				}
				ids[i] = a.ID
			}
		})
	}
	wg.Wait()
	accepted := time.Since(start)
	for _, id := range ids {
		for {
			st := jobState(b, base, id)
			if st == "done" {
				break
			}
			if st == "failed" || st == "dead" {
				b.Fatalf("job %s is %s", id, st)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	f := loadFigures{took: time.Since(start), accepted: accepted, cpu: cpuTime(b) - cpuBefore}
	cancel()
	if err := <-done; err != nil {
		b.Errorf("up: %v\n%s", err, logs.String())
	}
	return f
}

func listenAddr(b *testing.B) string {
	return "127.0.0.1:" + strconv.Itoa(listenPort(b))
}

func listenPort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func benchWaitReady(b *testing.B, base string) {
	b.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("up did not become ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jobState(b *testing.B, base, id string) string {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct{ State string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		b.Fatalf("job %s: %v", id, err)
	}
	return v.State
}

// cpuTime is the CPU this process (the service, and the benchmark's small
// client) and the tools it started and waited for (ffmpeg) have used; the
// engine's process is not its child in that sense until it is killed.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}
