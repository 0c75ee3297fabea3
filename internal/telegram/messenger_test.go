package telegram

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/telegram/telegramtest"
)

const token = "123456:TEST-token-that-must-not-leak"

var alice = telegramtest.User{ID: 4242, Username: "alice", FirstName: "Alice", LanguageCode: "en"}

func newMessenger(t *testing.T) (*Messenger, *telegramtest.Server) {
	t.Helper()
	srv := telegramtest.New(t, token)
	c, err := NewClient(token, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewMessenger(c), srv
}

func TestAcknowledgeAndShowProgress(t *testing.T) {
	m, srv := newMessenger(t)
	voice := srv.PushVoice(alice, srv.AddFile([]byte("OggS"), "voice/a.oga"), 3, 4)
	to := *recipient(voice.ChatID, voice.MessageID, "ru")
	id, err := m.Acknowledge(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	to.StatusMessage = id
	for _, s := range []job.State{job.Converting, job.Converting, job.Done} {
		if err := m.ShowProgress(context.Background(), to, s); err != nil {
			t.Fatalf("ShowProgress(%s): %v", s, err)
		}
	}
	sent := srv.Sent()
	if len(sent) != 3 || sent[0].Method != "sendMessage" || sent[0].ReplyTo != voice.MessageID || sent[0].Text != "Получено, в очереди…" {
		t.Fatalf("sent = %+v", sent)
	}
	if sent[1].Method != "editMessageText" || strconv.Itoa(sent[1].MessageID) != string(id) || sent[1].Text != "⏳ конвертирую…" || sent[2].Text != "✅ готово" {
		t.Errorf("edits = %+v; the repeated state must not fail", sent[1:])
	}
}

// Scenario: A transcript comes back as replies, or as a document when long
func TestDeliver(t *testing.T) {
	sentence := "The quick brown fox jumps over the lazy dog. "
	tests := []struct {
		name        string
		outcome     activities.Outcome
		alreadySent int
		wantMethods []string
		wantText    string
	}{
		{"short transcript", activities.Outcome{State: job.Done, Text: "go forward ten meters"}, 0,
			[]string{"sendMessage"}, "go forward ten meters"},
		{"three messages", activities.Outcome{State: job.Done, Text: strings.Repeat(sentence, 220)}, 0,
			[]string{"sendMessage", "sendMessage", "sendMessage"}, "The quick brown fox"},
		{"resumed after the first part", activities.Outcome{State: job.Done, Text: strings.Repeat(sentence, 220)}, 1,
			[]string{"sendMessage", "sendMessage"}, "The quick brown fox"},
		{"very long as a document", activities.Outcome{State: job.Done, Text: strings.Repeat(sentence, 400)}, 0,
			[]string{"sendDocument"}, "The text is long, so here it is as a file."},
		{"failure notice", activities.Outcome{State: job.Failed, Failure: &job.Failure{Kind: job.NoSpeech}}, 0,
			[]string{"sendMessage"}, "Sorry, I couldn't transcribe this: no speech was recognised in the recording."},
		{"dead notice", activities.Outcome{State: job.Dead, Failure: &job.Failure{Kind: job.ServiceError}}, 0,
			[]string{"sendMessage"}, "I tried several times"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, srv := newMessenger(t)
			voice := srv.PushVoice(alice, srv.AddFile([]byte("OggS"), "voice/a.oga"), 3, 4)
			o := tc.outcome
			o.Recipient = *recipient(voice.ChatID, voice.MessageID, "en")
			log := &memoryLog{sent: tc.alreadySent}
			if _, err := m.Deliver(context.Background(), o, log); err != nil {
				t.Fatal(err)
			}
			sent := srv.Sent()
			if len(sent) != len(tc.wantMethods) {
				t.Fatalf("sent %d messages; want %d", len(sent), len(tc.wantMethods))
			}
			for i, s := range sent {
				if s.Method != tc.wantMethods[i] || s.ReplyTo != voice.MessageID {
					t.Errorf("message %d = %s replying to %d; want %s replying to %d", i, s.Method, s.ReplyTo, tc.wantMethods[i], voice.MessageID)
				}
			}
			if !strings.Contains(sent[0].Text, tc.wantText) {
				t.Errorf("first message = %.80q; want it to contain %q", sent[0].Text, tc.wantText)
			}
			if log.sent != tc.alreadySent+len(sent) || log.sending != nil {
				t.Errorf("log says %d sent, %v in flight; want %d sent, none in flight", log.sent, log.sending, tc.alreadySent+len(sent))
			}
			if tc.name == "very long as a document" && (sent[0].FileName != "transcript.txt" || !bytes.Equal(sent[0].File, []byte(o.Text+"\n"))) {
				t.Errorf("document %q of %d bytes; want the whole text", sent[0].FileName, len(sent[0].File))
			}
		})
	}
}

// memoryLog is a part log that an attempt's retry shares in memory.
type memoryLog struct {
	sent    int
	sending *int
	fail    error
}

var _ activities.PartLog = (*memoryLog)(nil)

func (l *memoryLog) Sent() int { return l.sent }
func (l *memoryLog) Sending(_ context.Context, i int) error {
	if l.fail != nil {
		return l.fail
	}
	l.sending = &i
	return nil
}
func (l *memoryLog) Delivered(_ context.Context, i int) error {
	l.sent, l.sending = i+1, nil
	return nil
}

// Scenario: A reply that fits one message replaces the status message, and a retry changes nothing
func TestDeliverIntoStatusMessage(t *testing.T) {
	sentence := "The quick brown fox jumps over the lazy dog. "
	tests := []struct {
		name    string
		outcome activities.Outcome
		// status is the status message's id: "" for a job whose
		// acknowledgement failed, "ack" for the one Acknowledge sent.
		status      string
		wantMethods []string
		wantIn      bool
	}{
		{"transcript", activities.Outcome{State: job.Done, Text: "go forward ten meters", UseStatusMessage: true}, "ack",
			[]string{"editMessageText"}, true},
		{"failure notice", activities.Outcome{State: job.Failed, Failure: &job.Failure{Kind: job.NoSpeech}, UseStatusMessage: true}, "ack",
			[]string{"editMessageText"}, true},
		{"several messages are sent", activities.Outcome{State: job.Done, Text: strings.Repeat(sentence, 220), UseStatusMessage: true}, "ack",
			[]string{"sendMessage", "sendMessage", "sendMessage"}, false},
		{"a job from before the change sends", activities.Outcome{State: job.Done, Text: "go forward ten meters"}, "ack",
			[]string{"sendMessage"}, false},
		{"no status message", activities.Outcome{State: job.Done, Text: "go forward ten meters", UseStatusMessage: true}, "",
			[]string{"sendMessage"}, false},
		{"the status message was deleted", activities.Outcome{State: job.Done, Text: "go forward ten meters", UseStatusMessage: true}, "777",
			[]string{"sendMessage"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, srv := newMessenger(t)
			voice := srv.PushVoice(alice, srv.AddFile([]byte("OggS"), "voice/a.oga"), 3, 4)
			o := tc.outcome
			o.Recipient = *recipient(voice.ChatID, voice.MessageID, "en")
			switch tc.status {
			case "ack":
				id, err := m.Acknowledge(context.Background(), o.Recipient)
				if err != nil {
					t.Fatal(err)
				}
				o.Recipient.StatusMessage = id
			default:
				o.Recipient.StatusMessage = job.Ref(tc.status)
			}
			before := len(srv.Sent())
			log := &memoryLog{}
			// The second call is the retry of an attempt that delivered
			// and died before its completion was recorded.
			for attempt := range 2 {
				d, err := m.Deliver(context.Background(), o, log)
				if err != nil {
					t.Fatalf("attempt %d: %v", attempt+1, err)
				}
				if d.InStatusMessage != tc.wantIn {
					t.Errorf("attempt %d: in the status message %v; want %v", attempt+1, d.InStatusMessage, tc.wantIn)
				}
			}
			sent := srv.Sent()[before:]
			if len(sent) != len(tc.wantMethods) {
				t.Fatalf("calls = %+v; want %v", sent, tc.wantMethods)
			}
			for i, s := range sent {
				if s.Method != tc.wantMethods[i] {
					t.Errorf("call %d = %s; want %s", i, s.Method, tc.wantMethods[i])
				}
				if s.Method == "editMessageText" && string(o.Recipient.StatusMessage) != strconv.Itoa(s.MessageID) {
					t.Errorf("edited message %d; want the status message %s", s.MessageID, o.Recipient.StatusMessage)
				}
				if s.Method == "sendMessage" && s.ReplyTo != voice.MessageID {
					t.Errorf("message %d replies to %d; want the voice note %d", i, s.ReplyTo, voice.MessageID)
				}
			}
			if o.State == job.Done && len(tc.wantMethods) == 1 && sent[0].Text != o.Text {
				t.Errorf("text = %q; want the transcript", sent[0].Text)
			}
		})
	}
}

// Scenario: A part whose sending cannot be recorded is not sent
func TestDeliverRecordsBeforeSending(t *testing.T) {
	m, srv := newMessenger(t)
	voice := srv.PushVoice(alice, srv.AddFile([]byte("OggS"), "voice/a.oga"), 3, 4)
	o := activities.Outcome{State: job.Done, Text: "go forward ten meters", Recipient: *recipient(voice.ChatID, voice.MessageID, "en")}
	if _, err := m.Deliver(context.Background(), o, &memoryLog{fail: errors.New("store down")}); err == nil {
		t.Fatal("Deliver succeeded without its record")
	}
	if n := len(srv.Sent()); n != 0 {
		t.Errorf("sent %d messages with no record of them", n)
	}
}

// Scenario: Telegram's flood control sets the wait before a retry
func TestDeliverErrors(t *testing.T) {
	tests := []struct {
		name      string
		fault     func(srv *telegramtest.Server)
		temporary bool
		delay     time.Duration
	}{
		{"429 retry_after", func(s *telegramtest.Server) { s.RateLimitNext("sendMessage", 1, 17) }, true, 17 * time.Second},
		{"blocked by the user", func(s *telegramtest.Server) {
			s.FailNext("sendMessage", 1, 403, "Forbidden: bot was blocked by the user")
		}, false, 0},
		{"server trouble", func(s *telegramtest.Server) { s.FailNext("sendMessage", 1, 502, "Bad Gateway") }, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, srv := newMessenger(t)
			voice := srv.PushVoice(alice, srv.AddFile([]byte("OggS"), "voice/a.oga"), 3, 4)
			tc.fault(srv)
			_, err := m.Deliver(context.Background(), activities.Outcome{State: job.Done, Text: "hi",
				Recipient: *recipient(voice.ChatID, voice.MessageID, "")}, &memoryLog{})
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("error = %v; want a telegram error", err)
			}
			if te.Temporary() != tc.temporary || te.RetryDelay() != tc.delay {
				t.Errorf("temporary %v, delay %v; want %v, %v", te.Temporary(), te.RetryDelay(), tc.temporary, tc.delay)
			}
			if strings.Contains(err.Error(), token) {
				t.Error("the error holds the token")
			}
		})
	}
}

// Scenario: The recording is downloaded through the configured endpoint or read from a local server's disk
func TestFetch(t *testing.T) {
	voice := []byte("OggS\x00\x02 a voice note")
	t.Run("through the endpoint", func(t *testing.T) {
		m, srv := newMessenger(t)
		id := srv.AddFile(voice, "voice/a.oga")
		var buf bytes.Buffer
		n, err := m.Fetch(context.Background(), id, &buf)
		if err != nil || n != int64(len(voice)) || !bytes.Equal(buf.Bytes(), voice) {
			t.Fatalf("Fetch = %d, %v, %q", n, err, buf.Bytes())
		}
		if d := srv.Downloads(); len(d) != 1 {
			t.Errorf("downloads = %v", d)
		}
	})
	t.Run("local Bot API server", func(t *testing.T) {
		m, srv := newMessenger(t)
		srv.SetLocalMode(t.TempDir())
		id := srv.AddFile(voice, "voice/a.oga")
		var buf bytes.Buffer
		if _, err := m.Fetch(context.Background(), id, &buf); err != nil || !bytes.Equal(buf.Bytes(), voice) {
			t.Fatalf("Fetch = %v, %q", err, buf.Bytes())
		}
	})
	for _, tc := range []struct {
		name string
		id   func(*telegramtest.Server) string
		want job.Kind
	}{
		{"too big", func(s *telegramtest.Server) string { return s.AddTooBigFile(25 << 20) }, job.FileTooBig},
		{"unknown file", func(*telegramtest.Server) string { return "no-such-file" }, job.SourceFileMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv := newMessenger(t)
			_, err := m.Fetch(context.Background(), tc.id(srv), &bytes.Buffer{})
			var v interface{ Verdict() (job.Kind, bool) }
			if !errors.As(err, &v) {
				t.Fatalf("error = %v; want a verdict", err)
			}
			if k, ok := v.Verdict(); !ok || k != tc.want {
				t.Errorf("verdict = %s, %v; want %s", k, ok, tc.want)
			}
		})
	}
}

func TestUnreachableTelegramIsTemporaryAndHidesTheToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := NewClient(token, "http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetMe(context.Background())
	var te *Error
	if !errors.As(err, &te) || !te.Temporary() {
		t.Fatalf("error = %v; want a temporary telegram error", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("error %q holds the token", err)
	}
}
