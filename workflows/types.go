package workflows

import (
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/job"
)

// Input starts one job.
type Input struct {
	Source   job.Source `json:"source"`
	Original Original   `json:"original"`
	Engine   string     `json:"engine"`
	// Fallback is the engine that takes the job when Engine gives up on it
	// (the recognition step went dead); empty for none.
	Fallback string `json:"fallback,omitempty"`
	Language string `json:"language,omitempty"`
	// Prompt guides the engines that take one (names, terms, style).
	Prompt    string         `json:"prompt,omitempty"`
	Title     string         `json:"title,omitempty"`
	Recipient *job.Recipient `json:"recipient,omitempty"`
	Policy    Policy         `json:"policy"`
	// AcceptedAt is when the intake took the recording, for the job's
	// duration metric; zero means when the workflow started.
	AcceptedAt time.Time `json:"accepted_at,omitzero"`
	// WebhookURL, when set, is told of the job's outcome by a signed
	// webhook once it is done, failed or dead. The JSON name is the one
	// recorded histories carry.
	WebhookURL string `json:"callback_url,omitempty"`
	// Resume carries the job's state across continue-as-new; nil when a job
	// starts.
	Resume *Status `json:"resume,omitempty"`

	// Owner is who sent the job (an account, job.TelegramOwner,
	// job.VaultOwner, job.OwnerCLI); empty on jobs started before jobs had
	// owners, which only admins see.
	Owner string `json:"owner,omitempty"`

	// Recognition asks more of the engine than the words: speaker labels,
	// a temperature, English instead of the spoken language.
	Recognition Recognition `json:"recognition,omitzero"`
}

// Recognition is what a job asks of its engine besides the language and
// prompt; engines that cannot honour a wish ignore it, except Translate,
// which only engines that translate are given.
type Recognition struct {
	Speakers         bool    `json:"speakers,omitempty"`
	SpeakersExpected int     `json:"speakers_expected,omitempty"`
	Temperature      float64 `json:"temperature,omitempty"`
	Translate        bool    `json:"translate,omitempty"`
}

// Key names what the wishes change in the result, for ids derived from
// it; empty when there are none.
func (r Recognition) Key() string {
	var parts []string
	if r.Speakers {
		parts = append(parts, "speakers="+strconv.Itoa(r.SpeakersExpected))
	}
	if r.Temperature != 0 {
		parts = append(parts, "temperature="+strconv.FormatFloat(r.Temperature, 'g', -1, 64))
	}
	if r.Translate {
		parts = append(parts, "translate")
	}
	return strings.Join(parts, ";")
}

// Original is the recording as the sender gave it.
type Original struct {
	// Key of the stored bytes in the blob store; empty until fetched when
	// the intake handed over a FileID instead.
	Key string `json:"key"`
	// FileID is the recording's id at the intake's service (Telegram), from
	// which the job fetches it.
	FileID string `json:"file_id,omitempty"`
	// Ext is the extension to store the original under, e.g. ".ogg".
	Ext  string `json:"ext,omitempty"`
	Name string `json:"name,omitempty"`
	MIME string `json:"mime,omitempty"`
	Size int64  `json:"size,omitempty"`
}

// Policy is how persistent a job is. It travels with the job, so the intake
// that accepted it decides, and a later change of worker configuration does
// not alter jobs already running.
type Policy struct {
	// Backoff is the wait after each failed attempt of a step: the first
	// entry after the first failure, the last one repeated.
	Backoff []time.Duration `json:"backoff"`
	// MaxAttempts a step may take before the job is dead.
	MaxAttempts int `json:"max_attempts"`
	// ParkFor is how long a failed or dead job waits for revive before it
	// closes for good.
	ParkFor time.Duration `json:"park_for"`
	// Retain is how long a closed job's recordings and transcripts are
	// kept before they are removed; zero keeps them.
	Retain time.Duration `json:"retain,omitempty"`
	// OperationTimeout is how long an engine operation may run before the
	// job is dead with kind timeout; zero sizes it from the audio's
	// duration (half an hour plus four times the audio).
	OperationTimeout time.Duration `json:"operation_timeout,omitempty"`
}

// DefaultPolicy returns the default Policy (see job.DefaultBackoff).
func DefaultPolicy() Policy {
	return Policy{Backoff: job.DefaultBackoff(), MaxAttempts: job.DefaultMaxAttempts, ParkFor: job.DefaultParkFor}
}

// Status is the state of a job, as the status query returns it.
type Status struct {
	JobID  string     `json:"job_id"`
	State  job.State  `json:"state"`
	Source job.Source `json:"source"`
	Engine string     `json:"engine"`
	// Language is the owner's choice; Piece.DetectedLanguage what the
	// engine heard.
	Language string   `json:"language,omitempty"`
	Prompt   string   `json:"prompt,omitempty"`
	Title    string   `json:"title,omitempty"`
	Note     string   `json:"note,omitempty"`
	Original Original `json:"original"`

	// Recognition is the job's further wishes of the engine.
	Recognition Recognition `json:"recognition,omitzero"`
	// Piece is the whole recording on its way through the engine; when it
	// is split, its transcript is the merge of the chunks'.
	Piece
	// Chunks are the pieces of a recording too long or too large for one
	// request, in order; ChunksDone of them are recognised.
	Chunks     []Chunk `json:"chunks,omitempty"`
	ChunksDone int     `json:"chunks_done,omitempty"`
	// Fallback is the engine that takes over when Engine gives up;
	// FallbackFrom is set once it did, to the engine that gave up.
	Fallback     string `json:"fallback,omitempty"`
	FallbackFrom string `json:"fallback_from,omitempty"`
	Replied      bool   `json:"replied,omitempty"`
	// Lean is set for jobs started since lean-publish; it travels across
	// continue-as-new so that a run goes on as the job began.
	Lean bool `json:"lean,omitempty"`
	// Inspects is set for jobs started at leanInspects, which need not ask
	// for local-inspect; it travels across continue-as-new like Lean.
	Inspects bool `json:"inspects,omitempty"`
	// Acknowledged is set once the sender was told of the acceptance.
	Acknowledged bool `json:"acknowledged,omitempty"`
	// StatusMessageTaken is set while the status message holds the last
	// reply (a transcript or failure notice) instead of the job's
	// progress, which then is no longer shown there.
	StatusMessageTaken bool         `json:"status_message_taken,omitempty"`
	Failure            *job.Failure `json:"failure,omitempty"`
	// RemoveAt is when the job's recordings and transcripts will be
	// removed, once it has closed; RemovedAt when they were.
	RemoveAt  time.Time `json:"remove_at,omitzero"`
	RemovedAt time.Time `json:"removed_at,omitzero"`
	// Revivals counts how often an operator resumed the job.
	Revivals int `json:"revivals,omitempty"`
	// Submissions counts the pieces handed to engines, so that each
	// submission has its own number and a retry of one keeps it.
	Submissions int       `json:"submissions,omitempty"`
	AcceptedAt  time.Time `json:"accepted_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	// WebhookURL receives the job's outcome (see Input.WebhookURL).
	WebhookURL string `json:"callback_url,omitempty"`
	// Recipient and Policy travel with the job across continue-as-new.
	Recipient *job.Recipient `json:"recipient,omitempty"`
	Policy    Policy         `json:"policy"`

	// Owner is the job's Input.Owner.
	Owner string `json:"owner"`
}

// Piece is audio on its way through an engine, the whole recording or one
// chunk of it, with the recognition's progress so far. The progress is part
// of the job's state so that it survives continue-as-new.
type Piece struct {
	AudioKey    string        `json:"audio_key,omitempty"`
	Duration    time.Duration `json:"duration,omitempty"`
	OperationID string        `json:"operation_id,omitempty"`
	// PollInterval is the engine's fixed wait between checks;
	// FirstCheckAfter, when set, the wait before the first one.
	PollInterval    time.Duration `json:"poll_interval,omitempty"`
	FirstCheckAfter time.Duration `json:"first_check_after,omitempty"`
	// OperationDeadline ends the wait for an engine operation.
	OperationDeadline time.Time `json:"operation_deadline,omitzero"`
	TranscriptKey     string    `json:"transcript_key,omitempty"`
	RawKey            string    `json:"raw_key,omitempty"`
	DetectedLanguage  string    `json:"detected_language,omitempty"`
	Words             int       `json:"words,omitempty"`
	// Service and ServiceVersion name the recognition service that did the
	// work, for engines that hand jobs to services; NeedsCheck is set when
	// that service asked for a person to review the transcript.
	Service        string `json:"service,omitempty"`
	ServiceVersion string `json:"service_version,omitempty"`
	NeedsCheck     bool   `json:"needs_check,omitempty"`
}

// Chunk is one piece of a split recording and where it starts in it.
type Chunk struct {
	Piece
	Offset time.Duration `json:"offset"`
}

// Result is what a closed job returns.
type Result struct {
	State         job.State    `json:"state"`
	TranscriptKey string       `json:"transcript_key,omitempty"`
	Failure       *job.Failure `json:"failure,omitempty"`
}

// EngineCallback is the argument of the engine_callback signal: the
// engine's word that an operation finished. It only wakes the job; the job
// still checks the operation itself, so a forged or stale callback costs
// one check and changes nothing.
type EngineCallback struct {
	OperationID string `json:"operation_id"`
	Status      string `json:"status,omitempty"`
}

// SetLanguageRequest is the argument of the set_language update.
type SetLanguageRequest struct {
	Language string `json:"language"`
}

// AnnotateRequest is the argument of the annotate update. Empty fields are
// left as they are.
type AnnotateRequest struct {
	Title string `json:"title,omitempty"`
	Note  string `json:"note,omitempty"`
}
