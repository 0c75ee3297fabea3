// Package job is the vocabulary of a transcription job shared by the
// workflow, the activities, the intakes and the operator commands: its
// states, where it came from, and the kinds of failure it can meet.
package job

import "time"

// State is where a job is in its life. The values are stored in the
// TranscriptionState search attribute and shown to operators.
type State string

const (
	Accepted     State = "accepted"
	Fetching     State = "fetching"
	Converting   State = "converting"
	Transcribing State = "transcribing"
	Replying     State = "replying"
	Done         State = "done"
	// Failed: a step gave a definitive verdict; waiting for revive.
	Failed State = "failed"
	// Dead: a step ran out of attempts; waiting for revive.
	Dead      State = "dead"
	Cancelled State = "cancelled"
)

// Settled reports whether the job needs no more work unless an operator acts.
func (s State) Settled() bool {
	switch s {
	case Done, Failed, Dead, Cancelled:
		return true
	}
	return false
}

// Source says which intake accepted a job, and so where its reply goes.
type Source string

const (
	SourceCLI      Source = "cli"
	SourceHTTP     Source = "http"
	SourceTelegram Source = "telegram"
)

// Kind classifies a failure. Kinds are the types of the Temporal application
// errors that activities return, the label of transcriber_failures_total,
// and the code users see.
type Kind string

const (
	// Definitive verdicts on the input: the job fails at once.
	EmptyAudio        Kind = "empty_audio"
	UnsupportedFormat Kind = "unsupported_format"
	TooLong           Kind = "too_long"
	NoSpeech          Kind = "no_speech"
	// Definitive verdicts of the engine.
	EngineRejected      Kind = "engine_rejected"
	EngineUnauthorized  Kind = "engine_unauthorized"
	OperationFailed     Kind = "operation_failed"
	EngineNotConfigured Kind = "engine_not_configured"
	// Definitive verdicts of the intake's service (Telegram).
	FileTooBig        Kind = "file_too_big"
	SourceFileMissing Kind = "source_file_missing"
	ServiceRefused    Kind = "service_refused"
	// Temporary trouble: retried with back-off until attempts run out.
	ServiceError Kind = "service_error"
	NoAck        Kind = "no_ack"
	Timeout      Kind = "timeout"
	Internal     Kind = "internal"
	// IntakeNotRunning: the job needs its intake's service (Telegram) and
	// this worker is not connected to it; another worker may be.
	IntakeNotRunning Kind = "intake_not_running"
)

// Failure records why a job stopped.
type Failure struct {
	Kind    Kind   `json:"kind"`
	Step    State  `json:"step"`
	Message string `json:"message"`
	// Attempts is how many times the step ran before it gave up.
	Attempts int       `json:"attempts,omitempty"`
	At       time.Time `json:"at"`
}

// Recipient is where the reply of a job goes. Only Telegram jobs have one.
type Recipient struct {
	ChatID int64 `json:"chat_id,omitempty"`
	// MessageID is the sender's message with the recording; replies quote it.
	MessageID int `json:"message_id,omitempty"`
	// StatusMessageID is the bot's message that shows the job's progress.
	StatusMessageID int `json:"status_message_id,omitempty"`
	// Language is the language the bot speaks to this sender.
	Language string `json:"language,omitempty"`
}
