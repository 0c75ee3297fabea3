// Package job is the vocabulary of a transcription job shared by the
// workflow, the activities, the intakes and the operator commands: its
// states, where it came from, and the kinds of failure it can meet.
package job

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"
)

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
	SourceVault    Source = "vault"
)

// Failure records why a job stopped.
type Failure struct {
	Kind    Kind   `json:"kind"`
	Step    State  `json:"step"`
	Message string `json:"message"`
	// Attempts is how many times the step ran before it stopped, as
	// counted from its last failure; zero when that does not tell, or when
	// no attempt of a step failed (an engine operation's deadline).
	Attempts int       `json:"attempts,omitempty"`
	At       time.Time `json:"at"`
	// Code is the provider's own name for the error, when an engine gave
	// one ("invalid_api_key", "UNAUTHENTICATED").
	Code string `json:"code,omitempty"`
	// RawKey is the blob key of the engine's answer that the failure comes
	// from (an error body, a failed operation, a result without speech), as
	// received.
	RawKey string `json:"raw_key,omitempty"`
}

// Recipient is where the reply of a job goes, in the terms of the intake
// that accepted it: the intake fills the fields its own way, and only it
// reads them. A job with a recipient expects a reply; a job without one
// (the command line, HTTP) is fetched by its sender instead.
type Recipient struct {
	// Address is where the intake delivers the reply (a Telegram chat id).
	Address Ref `json:"address,omitempty"`
	// Message is the sender's message with the recording; replies refer
	// to it.
	Message Ref `json:"message,omitempty"`
	// StatusMessage is the intake's own message that shows the job's
	// progress, once it has sent one.
	StatusMessage Ref `json:"status_message,omitempty"`
	// Language is the language the intake speaks to this sender.
	Language string `json:"language,omitempty"`
}

// UnmarshalJSON also reads the Telegram-shaped recipient that jobs started
// before recipients were neutral carry in their histories (chat_id,
// message_id, status_message_id), so that those jobs still reply.
func (r *Recipient) UnmarshalJSON(b []byte) error {
	type plain Recipient
	var v struct {
		plain
		ChatID          Ref `json:"chat_id"`
		MessageID       Ref `json:"message_id"`
		StatusMessageID Ref `json:"status_message_id"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Recipient(v.plain)
	r.Address = cmp.Or(r.Address, v.ChatID)
	r.Message = cmp.Or(r.Message, v.MessageID)
	r.StatusMessage = cmp.Or(r.StatusMessage, v.StatusMessageID)
	return nil
}

// Ref is an intake's id of a chat, a message or a note. It reads from JSON
// strings and numbers alike, since the ids of older jobs were numbers.
type Ref string

// UnmarshalJSON accepts a string or a number.
func (r *Ref) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*r = Ref(s)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("an id must be a string or a number, got %s", b)
	}
	// Zero was "none" when ids were numbers.
	if n == "0" {
		*r = ""
		return nil
	}
	*r = Ref(n)
	return nil
}
