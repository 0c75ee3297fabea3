// Package activities holds the steps of a transcription job. Each is a
// method of Activities, whose fields are the dependencies the steps call
// through the small interfaces declared here. Steps take and return blob
// keys, never audio or transcripts, and classify every error at their
// boundary: a definitive verdict becomes a non-retryable application error
// whose type is a job.Kind; anything else is retried on the schedule the
// workflow chose.
package activities

import (
	"context"
	"io"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/metrics"
)

// BlobStore keeps the bytes of a job under keys.
type BlobStore interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// DeleteJob removes everything stored for a job; removing what is
	// already gone succeeds.
	DeleteJob(ctx context.Context, jobID string) (int, error)
}

// localPather is implemented by stores that keep blobs as local files;
// tools then read them in place instead of from a copy.
type localPather interface {
	Path(key string) (string, error)
}

// AudioTools inspect and normalise recordings.
type AudioTools interface {
	Probe(ctx context.Context, path string) (audio.Info, error)
	Convert(ctx context.Context, in, out string, f audio.Format, progress func(time.Duration)) (time.Duration, error)
	Silences(ctx context.Context, path string) ([]audio.Silence, error)
	Cut(ctx context.Context, in, out string, span audio.Span, f audio.Format) error
}

// Recognizer is one speech engine. Its optional abilities (limits, poll
// interval, first check, languages) are package engine's small
// interfaces, found by type assertion.
type Recognizer interface {
	// Format is the audio the engine wants.
	Format() audio.Format
	// Submit hands the audio over; the result is either finished or an
	// operation to check later.
	Submit(ctx context.Context, req engine.Request) (engine.Submission, error)
	// Check asks about an operation that Submit started.
	Check(ctx context.Context, operationID string) (engine.Submission, error)
}

// Activities are the steps of TranscribeRecording.
type Activities struct {
	Blobs   BlobStore
	Audio   AudioTools
	Engines map[string]Recognizer
	// Repliers by source; a source without one (the command line) has
	// nothing to deliver.
	Repliers map[job.Source]Replier
	// Fetchers by source, for intakes that hand over a file id rather than
	// the bytes (Telegram).
	Fetchers map[job.Source]Fetcher
	Metrics  *metrics.Metrics
	// WorkDir holds temporary files while a step runs.
	WorkDir string
	// MaxDuration is the longest recording accepted.
	MaxDuration time.Duration
	// ChunkDuration, when positive, splits longer recordings into chunks
	// recognised in parallel, even where the engine would take them whole.
	ChunkDuration time.Duration
}

// Call carries what every step needs besides its own input.
type Call struct {
	// Backoff is the wait before each retry of a failing attempt: the first
	// entry after the first failure, the last one repeated.
	Backoff []time.Duration `json:"backoff,omitempty"`
}
