package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/job"
	"go.temporal.io/sdk/activity"
)

// ConvertInput names the original recording and the engine that will hear it.
type ConvertInput struct {
	Call
	OriginalKey string `json:"original_key"`
	Engine      string `json:"engine"`
	// Language is the job's, checked against the engine's before any work.
	Language string `json:"language,omitempty"`
}

// ConvertOutput is the audio the engine hears: the recording in the
// engine's format, or the original itself (AudioKey is then the original's
// key) when the engine takes it as it is.
type ConvertOutput struct {
	AudioKey string        `json:"audio_key"`
	Duration time.Duration `json:"duration"`
	// Chunks are the audio cut into pieces that fit the engine's limits, in
	// order; empty when the whole recording fits.
	Chunks []Chunk `json:"chunks,omitempty"`
}

// Chunk is one piece of a recording too long or too large for one request.
type Chunk struct {
	AudioKey string        `json:"audio_key"`
	Offset   time.Duration `json:"offset"`
	Duration time.Duration `json:"duration"`
	Size     int64         `json:"size"`
}

// Convert probes the original and rewrites it in the format the engine
// wants, unless the engine takes it as it is. Input that cannot be decoded,
// has no sound, or is longer than allowed fails the job at once.
func (a *Activities) Convert(ctx context.Context, in ConvertInput) (ConvertOutput, error) {
	out, err := a.convert(ctx, in)
	return out, classify(ctx, in.Call, err)
}

func (a *Activities) convert(ctx context.Context, in ConvertInput) (ConvertOutput, error) {
	rec, err := a.recognizer(in.Engine)
	if err != nil {
		return ConvertOutput{}, err
	}
	if !engine.Supports(rec, in.Language) {
		return ConvertOutput{}, unsupportedLanguage(in.Engine, in.Language, rec)
	}
	work, cleanup, err := a.workDir()
	if err != nil {
		return ConvertOutput{}, err
	}
	defer cleanup()
	// The step heartbeats from its first byte to its last: copying hours
	// of audio from S3, probing and scanning for silences report no
	// progress of their own, and a silent step loses its lease. Progress,
	// where there is some, travels in the details.
	var progress atomic.Int64
	stop := heartbeatWith(ctx, heartbeatEvery, func() any { return time.Duration(progress.Load()) })
	defer stop()

	src, err := a.localCopy(ctx, in.OriginalKey, work)
	if err != nil {
		return ConvertOutput{}, err
	}
	info, err := a.Audio.Probe(ctx, src)
	if err != nil {
		return ConvertOutput{}, err
	}
	if a.MaxDuration > 0 && info.Duration > a.MaxDuration {
		return ConvertOutput{}, verdict(job.TooLong, fmt.Sprintf(
			"the recording lasts %s; the longest accepted is %s", info.Duration.Round(time.Second), a.MaxDuration))
	}
	// Every verdict on the input is given above, so a recording sent as it
	// is fails or passes exactly as a converted one would.
	if a.takesAsIs(rec, info, src) {
		activity.GetLogger(ctx).Debug("the engine takes the original as it is", "container", info.Container, "codec", info.Codec)
		return ConvertOutput{AudioKey: in.OriginalKey, Duration: info.Duration}, nil
	}

	f := rec.Format()
	dst := filepath.Join(work, "audio"+f.Ext)
	duration, err := a.Audio.Convert(ctx, src, dst, f, func(done time.Duration) {
		progress.Store(int64(done))
		activity.RecordHeartbeat(ctx, done)
	})
	if err != nil {
		return ConvertOutput{}, err
	}
	if a.MaxDuration > 0 && duration > a.MaxDuration {
		return ConvertOutput{}, verdict(job.TooLong, fmt.Sprintf(
			"the recording lasts %s; the longest accepted is %s", duration.Round(time.Second), a.MaxDuration))
	}
	key := attemptKey(ctx, "audio"+f.Ext)
	if err := a.putFile(ctx, key, dst); err != nil {
		return ConvertOutput{}, err
	}
	chunks, err := a.split(ctx, rec, dst, duration, work, &progress)
	if err != nil {
		return ConvertOutput{}, err
	}
	return ConvertOutput{AudioKey: key, Duration: duration, Chunks: chunks}, nil
}

// InspectOutput says whether the engine takes the original as it is.
type InspectOutput struct {
	AsIs     bool          `json:"as_is"`
	Duration time.Duration `json:"duration,omitempty"`
}

// Inspect is Convert's quick half for a workflow to run as a local
// activity: it probes the original and answers whether the engine takes it
// as it is, which for a voice note saves a step of its own and the tasks
// and writes of the server that come with it. It gives no verdict and
// fails on nothing: a recording it does not pass, for whatever reason, goes
// to Convert, which gives every verdict and message with its own attempts.
func (a *Activities) Inspect(ctx context.Context, in ConvertInput) (InspectOutput, error) {
	out, err := a.inspect(ctx, in)
	if err != nil {
		activity.GetLogger(ctx).Debug("the recording is left to conversion", "error", err)
	}
	return out, nil
}

func (a *Activities) inspect(ctx context.Context, in ConvertInput) (InspectOutput, error) {
	rec, err := a.recognizer(in.Engine)
	if err != nil {
		return InspectOutput{}, err
	}
	if _, ok := rec.(asIsTaker); !ok || !engine.Supports(rec, in.Language) {
		return InspectOutput{}, nil
	}
	work, cleanup, err := a.workDir()
	if err != nil {
		return InspectOutput{}, err
	}
	defer cleanup()
	src, err := a.localCopy(ctx, in.OriginalKey, work)
	if err != nil {
		return InspectOutput{}, err
	}
	info, err := a.Audio.Probe(ctx, src)
	if err != nil {
		return InspectOutput{}, err
	}
	if a.MaxDuration > 0 && info.Duration > a.MaxDuration || !a.takesAsIs(rec, info, src) {
		return InspectOutput{}, nil
	}
	return InspectOutput{AsIs: true, Duration: info.Duration}, nil
}

// asIsTaker is an engine that can take some recordings without a
// conversion; the others get every recording in their Format.
type asIsTaker interface {
	TakesAsIs(info audio.Info) bool
}

// takesAsIs reports whether the original at path can go to the engine
// unconverted: the engine takes its type, it is whole, it fits one request
// (else it is converted, then cut as usual), and its first bytes tell its
// type as the probe does, so that Recognize, which sees only the key, names
// it right. The audio key is then the original's own, which nothing
// overwrites or deletes before the job's retention ends.
func (a *Activities) takesAsIs(rec Recognizer, info audio.Info, path string) bool {
	t, ok := rec.(asIsTaker)
	if !ok || !t.TakesAsIs(info) || info.Duration <= 0 {
		return false
	}
	// A container cut short may end inside a packet that some decoders
	// refuse; ffmpeg reads what is there and writes a file that ends well.
	if info.CutShort {
		return false
	}
	kind, ok := audio.TypeOf(info)
	if named, detected := audio.Detect(path); !ok || !detected || named != kind {
		return false
	}
	var lim engine.Limits
	if l, ok := rec.(engine.Limiter); ok {
		lim = l.Limits()
	}
	switch {
	case lim.MaxBytes > 0 && info.Size > lim.MaxBytes,
		lim.MaxDuration > 0 && info.Duration > lim.MaxDuration,
		a.ChunkDuration > 0 && info.Duration > a.ChunkDuration:
		return false
	}
	return true
}

// minChunk is the shortest chunk worth a request; limits that would need
// shorter ones are a configuration mistake, not a recording to cut to bits.
const minChunk = 5 * time.Second

// sizeMargin keeps planned chunks under a byte limit: the bytes per second
// of compressed audio vary with what is said.
const sizeMargin = 0.9

// split cuts the converted audio into chunks when it exceeds the engine's
// limits or the configured chunk length, cutting inside pauses. A chunk
// that still comes out over the byte limit is planned again, shorter.
func (a *Activities) split(ctx context.Context, rec Recognizer, path string, duration time.Duration, work string, progress *atomic.Int64) ([]Chunk, error) {
	var lim engine.Limits
	if l, ok := rec.(engine.Limiter); ok {
		lim = l.Limits()
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("converted audio: %w", err)
	}
	maxLen := lim.MaxDuration
	if a.ChunkDuration > 0 && (maxLen <= 0 || a.ChunkDuration < maxLen) {
		maxLen = a.ChunkDuration
	}
	if lim.MaxBytes > 0 && st.Size() > lim.MaxBytes {
		maxLen = shorter(maxLen, fitBytes(duration, st.Size(), lim.MaxBytes))
	}
	if maxLen <= 0 || duration <= maxLen {
		return nil, nil
	}
	if maxLen < minChunk {
		return nil, verdict(job.EngineRejected, fmt.Sprintf(
			"the engine takes at most %s or %d bytes per request, which would cut the recording into pieces shorter than %s",
			lim.MaxDuration, lim.MaxBytes, minChunk))
	}
	silences, err := a.Audio.Silences(ctx, path)
	if err != nil {
		return nil, err
	}
	f := rec.Format()
	pending := audio.Plan(duration, maxLen, silences)
	var chunks []Chunk
	for len(pending) > 0 {
		span := pending[0]
		pending = pending[1:]
		out := filepath.Join(work, fmt.Sprintf("chunk-%d%s", len(chunks), f.Ext))
		if err := a.Audio.Cut(ctx, path, out, span, f); err != nil {
			return nil, err
		}
		st, err := os.Stat(out)
		if err != nil {
			return nil, fmt.Errorf("chunk: %w", err)
		}
		if lim.MaxBytes > 0 && st.Size() > lim.MaxBytes {
			again := fitBytes(span.Duration, st.Size(), lim.MaxBytes)
			if again < minChunk {
				return nil, verdict(job.EngineRejected, fmt.Sprintf(
					"a chunk of %s is %d bytes; the engine takes at most %d per request", span.Duration, st.Size(), lim.MaxBytes))
			}
			pending = append(shift(audio.Plan(span.Duration, again, within(silences, span)), span.Offset), pending...)
			continue
		}
		chunk := Chunk{
			AudioKey: attemptKey(ctx, fmt.Sprintf("chunk-%04d%s", len(chunks), f.Ext)),
			Offset:   span.Offset, Duration: span.Duration, Size: st.Size(),
		}
		if err := a.putFile(ctx, chunk.AudioKey, out); err != nil {
			return nil, err
		}
		_ = os.Remove(out)
		chunks = append(chunks, chunk)
		progress.Store(int64(span.Offset + span.Duration))
	}
	return chunks, nil
}

// fitBytes is the length of audio that fits in limit bytes, at the rate of
// a piece that lasts d and takes size bytes.
func fitBytes(d time.Duration, size, limit int64) time.Duration {
	return time.Duration(float64(d) * float64(limit) / float64(size) * sizeMargin)
}

func shorter(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

// within returns the pauses inside span, relative to its start.
func within(silences []audio.Silence, span audio.Span) []audio.Silence {
	var out []audio.Silence
	end := span.Offset + span.Duration
	for _, s := range silences {
		if s.Start < span.Offset || s.Start >= end {
			continue
		}
		e := s.End
		if e < 0 || e > end {
			e = end
		}
		out = append(out, audio.Silence{Start: s.Start - span.Offset, End: e - span.Offset})
	}
	return out
}

func shift(spans []audio.Span, by time.Duration) []audio.Span {
	for i := range spans {
		spans[i].Offset += by
	}
	return spans
}

// unsupportedLanguage is the verdict on a job whose engine cannot hear its
// language: converting and sending it would only bring back another
// language's words marked done. It says what the owner can do.
func unsupportedLanguage(name, language string, rec Recognizer) error {
	knows := ""
	if l, ok := rec.(engine.Linguist); ok {
		knows = fmt.Sprintf(", only %s", strings.Join(l.Languages(), ", "))
	}
	primary := engine.PrimaryLanguage(language)
	return verdict(job.UnsupportedLanguage, fmt.Sprintf(
		"the %s engine does not recognise %s%s: route %s to an engine that does (TRANSCRIBER_ENGINE_ROUTES=%s=openai, say), "+
			"choose one for the job, or give the recording's real language", name, language, knows, primary, primary))
}
