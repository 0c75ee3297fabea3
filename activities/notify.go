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
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/internal/job"
)

// Headers of a webhook delivery.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256, under the
	// webhook secret, of TimestampHeader's value, a dot and the body.
	SignatureHeader = "X-Transcriber-Signature"
	// TimestampHeader is when the attempt was sent, in Unix seconds. It is
	// signed with the body, so a receiver that refuses old timestamps and
	// delivery ids it has seen cannot be fed a recorded delivery again.
	TimestampHeader = "X-Transcriber-Timestamp"
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
	// AllowLoopback lets webhooks reach this machine's own addresses, for
	// local testing; they are refused otherwise.
	AllowLoopback bool
	// Client sends the requests; nil uses NewWebhookClient.
	Client *http.Client
}

// NewWebhookClient returns the client a Notifier uses by default. A
// redirect is not followed: the receiver's URL is what the sender named.
// Every connection is checked against the address actually dialled, after
// DNS, so that a name cannot resolve (or rebind) its way to an address
// CheckWebhookURL refuses; and no proxy from the environment is used, since
// the proxy, not this check, would choose where the request goes.
func NewWebhookClient(allowLoopback bool) *http.Client {
	d := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("webhook address %q is not an IP address", host)
			}
			if err := checkWebhookAddr(ip, allowLoopback); err != nil {
				return &refusedAddrError{err}
			}
			return nil
		},
	}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConns:        10,
			IdleConnTimeout:     90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Sign returns the value of SignatureHeader for a body sent at timestamp
// (TimestampHeader's value).
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// CheckWebhookURL reports why u cannot receive webhooks, or nil. Hosts
// given as addresses are checked here, so that the sender hears at once;
// names are checked when they are dialled.
func CheckWebhookURL(u string, allowLoopback bool) error {
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
	host := p.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return checkWebhookAddr(ip, allowLoopback)
	}
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); !allowLoopback && (h == "localhost" || strings.HasSuffix(h, ".localhost")) {
		return fmt.Errorf("webhook URL names %s, this machine itself; webhooks go to other hosts", host)
	}
	return nil
}

// refusedAddrError is a dial that checkWebhookAddr stopped; trying again
// reaches the same address.
type refusedAddrError struct{ error }

func (e *refusedAddrError) Unwrap() error { return e.error }

// checkWebhookAddr refuses the addresses a webhook from inside the service
// must never reach: this machine (unless allowed, for local testing),
// link-local ones (where clouds serve instance metadata and credentials,
// 169.254.169.254), and unspecified or multicast ones. Private ranges stay
// allowed: self-hosted receivers live there.
func checkWebhookAddr(ip netip.Addr, allowLoopback bool) error {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback() && !allowLoopback:
		return fmt.Errorf("webhook address %s is this machine itself (loopback); webhooks go to other hosts unless TRANSCRIBER_WEBHOOK_ALLOW_LOOPBACK is set for testing", ip)
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return fmt.Errorf("webhook address %s is link-local, where clouds serve instance metadata; it is never called", ip)
	case ip.IsUnspecified():
		return fmt.Errorf("webhook address %s is unspecified", ip)
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("webhook address %s is multicast", ip)
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
	if err := CheckWebhookURL(in.URL, n.AllowLoopback); err != nil {
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
	// Each attempt is stamped anew: a retry hours later is still fresh,
	// and the delivery id tells the receiver it is the same notice.
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, Sign(n.Secret, ts, body))
	c := n.Client
	if c == nil {
		c = NewWebhookClient(n.AllowLoopback)
	}
	resp, err := c.Do(req)
	var refused *refusedAddrError
	if errors.As(err, &refused) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("webhook to %s: %v", req.URL.Host, refused.error), string(job.WebhookRefused), nil)
	}
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
