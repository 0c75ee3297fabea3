// Package engine holds what every speech engine shares: the request and
// result shapes and the classification of engine errors into permanent
// verdicts and temporary trouble. The engines themselves live in
// subpackages; the activities declare the small interface they call.
package engine

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/job"
)

// Request asks an engine to recognise one normalised audio file.
type Request struct {
	// AudioPath is a local file in the format the engine asked for
	// (see audio.Format), or the original recording when the engine said
	// it takes it as it is; engines stream it, never read it whole. Its
	// extension names its real type.
	AudioPath string
	// MIME is the media type of the file at AudioPath; empty when it could
	// not be told.
	MIME string
	// Language is a BCP 47 code such as "en" or "ru"; empty lets the engine
	// decide when it can.
	Language string
	// Duration of the audio, for engines whose limits or timeouts depend on it.
	Duration time.Duration
	// Prompt is text that guides the recognition (names, terms, style), for
	// engines that take one; empty for none.
	Prompt string
	// JobID names the job, for engines that call back when an operation
	// finishes.
	JobID string
	// AudioKey is the audio's key in the blob store, for engines whose
	// provider fetches the audio itself instead of receiving it.
	AudioKey string
	// Submission counts the job's submissions to engines, from 1: a retry
	// of one submission keeps it, a revive that submits afresh does not,
	// so an engine can tell a repeated publish from a new one.
	Submission int
	// Speakers asks for each word and segment to be labelled with who
	// spoke it, from engines that can tell; SpeakersExpected is how many
	// speakers there are, zero when unknown, for providers that take it.
	Speakers         bool
	SpeakersExpected int
	// Temperature is the sampling temperature, for engines that take one;
	// zero leaves it to the engine.
	Temperature float64
	// Translate asks for the speech in English whatever it was spoken in,
	// from engines that are Translators.
	Translate bool
}

// Translator is an engine that can render speech as English text; jobs
// that ask for a translation go only to such engines.
type Translator interface {
	Translates() bool
}

// Segment is a stretch of recognised speech with its place in the audio.
type Segment struct {
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	Text  string        `json:"text"`
	// Speaker is the provider's label of who spoke ("A", "speaker_0");
	// empty when the engine was not asked or cannot tell.
	Speaker string `json:"speaker,omitempty"`
}

// Word is one recognised word with its place in the audio.
type Word struct {
	Start   time.Duration `json:"start"`
	End     time.Duration `json:"end"`
	Text    string        `json:"text"`
	Speaker string        `json:"speaker,omitempty"`
}

// Result is a finished recognition.
type Result struct {
	Text     string    `json:"text"`
	Language string    `json:"language,omitempty"`
	Segments []Segment `json:"segments,omitempty"`
	// Words are the words with their times, for engines that give them.
	Words []Word `json:"words,omitempty"`
	// Raw is the provider's response exactly as received, kept for audits
	// and for re-parsing after a parser fix.
	Raw []byte `json:"-"`
	// RawType is the media type of Raw, e.g. "application/json".
	RawType string `json:"-"`
	// Service names the recognition service that did the work, and its
	// version, for engines that hand jobs to services of their own.
	Service        string `json:"-"`
	ServiceVersion string `json:"-"`
	// NeedsCheck: the service asks for a person to review the transcript.
	NeedsCheck bool `json:"-"`
}

// Limits are the largest audio one request to an engine may carry; zero
// means no limit. Recordings beyond them are split into chunks that fit.
type Limits struct {
	// MaxBytes bounds the size of the converted audio file.
	MaxBytes int64
	// MaxDuration bounds its length.
	MaxDuration time.Duration
}

// Submission is the answer to a submit or a check: either a finished Result
// or the id of an operation that is still running on the engine's side.
type Submission struct {
	OperationID string
	Result      *Result
	// CheckAfter, when set, is the least wait before the operation is
	// checked again: the engine's share of a rate quota, or the
	// Retry-After of a check it was refused for now.
	CheckAfter time.Duration
	// Deadline, when set, is how long the operation may run: the engine
	// told its provider so, and the job gives up on it after as long.
	Deadline time.Duration
}

// Done reports whether the submission carries a finished result.
func (s Submission) Done() bool { return s.Result != nil }

// Kind classifies why an engine call failed. It decides what the pipeline
// does next, so every engine maps its protocol's errors onto these. It is
// the job's failure vocabulary itself: what each kind does to a job
// (retried or a verdict) is declared once, in internal/job.
type Kind = job.Kind

// The kinds an engine reports.
const (
	// Rejected: the engine refused this request and will refuse it again
	// (bad request, unsupported file, too large). A verdict.
	Rejected = job.EngineRejected
	// Unauthorized: credentials are missing, wrong or lack permission.
	// A verdict until the owner fixes the configuration.
	Unauthorized = job.EngineUnauthorized
	// OperationFailed: the engine accepted the job and then reported that it
	// failed. A verdict.
	OperationFailed = job.OperationFailed
	// Unavailable: the engine answered but cannot serve now (429, 5xx,
	// malformed answer). Temporary.
	Unavailable = job.ServiceError
	// Unreachable: the request never reached the engine or got no answer
	// (connection refused, DNS, reset, client-side timeout). Temporary.
	Unreachable = job.NoAck
)

// Error is an engine failure with its classification.
type Error struct {
	Kind Kind
	// Status is the HTTP status, when there was one.
	Status int
	// RetryAfter is the engine's own hint, zero when it gave none.
	RetryAfter time.Duration
	// Message is safe to show to the sender and to log: it never contains
	// credentials or recognised text.
	Message string
	// Code is the provider's own name for the error ("invalid_api_key",
	// "UNAUTHENTICATED"), scrubbed and bounded like Message; empty when
	// it gave none.
	Code string
	// Raw is the provider's answer as received, at most MaxRawError bytes,
	// kept for audits as a successful answer is. It is never logged or
	// shown: an answer may quote recognised text. RawType is its media type.
	Raw     []byte
	RawType string
	// Final makes the failure a verdict whatever its Kind: the provider
	// itself gave up on this request, and asking again gets the same.
	Final bool
	Err   error
}

// MaxRawError bounds the raw answer an Error keeps: an error body is small,
// and one that is not says nothing more past its beginning.
const MaxRawError = 64 << 10

// KeepRaw records body as the raw answer of e, cut to MaxRawError, and
// returns e. The body is copied: callers reuse their buffers.
func (e *Error) KeepRaw(body []byte, mediaType string) *Error {
	if len(body) == 0 {
		return e
	}
	e.Raw = append([]byte(nil), body[:min(len(body), MaxRawError)]...)
	e.RawType = mediaType
	if e.RawType == "" {
		e.RawType = "application/octet-stream"
	}
	return e
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Status != 0 && !strings.Contains(e.Message, fmt.Sprint(e.Status)) {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error of the given kind.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// AsError finds an engine Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// ClassifyHTTP maps an HTTP status of a provider's answer onto a Kind,
// following the common REST conventions that OpenAI-compatible servers and
// the cloud providers share.
func ClassifyHTTP(status int) Kind {
	switch {
	case status == 401 || status == 403:
		return Unauthorized
	case status == 408 || status == 409 || status == 425 || status == 429:
		return Unavailable
	case status >= 500:
		return Unavailable
	case status >= 400:
		return Rejected
	}
	return Unavailable
}

// ParseRetryAfter reads a Retry-After header value: delay seconds or an HTTP
// date. It returns zero for anything it cannot read.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
