package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/internal/transcript"
)

// limitedEngine is a fakeEngine that declares request limits.
type limitedEngine struct {
	fakeEngine
	limits engine.Limits
}

func (l *limitedEngine) Limits() engine.Limits { return l.limits }

const testKey = "jobs/default-test-workflow-id/original.wav"

func convertLong(t *testing.T, eng Recognizer, chunkDuration time.Duration) (ConvertOutput, *fixture, error) {
	t.Helper()
	testaudio.Require(t)
	f := newFixture(t, nil)
	f.acts.Engines["fake"] = eng
	f.acts.ChunkDuration = chunkDuration
	long, _ := testaudio.Long(t, t.TempDir(), 2*time.Minute, 1500*time.Millisecond)
	f.put(t, testKey, long)
	v, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{Call: schedule, OriginalKey: testKey, Engine: "fake"})
	var out ConvertOutput
	if err == nil {
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
	}
	return out, f, err
}

func checkChunks(t *testing.T, f *fixture, out ConvertOutput, maxBytes int64, maxLen time.Duration) {
	t.Helper()
	if len(out.Chunks) < 2 {
		t.Fatalf("Convert made %d chunks; want several", len(out.Chunks))
	}
	var at time.Duration
	for i, c := range out.Chunks {
		if c.Offset != at {
			t.Errorf("chunk %d starts at %v; the previous one ended at %v", i, c.Offset, at)
		}
		at = c.Offset + c.Duration
		size, err := f.blobs.Size(context.Background(), c.AudioKey)
		if err != nil || size != c.Size {
			t.Errorf("chunk %d stored as %d bytes (%v); reported %d", i, size, err, c.Size)
		}
		if maxBytes > 0 && size > maxBytes {
			t.Errorf("chunk %d has %d bytes; the engine takes at most %d", i, size, maxBytes)
		}
		if maxLen > 0 && c.Duration > maxLen {
			t.Errorf("chunk %d lasts %v; the limit is %v", i, c.Duration, maxLen)
		}
	}
	if d := at - out.Duration; d < -20*time.Millisecond || d > 20*time.Millisecond {
		t.Errorf("chunks end at %v; the audio lasts %v", at, out.Duration)
	}
}

// Scenario: Audio over the engine's byte limit is cut into chunks that fit
func TestConvertSplitsToFitBytes(t *testing.T) {
	const limit = 600_000 // about 20 s of FLAC speech
	eng := &limitedEngine{fakeEngine: fakeEngine{format: audio.FLAC16kMono}, limits: engine.Limits{MaxBytes: limit}}
	out, f, err := convertLong(t, eng, 0)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	checkChunks(t, f, out, limit, 0)
}

// Scenario: Audio over the engine's or the configured duration is cut into chunks
func TestConvertSplitsByDuration(t *testing.T) {
	eng := &limitedEngine{fakeEngine: fakeEngine{format: audio.WAV16kMono}, limits: engine.Limits{MaxDuration: 50 * time.Second}}
	out, f, err := convertLong(t, eng, 0)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	checkChunks(t, f, out, 0, 50*time.Second)

	out, f, err = convertLong(t, &fakeEngine{format: audio.WAV16kMono}, 30*time.Second)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	checkChunks(t, f, out, 0, 30*time.Second)
}

// Scenario: Audio within the limits stays whole
func TestConvertKeepsShortAudioWhole(t *testing.T) {
	eng := &limitedEngine{fakeEngine: fakeEngine{format: audio.FLAC16kMono}, limits: engine.Limits{MaxBytes: 25_000_000, MaxDuration: time.Hour}}
	out, _, err := convertLong(t, eng, 0)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	if len(out.Chunks) != 0 {
		t.Errorf("Convert cut audio within the limits into %d chunks", len(out.Chunks))
	}
}

func TestConvertRefusesLimitsTooSmallToChunk(t *testing.T) {
	eng := &limitedEngine{fakeEngine: fakeEngine{format: audio.WAV16kMono}, limits: engine.Limits{MaxBytes: 10_000}}
	_, _, err := convertLong(t, eng, 0)
	if got := appError(t, err); got.Type() != string(job.EngineRejected) || !got.NonRetryable() {
		t.Errorf("error = %v (%s); want a non-retryable engine_rejected", err, got.Type())
	}
}

// Scenario: Chunk transcripts merge with their offsets
// Scenario: Chunked words move by their chunk's offset
func TestMergeTranscripts(t *testing.T) {
	f := newFixture(t, &fakeEngine{})
	ctx := context.Background()
	docs := []transcript.Document{
		{Engine: "fake", Language: "en", Text: "one two", Segments: []transcript.Segment{{Start: 0, End: 1.5, Text: "one two"}}},
		{Engine: "fake", Text: "", Segments: nil},
		{Engine: "fake", Language: "en", Text: "three", Segments: []transcript.Segment{{Start: 0.25, End: 1, Text: "three", Speaker: "B"}},
			Words: []transcript.Word{{Word: "three", Start: 0.25, End: 1, Speaker: "B"}}},
	}
	var parts []MergePart
	for i, d := range docs {
		body, _ := json.Marshal(d)
		key := "jobs/default-test-workflow-id/t" + string(rune('0'+i)) + ".json"
		if _, err := f.blobs.Put(ctx, key, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, MergePart{TranscriptKey: key, Offset: time.Duration(i) * 30 * time.Second})
	}
	v, err := f.env.ExecuteActivity(f.acts.MergeTranscripts, MergeInput{Call: schedule, Engine: "fake", Duration: 90 * time.Second, Parts: parts})
	if err != nil {
		t.Fatalf("MergeTranscripts: %v", err)
	}
	var rec Recognition
	if err := v.Get(&rec); err != nil {
		t.Fatal(err)
	}
	if !rec.Done || rec.Words != 3 || rec.Language != "en" {
		t.Errorf("Recognition = %+v; want done, 3 words, en", rec)
	}
	r, err := f.blobs.Open(ctx, rec.TranscriptKey)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	doc, err := transcript.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Text != "one two three" || doc.Duration != 90*time.Second {
		t.Errorf("merged = %q over %v; want %q over 90s", doc.Text, doc.Duration, "one two three")
	}
	want := []transcript.Segment{{Start: 0, End: 1.5, Text: "one two"}, {Start: 60.25, End: 61, Text: "three", Speaker: "B"}}
	if len(doc.Segments) != 2 || doc.Segments[0] != want[0] || doc.Segments[1] != want[1] {
		t.Errorf("segments = %+v; want %+v", doc.Segments, want)
	}
	if w := doc.Words; len(w) != 1 || w[0] != (transcript.Word{Word: "three", Start: 60.25, End: 61, Speaker: "B"}) {
		t.Errorf("words = %+v; want three moved to 60.25 s with its speaker", w)
	}

	// Chunks that all came back empty are a recording without speech.
	_, err = f.env.ExecuteActivity(f.acts.MergeTranscripts, MergeInput{Call: schedule, Engine: "fake", Parts: parts[1:2]})
	if got := appError(t, err); got.Type() != string(job.NoSpeech) {
		t.Errorf("merging silence = %v; want no_speech", err)
	}
}

// Scenario: A chunk without speech is stored as an empty part
func TestRecognizeEmptyChunkIsNotAVerdict(t *testing.T) {
	eng := &fakeEngine{format: audio.WAV16kMono, submit: func(context.Context, engine.Request) (engine.Submission, error) {
		return engine.Submission{Result: &engine.Result{Raw: []byte(""), RawType: "text/plain"}}, nil
	}}
	f := newFixture(t, eng)
	if _, err := f.blobs.Put(context.Background(), "jobs/default-test-workflow-id/chunk.wav", strings.NewReader("RIFF")); err != nil {
		t.Fatal(err)
	}
	in := RecognizeInput{Call: schedule, AudioKey: "jobs/default-test-workflow-id/chunk.wav", Engine: "fake", Duration: time.Second, Chunk: true}
	v, err := f.env.ExecuteActivity(f.acts.Recognize, in)
	if err != nil {
		t.Fatalf("Recognize of a silent chunk: %v", err)
	}
	var rec Recognition
	if err := v.Get(&rec); err != nil || !rec.Done || rec.TranscriptKey == "" || rec.Words != 0 {
		t.Errorf("Recognition = %+v, %v; want a stored empty transcript", rec, err)
	}
	in.Chunk = false
	_, err = f.env.ExecuteActivity(f.acts.Recognize, in)
	if got := appError(t, err); got.Type() != string(job.NoSpeech) {
		t.Errorf("Recognize of a silent whole recording = %v; want no_speech", err)
	}
}
