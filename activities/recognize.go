package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/transcript"
)

// RecognizeInput names the normalised audio and how to recognise it.
type RecognizeInput struct {
	Call
	AudioKey string        `json:"audio_key"`
	Engine   string        `json:"engine"`
	Language string        `json:"language,omitempty"`
	Prompt   string        `json:"prompt,omitempty"`
	Duration time.Duration `json:"duration"`
	// Chunk is set when the audio is one chunk of a longer recording: a
	// chunk without speech is then an empty part, not a verdict on the job.
	Chunk bool `json:"chunk,omitempty"`
	// Submission counts the job's submissions (see engine.Request); zero
	// in histories from before it was counted.
	Submission int `json:"submission,omitempty"`
	// Speakers and the rest are the job's further wishes of the engine
	// (engine.Request has their meaning).
	Speakers         bool    `json:"speakers,omitempty"`
	SpeakersExpected int     `json:"speakers_expected,omitempty"`
	Temperature      float64 `json:"temperature,omitempty"`
	Translate        bool    `json:"translate,omitempty"`
}

// CheckInput names an engine operation that is still running.
type CheckInput struct {
	Call
	Engine      string        `json:"engine"`
	OperationID string        `json:"operation_id"`
	Duration    time.Duration `json:"duration"`
	Chunk       bool          `json:"chunk,omitempty"`
}

// Recognition is the answer of a submit or a check: a stored transcript, or
// an operation to check again after PollAfter.
type Recognition struct {
	Done          bool   `json:"done"`
	OperationID   string `json:"operation_id,omitempty"`
	TranscriptKey string `json:"transcript_key,omitempty"`
	RawKey        string `json:"raw_key,omitempty"`
	Language      string `json:"language,omitempty"`
	Words         int    `json:"words,omitempty"`
	// PollAfter is the engine's fixed interval between checks.
	PollAfter time.Duration `json:"poll_after,omitempty"`
	// FirstCheckAfter, when set, is the wait before the first check of a
	// new operation: engines that take a known share of the audio's length
	// are not asked before they can be done.
	FirstCheckAfter time.Duration `json:"first_check_after,omitempty"`
	// OperationTimeout, when set, is the deadline the engine gave its
	// provider for the new operation, which the job then keeps.
	OperationTimeout time.Duration `json:"operation_timeout,omitempty"`
	// Service and ServiceVersion name the recognition service that did the
	// work; NeedsCheck is its request for a person to review the result.
	Service        string `json:"service,omitempty"`
	ServiceVersion string `json:"service_version,omitempty"`
	NeedsCheck     bool   `json:"needs_check,omitempty"`
}

// heartbeatEvery keeps the lease of a long engine call; it must stay well
// under the HeartbeatTimeout the workflow sets.
var heartbeatEvery = 5 * time.Second

// Recognize hands the audio to the engine. Engines that work synchronously
// return the finished transcript; others return an operation.
func (a *Activities) Recognize(ctx context.Context, in RecognizeInput) (Recognition, error) {
	out, err := a.recognize(ctx, in)
	return out, classify(ctx, in.Call, err)
}

func (a *Activities) recognize(ctx context.Context, in RecognizeInput) (Recognition, error) {
	rec, err := a.recognizer(in.Engine)
	if err != nil {
		return Recognition{}, err
	}
	if tr, ok := rec.(engine.Translator); in.Translate && (!ok || !tr.Translates()) {
		// Recognised speech in its own language is not what was asked for.
		return Recognition{}, engine.Errorf(engine.Rejected, "the %s engine does not translate; send translations to an engine that does (openai)", in.Engine)
	}
	work, cleanup, err := a.workDir()
	if err != nil {
		return Recognition{}, err
	}
	defer cleanup()
	// From the first byte: the copy of the audio out of the store can take
	// longer than the heartbeat timeout.
	stop := heartbeat(ctx, heartbeatEvery)
	defer stop()
	path, err := a.localCopy(ctx, in.AudioKey, work)
	if err != nil {
		return Recognition{}, err
	}
	path, mimeType, err := byType(path, work)
	if err != nil {
		return Recognition{}, err
	}
	start := time.Now()
	sub, err := rec.Submit(ctx, engine.Request{
		AudioPath: path, MIME: mimeType, Language: in.Language, Prompt: in.Prompt, Duration: in.Duration,
		JobID: activity.GetInfo(ctx).WorkflowExecution.ID, AudioKey: in.AudioKey, Submission: in.Submission,
		Speakers: in.Speakers, SpeakersExpected: in.SpeakersExpected, Temperature: in.Temperature, Translate: in.Translate,
	})
	a.observe(in.Engine, start)
	if err != nil {
		return Recognition{}, a.keepRawError(ctx, in.Engine, err)
	}
	out, err := a.settle(ctx, rec, in.Engine, in.Duration, sub, in.Chunk)
	if fc, ok := rec.(engine.FirstChecker); ok && err == nil && !out.Done {
		out.FirstCheckAfter = fc.FirstCheck(in.Duration)
	}
	if err == nil && !out.Done {
		out.OperationTimeout = sub.Deadline
	}
	return out, err
}

// CheckRecognition asks the engine about a running operation. "Still
// running" is a normal answer, not a failure: it spends no attempt.
func (a *Activities) CheckRecognition(ctx context.Context, in CheckInput) (Recognition, error) {
	out, err := a.check(ctx, in)
	return out, classify(ctx, in.Call, err)
}

func (a *Activities) check(ctx context.Context, in CheckInput) (Recognition, error) {
	rec, err := a.recognizer(in.Engine)
	if err != nil {
		return Recognition{}, err
	}
	start := time.Now()
	sub, err := rec.Check(ctx, in.OperationID)
	a.observe(in.Engine, start)
	if e, ok := engine.AsError(err); ok && e.Status == http.StatusTooManyRequests {
		// The engine's rate limit, not the operation's fate: waiting is
		// what it asks for, and a wait spends no attempt of the step.
		sub, err = engine.Submission{OperationID: in.OperationID, CheckAfter: e.RetryAfter}, nil
	}
	if err != nil {
		return Recognition{}, a.keepRawError(ctx, in.Engine, err)
	}
	if !sub.Done() && sub.OperationID == "" {
		sub.OperationID = in.OperationID
	}
	return a.settle(ctx, rec, in.Engine, in.Duration, sub, in.Chunk)
}

func (a *Activities) observe(engineName string, start time.Time) {
	if a.Metrics != nil {
		a.Metrics.EngineRequestDuration.WithLabelValues(engineName).Observe(time.Since(start).Seconds())
	}
}

// settle stores a finished result, or describes the operation to check.
func (a *Activities) settle(ctx context.Context, rec Recognizer, engineName string, duration time.Duration, sub engine.Submission, chunk bool) (Recognition, error) {
	if !sub.Done() {
		if sub.OperationID == "" {
			return Recognition{}, &engine.Error{Kind: engine.Unavailable, Message: "the engine returned neither a result nor an operation"}
		}
		interval := engine.DefaultPollInterval
		if p, ok := rec.(engine.Poller); ok && p.PollInterval() > 0 {
			interval = p.PollInterval()
		}
		return Recognition{OperationID: sub.OperationID, PollAfter: max(interval, sub.CheckAfter)}, nil
	}
	res := *sub.Result
	// The raw response is kept before anything is judged, so that a verdict
	// such as "no speech" can be checked against what the engine said.
	rawKey := attemptKey(ctx, "raw-"+engineName+rawExt(res.RawType))
	if _, err := a.Blobs.Put(ctx, rawKey, bytes.NewReader(res.Raw)); err != nil {
		return Recognition{}, fmt.Errorf("store raw response: %w", err)
	}
	doc := transcript.FromResult(engineName, duration, res)
	if doc.Text == "" && !chunk {
		return Recognition{}, verdict(job.NoSpeech, "no speech was recognised in the recording", FailureDetails{RawKey: rawKey})
	}
	key, err := a.storeTranscript(ctx, doc)
	if err != nil {
		return Recognition{}, err
	}
	return Recognition{Done: true, TranscriptKey: key, RawKey: rawKey, Language: doc.Language, Words: doc.WordCount(),
		Service: res.Service, ServiceVersion: res.ServiceVersion, NeedsCheck: res.NeedsCheck}, nil
}

func (a *Activities) storeTranscript(ctx context.Context, doc transcript.Document) (string, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encode transcript: %w", err)
	}
	key := attemptKey(ctx, "transcript.json")
	if _, err := a.Blobs.Put(ctx, key, bytes.NewReader(body)); err != nil {
		return "", fmt.Errorf("store transcript: %w", err)
	}
	return key, nil
}

// MergeInput names the transcripts of a recording's chunks, in order.
type MergeInput struct {
	Call
	Engine   string        `json:"engine"`
	Duration time.Duration `json:"duration"`
	Parts    []MergePart   `json:"parts"`
}

// MergePart is one chunk's transcript and where the chunk starts.
type MergePart struct {
	TranscriptKey string        `json:"transcript_key"`
	Offset        time.Duration `json:"offset"`
	// RawKey is the chunk's raw answer; empty in histories from before the
	// merge listed them.
	RawKey string `json:"raw_key,omitempty"`
}

// rawChunks is the raw answer of a chunked recognition: where each chunk's
// own raw answer is, in order. The engine answered each chunk apart, and
// one list keeps every answer reachable from the job's one raw key.
type rawChunks struct {
	Engine string     `json:"engine"`
	Chunks []rawChunk `json:"chunks"`
}

type rawChunk struct {
	OffsetSeconds float64 `json:"offset_seconds"`
	RawKey        string  `json:"raw_key,omitempty"`
}

// MergeTranscripts joins the chunks' transcripts into the recording's, with
// every timing moved by its chunk's offset.
func (a *Activities) MergeTranscripts(ctx context.Context, in MergeInput) (Recognition, error) {
	out, err := a.merge(ctx, in)
	return out, classify(ctx, in.Call, err)
}

func (a *Activities) merge(ctx context.Context, in MergeInput) (Recognition, error) {
	parts := make([]transcript.Part, 0, len(in.Parts))
	for _, p := range in.Parts {
		doc, err := transcript.Load(ctx, a.Blobs, p.TranscriptKey)
		if err != nil {
			return Recognition{}, err
		}
		parts = append(parts, transcript.Part{Offset: p.Offset, Doc: doc})
	}
	rawKey, err := a.storeRawChunks(ctx, in)
	if err != nil {
		return Recognition{}, err
	}
	doc := transcript.Merge(in.Engine, in.Duration, parts)
	if doc.Text == "" {
		return Recognition{}, verdict(job.NoSpeech, "no speech was recognised in the recording", FailureDetails{RawKey: rawKey})
	}
	key, err := a.storeTranscript(ctx, doc)
	if err != nil {
		return Recognition{}, err
	}
	return Recognition{Done: true, TranscriptKey: key, RawKey: rawKey, Language: doc.Language, Words: doc.WordCount()}, nil
}

// storeRawChunks stores the list of the chunks' raw answers; none when no
// part names one.
func (a *Activities) storeRawChunks(ctx context.Context, in MergeInput) (string, error) {
	list := rawChunks{Engine: in.Engine, Chunks: make([]rawChunk, len(in.Parts))}
	named := false
	for i, p := range in.Parts {
		list.Chunks[i] = rawChunk{OffsetSeconds: p.Offset.Seconds(), RawKey: p.RawKey}
		named = named || p.RawKey != ""
	}
	if !named {
		return "", nil
	}
	body, err := json.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("encode raw chunk list: %w", err)
	}
	key := attemptKey(ctx, "raw-"+in.Engine+"-chunks.json")
	if _, err := a.Blobs.Put(ctx, key, bytes.NewReader(body)); err != nil {
		return "", fmt.Errorf("store raw chunk list: %w", err)
	}
	return key, nil
}

func rawExt(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "application/json":
		return ".json"
	case "text/plain":
		return ".txt"
	}
	return ".bin"
}

// recognizer finds the engine a step names; one this worker lacks is a verdict,
// since retrying on the same worker cannot make it appear.
func (a *Activities) recognizer(name string) (Recognizer, error) {
	rec, ok := a.Engines[name]
	if !ok {
		return nil, verdict(job.EngineNotConfigured, fmt.Sprintf(
			"engine %q is not configured on this worker", name))
	}
	return rec, nil
}
