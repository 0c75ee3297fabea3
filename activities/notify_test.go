package activities

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/transcriber/transcriber/internal/job"
)

// receiver is a webhook endpoint that checks signatures as a client of the
// API would, and answers what the test says.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	header   http.Header
	body     []byte
	requests int
}

func newReceiver(t *testing.T, status int, header http.Header) *receiver {
	rc := &receiver{status: status, header: header}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.requests++
		rc.body = body
		rc.header = r.Header.Clone()
		status := rc.status
		rc.mu.Unlock()
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		if status == http.StatusFound {
			w.Header().Set("Location", "http://elsewhere.invalid/")
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func notify(t *testing.T, n *Notifier, in NotifyInput) error {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(n)
	_, err := env.ExecuteActivity(n.Notify, in)
	return err
}

func TestNotifyDeliversSignedEvent(t *testing.T) {
	secret := []byte("s3cret")
	rc := newReceiver(t, http.StatusNoContent, nil)
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	f := &job.Failure{Kind: job.NoSpeech, Step: job.Transcribing, Message: "silence", At: at}
	ev := NewEvent("http-a/b", job.SourceHTTP, job.Failed, f, at)
	if err := notify(t, &Notifier{Secret: secret}, NotifyInput{URL: rc.URL + "/hook?token=abc", Event: ev}); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if got, want := rc.header.Get(SignatureHeader), Sign(secret, rc.body); got != want || !strings.HasPrefix(got, "sha256=") || len(got) != len("sha256=")+64 {
		t.Errorf("signature = %q; want %q", got, want)
	}
	if rc.header.Get(EventHeader) != "job.failed" || rc.header.Get(DeliveryHeader) == "" || rc.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers = %v", rc.header)
	}
	var got Event
	if err := json.Unmarshal(rc.body, &got); err != nil {
		t.Fatalf("body %s: %v", rc.body, err)
	}
	if got.JobID != "http-a/b" || got.State != job.Failed || got.Type != "job.failed" || got.Failure == nil || got.Failure.Kind != job.NoSpeech ||
		!got.At.Equal(at) || got.Links["self"] != "/v1/jobs/http-a%2Fb" || got.Links["transcript"] != "/v1/jobs/http-a%2Fb/transcript" {
		t.Errorf("event = %+v", got)
	}
}

func TestSignIsHMACSHA256(t *testing.T) {
	// RFC 4231, test case 2.
	want := "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got := Sign([]byte("Jefe"), []byte("what do ya want for nothing?")); got != want {
		t.Errorf("Sign = %s; want %s", got, want)
	}
}

// Scenario: Webhook deliveries are signed, and only temporary failures are retried
func TestNotifyErrorClassification(t *testing.T) {
	ev := NewEvent("http-x", job.SourceHTTP, job.Done, nil, time.Now())
	tests := []struct {
		name      string
		notifier  *Notifier
		status    int
		url       string
		retryable bool
		errType   string
		delay     time.Duration
	}{
		{name: "server error", status: 503, retryable: true, errType: string(job.ServiceError)},
		{name: "rate limited with Retry-After", status: 429, retryable: true, errType: string(job.ServiceError), delay: 7 * time.Second},
		{name: "timeout", status: 408, retryable: true, errType: string(job.ServiceError)},
		{name: "refused", status: 410, errType: string(job.WebhookRefused)},
		{name: "unauthorized", status: 401, errType: string(job.WebhookRefused)},
		{name: "redirect not followed", status: 302, errType: string(job.WebhookRefused)},
		{name: "not http", url: "ftp://example.com/x", errType: string(job.WebhookRefused)},
		{name: "no secret", notifier: &Notifier{}, status: 200, errType: string(job.WebhookNotConfigured)},
		{name: "nobody listening", url: "http://127.0.0.1:1/hook", retryable: true, errType: string(job.ServiceError)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.notifier
			if n == nil {
				n = &Notifier{Secret: []byte("k")}
			}
			url := tc.url
			if url == "" {
				url = newReceiver(t, tc.status, nil).URL
			}
			err := notify(t, n, NotifyInput{URL: url, Event: ev})
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("err = %v; want an application error", err)
			}
			if appErr.Type() != tc.errType || appErr.NonRetryable() == tc.retryable || appErr.NextRetryDelay() != tc.delay {
				t.Errorf("error type %q, non-retryable %v, delay %v; want %q, %v, %v",
					appErr.Type(), appErr.NonRetryable(), appErr.NextRetryDelay(), tc.errType, !tc.retryable, tc.delay)
			}
			if strings.Contains(err.Error(), "token=") {
				t.Errorf("error %q shows the URL's query", err)
			}
		})
	}
}

func TestCheckWebhookURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://example.com/hook":             true,
		"http://127.0.0.1:8080/x?y=1":          true,
		"ftp://example.com/":                   false,
		"javascript:alert(1)":                  false,
		"/relative":                            false,
		"https://user:pw@example.com/":         false,
		"https://" + strings.Repeat("a", 2100): false,
		"http://":                              false,
	} {
		if err := CheckWebhookURL(u); (err == nil) != ok {
			t.Errorf("CheckWebhookURL(%.40q) = %v; want ok %v", u, err, ok)
		}
	}
}
