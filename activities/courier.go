package activities

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/transcriber/transcriber/internal/job"
)

// Replier talks to the sender through the intake their recording came
// from; each intake that expects replies registers one for its source.
type Replier interface {
	// Acknowledge tells the sender the recording was accepted and returns
	// the id of a status message to edit later.
	Acknowledge(ctx context.Context, to job.Recipient) (statusMessage job.Ref, err error)
	// ShowProgress edits the status message to show the job's state.
	ShowProgress(ctx context.Context, to job.Recipient, s job.State) error
	// Deliver sends the outcome. A reply in several parts records each in
	// parts before and after it goes out, and skips those an earlier
	// attempt sent, so that a retry after a crash repeats at most the part
	// that was in flight.
	Deliver(ctx context.Context, o Outcome, parts PartLog) (Delivery, error)
}

// PartLog is the durable record of a reply's parts across the attempts
// of its step.
type PartLog interface {
	// Sent is how many parts, in order, earlier attempts delivered.
	Sent() int
	// Sending records that part i (from 0) is about to go out. When it
	// fails the part must not be sent: nobody would know it went.
	Sending(ctx context.Context, i int) error
	// Delivered records that part i went out.
	Delivered(ctx context.Context, i int) error
}

// Delivery is how an outcome reached the sender.
type Delivery struct {
	// InStatusMessage is set when the outcome replaced the text of the
	// job's status message instead of arriving as messages of its own.
	InStatusMessage bool `json:"in_status_message,omitempty"`
}

// Fetcher downloads a recording from the service it came from.
type Fetcher interface {
	Fetch(ctx context.Context, fileID string, w io.Writer) (int64, error)
}

// serviceFailure is how a Fetcher or Replier reports trouble with its
// service: whether it may pass, and how long the service asked to wait.
type serviceFailure interface {
	error
	Temporary() bool
	RetryDelay() time.Duration
}

// verdictError is a serviceFailure that is a definitive verdict on the job,
// such as a file the service will never hand out.
type verdictError interface {
	error
	Verdict() (job.Kind, bool)
}

// NoticeInput names the job whose sender is to be told something.
type NoticeInput struct {
	Call
	JobID     string        `json:"job_id"`
	Source    job.Source    `json:"source"`
	Recipient job.Recipient `json:"recipient"`
	State     job.State     `json:"state,omitempty"`
}

// Acknowledge sends the "received" status message. Without a replier it
// does nothing: the reply step records that the sender cannot be reached.
func (a *Activities) Acknowledge(ctx context.Context, in NoticeInput) (job.Ref, error) {
	r, ok := a.Repliers[in.Source]
	if !ok || in.Recipient.Address == "" {
		return "", nil
	}
	id, err := r.Acknowledge(ctx, in.Recipient)
	return id, classify(ctx, in.Call, err)
}

// ShowProgress edits the status message. It is a courtesy: the workflow
// gives it few attempts and goes on without it.
func (a *Activities) ShowProgress(ctx context.Context, in NoticeInput) error {
	r, ok := a.Repliers[in.Source]
	if !ok || in.Recipient.Address == "" || in.Recipient.StatusMessage == "" {
		return nil
	}
	return classify(ctx, in.Call, r.ShowProgress(ctx, in.Recipient, in.State))
}

// FetchInput names a recording held by the intake's service.
type FetchInput struct {
	Call
	Source job.Source `json:"source"`
	FileID string     `json:"file_id"`
	// Ext is the extension to store the original under, e.g. ".ogg".
	Ext string `json:"ext"`
}

// FetchOutput is the stored original.
type FetchOutput struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// FetchOriginal downloads the recording into the blob store, so that the
// job no longer depends on the service keeping it.
func (a *Activities) FetchOriginal(ctx context.Context, in FetchInput) (FetchOutput, error) {
	out, err := a.fetch(ctx, in)
	return out, classify(ctx, in.Call, err)
}

func (a *Activities) fetch(ctx context.Context, in FetchInput) (FetchOutput, error) {
	f, ok := a.Fetchers[in.Source]
	if !ok {
		return FetchOutput{}, fmt.Errorf("%w: no %s connection on this worker", errIntakeNotRunning, in.Source)
	}
	key := attemptKey(ctx, "original"+in.Ext)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := a.Blobs.Put(ctx, key, pr)
		pr.CloseWithError(err)
		done <- err
	}()
	stop := heartbeat(ctx, heartbeatEvery)
	n, err := f.Fetch(ctx, in.FileID, pw)
	stop()
	pw.CloseWithError(err)
	if putErr := <-done; err == nil && putErr != nil {
		err = putErr
	}
	if err != nil {
		return FetchOutput{}, err
	}
	if n == 0 {
		return FetchOutput{}, verdict(job.EmptyAudio, "the recording is empty")
	}
	return FetchOutput{Key: key, Size: n}, nil
}
