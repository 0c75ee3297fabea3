package main

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/internal/transcript"
)

// BenchmarkLongRecordingConcurrency transcribes a 30-minute recording built
// from LibriVox speech and pauses against an OpenAI-compatible stand-in
// that takes 300 ms per request and at most 1,000,000 bytes per file, at
// engine concurrency 1 and 4. It reports the chunks, how long the engine
// was busy at each concurrency, and the speed-up; the goal is at least 1.5x.
func BenchmarkLongRecordingConcurrency(b *testing.B) {
	requireSpeechTools(b)
	path, _ := testaudio.Long(b, b.TempDir(), 30*time.Minute, 1500*time.Millisecond)
	srv := newChunkServer(b, 300*time.Millisecond, 1_000_000)
	var serial, parallel time.Duration
	var chunks int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, d1, _ := srv.run(b, path, 1)
		chunks = len(srv.sizes)
		_, d4, _ := srv.run(b, path, 4)
		serial += d1
		parallel += d4
	}
	b.StopTimer()
	b.ReportMetric(float64(chunks), "chunks")
	b.ReportMetric(serial.Seconds()/float64(b.N), "engine-s@1")
	b.ReportMetric(parallel.Seconds()/float64(b.N), "engine-s@4")
	b.ReportMetric(float64(serial)/float64(parallel), "speedup")
}

// BenchmarkChunkedWER recognises the same recording with the local engine
// whole and cut into 2-minute chunks, and reports both word error rates
// against the LibriVox references; chunking may cost at most 2 points. The
// recording lasts BENCH_WER_MINUTES (default 10; 30 takes about a quarter
// of an hour on two cores).
func BenchmarkChunkedWER(b *testing.B) {
	requireSpeechTools(b)
	minutes := 10
	if v, err := strconv.Atoi(os.Getenv("BENCH_WER_MINUTES")); err == nil && v > 0 {
		minutes = v
	}
	path, ref := testaudio.Long(b, b.TempDir(), time.Duration(minutes)*time.Minute, 1500*time.Millisecond)
	recognize := func(chunk string) string {
		r := runCLI(b, env("TRANSCRIBER_ENGINE", "local", "TRANSCRIBER_CHUNK_DURATION", chunk, "POCKETSPHINX_CHUNK_DURATION", "0",
			"TRANSCRIBER_ENGINE_CONCURRENCY", "2"), "transcribe", "--format", "json", path)
		if r.code != 0 {
			b.Fatalf("transcribe (chunks %s) exited %d\n%s", chunk, r.code, r.stderr)
		}
		var doc transcript.JSONDocument
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			b.Fatal(err)
		}
		return doc.Text
	}
	var whole, chunked float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		whole += testaudio.WER(ref, recognize("0"))
		chunked += testaudio.WER(ref, recognize("2m"))
	}
	b.StopTimer()
	whole, chunked = whole/float64(b.N), chunked/float64(b.N)
	b.ReportMetric(float64(minutes), "minutes")
	b.ReportMetric(100*whole, "wer%-whole")
	b.ReportMetric(100*chunked, "wer%-chunked")
	b.Logf("%d minutes: WER whole %.1f%%, chunked %.1f%% (%+.1f points)", minutes, 100*whole, 100*chunked, 100*(chunked-whole))
	if d := chunked - whole; d > 0.02 {
		b.Errorf("chunking cost %.1f points of word error rate; the limit is 2", 100*d)
	}
}
