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
