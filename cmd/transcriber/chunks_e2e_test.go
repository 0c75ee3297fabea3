package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/internal/transcript"
)

// chunkServer is an OpenAI-compatible stand-in with a fixed latency that
// reads the length of each FLAC it receives from the file's own header and
// answers with one segment spanning it, so the merged transcript shows
// whether the chunks were put back in order at the right offsets.
type chunkServer struct {
	*httptest.Server
	latency time.Duration
	limit   int64

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	sizes       []int64
	first, last time.Time
	problems    []string
}

func newChunkServer(t testing.TB, latency time.Duration, limit int64) *chunkServer {
	s := &chunkServer{latency: latency, limit: limit}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *chunkServer) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.mu.Lock()
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	if s.first.IsZero() {
		s.first = start
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.last = time.Now()
		s.mu.Unlock()
	}()
	f, _, err := r.FormFile("file")
	if err != nil {
		s.fail(w, "no file part: %v", err)
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		s.fail(w, "read file: %v", err)
		return
	}
	seconds, err := flacSeconds(data)
	if err != nil {
		s.fail(w, "%v", err)
		return
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, int64(len(data)))
	if int64(len(data)) > s.limit {
		s.problems = append(s.problems, fmt.Sprintf("a file of %d bytes exceeds the limit of %d", len(data), s.limit))
	}
	s.mu.Unlock()
	time.Sleep(s.latency - time.Since(start))
	text := fmt.Sprintf("piece of %.3f seconds", seconds)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"text": text, "language": "english", "duration": seconds,
		"segments": []map[string]any{{"start": 0, "end": seconds, "text": text}},
	})
}

func (s *chunkServer) fail(w http.ResponseWriter, format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
	http.Error(w, `{"error":{"message":"bad upload"}}`, http.StatusBadRequest)
}

// flacSeconds reads the length of a FLAC file from its STREAMINFO block.
func flacSeconds(b []byte) (float64, error) {
	if len(b) < 8+34 || !bytes.Equal(b[:4], []byte("fLaC")) || b[4]&0x7f != 0 {
		return 0, fmt.Errorf("not a FLAC file with STREAMINFO first")
	}
	info := b[8:]
	var packed uint64
	for _, c := range info[10:18] {
		packed = packed<<8 | uint64(c)
	}
	rate := packed >> 44
	samples := packed & (1<<36 - 1)
	if rate == 0 {
		return 0, fmt.Errorf("FLAC without a sample rate")
	}
	return float64(samples) / float64(rate), nil
}

// run transcribes path at the given concurrency and returns the transcript
// and how long the engine was busy, from first request to last answer.
func (s *chunkServer) run(t testing.TB, path string, concurrency int) (transcript.JSONDocument, time.Duration, int) {
	t.Helper()
	s.mu.Lock()
	s.maxInFlight, s.sizes, s.first, s.problems = 0, nil, time.Time{}, nil
	s.mu.Unlock()
	r := runCLI(t, env(
		"TRANSCRIBER_ENGINE", "openai",
		"OPENAI_BASE_URL", s.URL+"/v1",
		"OPENAI_MAX_UPLOAD_BYTES", fmt.Sprint(s.limit),
		"TRANSCRIBER_ENGINE_CONCURRENCY", fmt.Sprint(concurrency),
	), "transcribe", "--format", "json", path)
	if r.code != 0 {
		t.Fatalf("transcribe at concurrency %d exited %d\n%s", concurrency, r.code, r.stderr)
	}
	var doc transcript.JSONDocument
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("transcript is not JSON: %v\n%s", err, r.stdout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Error(p)
	}
	return doc, s.last.Sub(s.first), s.maxInFlight
}

// Scenario: A long recording reaches the server in chunks under its size limit, at the configured concurrency, merged in order
func TestLongRecordingIsChunkedWithinLimits(t *testing.T) {
	requireSpeechTools(t)
	const limit = 1_000_000
	path, _ := testaudio.Long(t, t.TempDir(), 30*time.Minute, 1500*time.Millisecond)
	srv := newChunkServer(t, 300*time.Millisecond, limit)

	whole, serial, most := srv.run(t, path, 1)
	chunks := len(srv.sizes)
	if chunks < 10 {
		t.Fatalf("the 30-minute recording reached the server in %d requests; want many chunks of at most %d bytes", chunks, limit)
	}
	if most != 1 {
		t.Errorf("at concurrency 1 the server saw %d requests at once; want strictly one at a time", most)
	}
	checkMerged(t, whole, chunks)

	again, parallel, most := srv.run(t, path, 4)
	if most < 2 || most > 4 {
		t.Errorf("at concurrency 4 the server saw at most %d requests at once; want 2 to 4", most)
	}
	checkMerged(t, again, chunks)
	speedup := float64(serial) / float64(parallel)
	t.Logf("%d chunks, largest %d bytes; engine busy %v at concurrency 1, %v at 4 (%.1fx)",
		chunks, maxOf(srv.sizes), serial.Round(time.Millisecond), parallel.Round(time.Millisecond), speedup)
	// How much faster is a speed figure, which on a shared machine depends
	// on the neighbours: it is logged, and BenchmarkLongRecordingConcurrency
	// measures it; the requests in flight above prove the concurrency.
}

// checkMerged checks that the chunks' segments follow each other without
// gap or overlap from the start to the end of the recording, which holds
// only when every chunk was placed at its own offset, in order.
func checkMerged(t *testing.T, doc transcript.JSONDocument, chunks int) {
	t.Helper()
	if len(doc.Segments) != chunks {
		t.Fatalf("merged transcript has %d segments; want one per chunk (%d)", len(doc.Segments), chunks)
	}
	at := 0.0
	for i, s := range doc.Segments {
		if d := s.Start - at; d < -0.01 || d > 0.01 {
			t.Fatalf("segment %d starts at %.3fs; the previous chunk ended at %.3fs", i, s.Start, at)
		}
		if want := fmt.Sprintf("piece of %.3f seconds", s.End-s.Start); s.Text != want {
			t.Fatalf("segment %d says %q; its length says %q", i, s.Text, want)
		}
		at = s.End
	}
	if d := at - doc.Duration; d < -0.05 || d > 0.05 {
		t.Errorf("segments end at %.3fs; the recording lasts %.3fs", at, doc.Duration)
	}
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
