package activities

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/internal/job"
)

// Headers of a webhook delivery.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body
	// under the webhook secret.
	SignatureHeader = "X-Transcriber-Signature"
	// EventHeader names the event, e.g. "job.done".
	EventHeader = "X-Transcriber-Event"
	// DeliveryHeader is the same for every attempt of one notice, so a
	// receiver can drop a notice it already handled.
	DeliveryHeader = "X-Transcriber-Delivery"
)

// maxRetryAfter caps the wait a receiver may ask for between attempts.
const maxRetryAfter = 10 * time.Minute

// Event is the body of a webhook: what became of a job.
type Event struct {
	// Type is "job." followed by the state, e.g. "job.done".
	Type    string       `json:"type"`
	JobID   string       `json:"job_id"`
	State   job.State    `json:"state"`
	Source  job.Source   `json:"source"`
	Failure *job.Failure `json:"failure,omitempty"`
	// At is when the job settled.
	At time.Time `json:"at"`
	// Links are the API paths of the job and its transcript.
	Links map[string]string `json:"links"`
}

// NewEvent describes a settled job for its webhook.
func NewEvent(jobID string, source job.Source, state job.State, f *job.Failure, at time.Time) Event {
	self := "/v1/jobs/" + url.PathEscape(jobID)
	return Event{
		Type: "job." + string(state), JobID: jobID, State: state, Source: source, Failure: f, At: at,
		Links: map[string]string{"self": self, "transcript": self + "/transcript"},
	}
}

// NotifyInput is one notice and where it goes.
type NotifyInput struct {
	URL   string `json:"url"`
	Event Event  `json:"event"`
}

// Notifier delivers webhooks. It is its own activity struct because it
// shares nothing with the steps of a job: a notice that cannot be delivered
// never touches the job's state.
type Notifier struct {
	// Secret signs every body; without one nothing is sent.
	Secret []byte
	// Client sends the requests; nil uses one that does not follow
	// redirects and gives up on a request after 30 s.
	Client *http.Client
}

// NewWebhookClient returns the client a Notifier uses by default. A
// redirect is not followed: the receiver's URL is what the sender named.
func NewWebhookClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Sign returns the value of SignatureHeader for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// CheckWebhookURL reports why u cannot receive webhooks, or nil.
func CheckWebhookURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("webhook URL is not a URL: %w", err)
	case p.Scheme != "http" && p.Scheme != "https":
		return errors.New("webhook URL must be an http or https URL")
	case p.Host == "":
		return errors.New("webhook URL has no host")
	case p.User != nil:
		return errors.New("webhook URL must not carry a user name or password")
	case len(u) > 2048:
		return errors.New("webhook URL is longer than 2048 bytes")
	}
	return nil
}

// Notify posts the event to the webhook URL, signed. A 2xx answer is a
// delivery; 408, 429, 5xx and network errors are retried on the workflow's
// back-off (a Retry-After is honoured, up to a cap); any other answer ends
// the retries. The job's outcome never depends on it.
func (n *Notifier) Notify(ctx context.Context, in NotifyInput) error {
	if len(n.Secret) == 0 {
		return temporal.NewNonRetryableApplicationError(
			"webhooks are off on this worker: set TRANSCRIBER_WEBHOOK_SECRET", string(job.WebhookNotConfigured), nil)
	}
	if err := CheckWebhookURL(in.URL); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(job.WebhookRefused), nil)
	}
	body, err := json.Marshal(in.Event)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("encode event: "+err.Error(), string(job.WebhookRefused), nil)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.URL, bytes.NewReader(body))
	if err != nil {
		return temporal.NewNonRetryableApplicationError("webhook request: "+err.Error(), string(job.WebhookRefused), nil)
	}
	info := activity.GetInfo(ctx)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "transcriber-webhook/1")
	req.Header.Set(EventHeader, in.Event.Type)
	req.Header.Set(DeliveryHeader, info.WorkflowExecution.RunID+"-"+info.ActivityID)
	req.Header.Set(SignatureHeader, Sign(n.Secret, body))
	c := n.Client
	if c == nil {
		c = NewWebhookClient()
	}
	resp, err := c.Do(req)
	if err != nil {
		// The URL may carry a token in its query; the error names only the
		// host.
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("webhook to %s: %v", req.URL.Host, unwrapURLError(err)), string(job.ServiceError),
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("webhook to %s answered %d", req.URL.Host, code), string(job.ServiceError),
			temporal.ApplicationErrorOptions{
				Category:       temporal.ApplicationErrorCategoryBenign,
				NextRetryDelay: retryAfter(resp.Header.Get("Retry-After")),
			})
	default:
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("webhook to %s answered %d", req.URL.Host, code), string(job.WebhookRefused), nil)
	}
}

// retryAfter reads a Retry-After of seconds; zero leaves the delay to the
// retry policy.
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(v)
	if err != nil || s <= 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, maxRetryAfter)
}

// unwrapURLError drops the URL that *url.Error repeats in its message.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
