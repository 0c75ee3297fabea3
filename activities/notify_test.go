package activities

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
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
	before := time.Now().Unix()
	if err := notify(t, &Notifier{Secret: secret, AllowLoopback: true}, NotifyInput{URL: rc.URL + "/hook?token=abc", Event: ev}); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ts := rc.header.Get(TimestampHeader)
	if sent, err := strconv.ParseInt(ts, 10, 64); err != nil || sent < before || sent > time.Now().Unix() {
		t.Errorf("timestamp = %q; want the Unix second it was sent", ts)
	}
	if got, want := rc.header.Get(SignatureHeader), Sign(secret, ts, rc.body); got != want || !strings.HasPrefix(got, "sha256=") || len(got) != len("sha256=")+64 {
		t.Errorf("signature = %q; want %q", got, want)
	}
	// The timestamp is signed: a replay with a fresh one does not verify.
	if Sign(secret, strconv.FormatInt(time.Now().Unix()+60, 10), rc.body) == rc.header.Get(SignatureHeader) {
		t.Error("the signature does not cover the timestamp")
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
	// RFC 4231, test case 2: the signed text is "<timestamp>.<body>".
	want := "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got := Sign([]byte("Jefe"), "what do ya want", []byte(" for nothing?")[1:]); got == want {
		t.Errorf("the dot between timestamp and body is not signed")
	}
	if got := Sign([]byte("Jefe"), "what do ya", []byte("want for nothing?")); got != "sha256="+hmacHex("Jefe", "what do ya.want for nothing?") {
		t.Errorf("Sign = %s", got)
	}
	if hmacHex("Jefe", "what do ya want for nothing?") != want[len("sha256="):] {
		t.Error("hmacHex is not HMAC-SHA256")
	}
}

func hmacHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
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
		{name: "this machine by name", notifier: &Notifier{Secret: []byte("k")}, url: "http://localhost.:1/hook", errType: string(job.WebhookRefused)},
		{name: "cloud metadata", notifier: &Notifier{Secret: []byte("k"), AllowLoopback: true}, url: "http://169.254.169.254/latest/meta-data", errType: string(job.WebhookRefused)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.notifier
			if n == nil {
				n = &Notifier{Secret: []byte("k"), AllowLoopback: true}
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

// Scenario: Webhook URLs on this machine, link-local or unspecified addresses are refused
func TestCheckWebhookURL(t *testing.T) {
	tests := []struct {
		url           string
		ok, loopback  bool
		wantInMessage string
	}{
		{url: "https://example.com/hook", ok: true},
		{url: "http://10.1.2.3:8080/hook", ok: true},
		{url: "http://192.168.1.20/hook", ok: true},
		{url: "http://[fd00::1]/hook", ok: true},
		{url: "http://127.0.0.1:8080/x?y=1", wantInMessage: "loopback"},
		{url: "http://127.0.0.1:8080/x?y=1", ok: true, loopback: true},
		{url: "http://[::1]/x", wantInMessage: "loopback"},
		{url: "http://localhost:9/x", wantInMessage: "this machine"},
		{url: "http://api.localhost/x", wantInMessage: "this machine"},
		{url: "http://localhost:9/x", ok: true, loopback: true},
		{url: "http://169.254.169.254/latest/meta-data", wantInMessage: "link-local"},
		{url: "http://169.254.169.254/latest/meta-data", loopback: true, wantInMessage: "instance metadata"},
		{url: "http://[fe80::1]/x", wantInMessage: "link-local"},
		{url: "http://[::ffff:169.254.169.254]/x", wantInMessage: "link-local"},
		{url: "http://0.0.0.0:80/x", wantInMessage: "unspecified"},
		{url: "http://239.1.2.3/x", wantInMessage: "multicast"},
		{url: "ftp://example.com/", wantInMessage: "http or https"},
		{url: "javascript:alert(1)", wantInMessage: "http or https"},
		{url: "/relative"},
		{url: "https://user:pw@example.com/"},
		{url: "https://" + strings.Repeat("a", 2100)},
		{url: "http://"},
	}
	for _, tc := range tests {
		err := CheckWebhookURL(tc.url, tc.loopback)
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), tc.wantInMessage) {
			t.Errorf("CheckWebhookURL(%.50q, loopback %v) = %v; want ok %v (%q)", tc.url, tc.loopback, err, tc.ok, tc.wantInMessage)
		}
	}
}

// Scenario: A webhook is refused at the address actually dialled, whatever name led there
func TestWebhookClientChecksTheDialledAddress(t *testing.T) {
	rc := newReceiver(t, http.StatusNoContent, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(rc.URL, "http://"))
	// The name passes CheckWebhookURL's look at the text; only the dial
	// learns that it is this machine.
	byName := "http://" + net.JoinHostPort("ip6-localhost-or-not.invalid", port)
	if err := CheckWebhookURL(byName, false); err != nil {
		t.Fatalf("CheckWebhookURL(%s) = %v; a name is checked when dialled", byName, err)
	}
	for _, tc := range []struct {
		url      string
		loopback bool
		refused  bool
	}{
		{rc.URL, false, true},
		{"http://" + net.JoinHostPort("localhost", port), false, true},
		{rc.URL, true, false},
		{"http://" + net.JoinHostPort("localhost", port), true, false},
	} {
		resp, err := NewWebhookClient(tc.loopback).Post(tc.url, "application/json", strings.NewReader("{}"))
		if err == nil {
			_ = resp.Body.Close()
		}
		var refused *refusedAddrError
		if got := errors.As(err, &refused); got != tc.refused {
			t.Errorf("POST %s (loopback allowed %v): err %v; want refused %v", tc.url, tc.loopback, err, tc.refused)
		}
	}
}
