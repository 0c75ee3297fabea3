package telegram

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/telegram/telegramtest"
	"github.com/transcriber/transcriber/workflows"
)

// fakeJobs is the job-control layer as the bot sees it, holding jobs in
// memory with the id policy the real one enforces.
type fakeJobs struct {
	mu      sync.Mutex
	started []jobctl.StartRequest
	jobs    map[string]workflows.Status
	revived []string
}

var _ Jobs = (*fakeJobs)(nil)

func (f *fakeJobs) Start(_ context.Context, req jobctl.StartRequest) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Policy != jobctl.OnePerID {
		return false, errors.New("the bot must start one job per message ever")
	}
	if _, ok := f.jobs[req.ID]; ok {
		return true, nil
	}
	f.started = append(f.started, req)
	f.jobs[req.ID] = workflows.Status{JobID: req.ID, State: job.Accepted, Source: req.Input.Source}
	return false, nil
}

func (f *fakeJobs) Status(_ context.Context, id string) (workflows.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.jobs[id]
	if !ok {
		return st, jobctl.ErrNotFound
	}
	return st, nil
}

func (f *fakeJobs) Revive(_ context.Context, id string) (jobctl.Revival, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.jobs[id]
	switch {
	case !ok:
		return jobctl.Revival{}, jobctl.ErrNotFound
	case st.State != job.Failed && st.State != job.Dead:
		return jobctl.Revival{Status: st}, &jobctl.NotRevivableError{ID: id, State: st.State}
	}
	f.revived = append(f.revived, id)
	return jobctl.Revival{Status: st, ResumesAt: st.State}, nil
}

func (f *fakeJobs) set(id string, s job.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.jobs[id]
	st.State = s
	f.jobs[id] = st
}

func (f *fakeJobs) startedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.started)
}

// runBot runs a bot for alice against the stand-in until the test ends.
func runBot(t *testing.T) (*telegramtest.Server, *fakeJobs) {
	t.Helper()
	srv := telegramtest.New(t, token)
	c, err := NewClient(token, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jobs := &fakeJobs{jobs: map[string]workflows.Status{}}
	bot := NewBot(c, jobs, store, BotConfig{
		Allowed: []string{strconv.FormatInt(alice.ID, 10)}, Engine: "local",
		Policy: workflows.DefaultPolicy(), PollTimeout: 100 * time.Millisecond, MaxDuration: 4 * time.Hour,
	}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bot.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return srv, jobs
}

// Scenario: The bot starts one job per message and revives through the job-control layer, without a Temporal server
// Scenario: The bot's jobs belong to the sender
func TestBotStartsAndRevivesThroughJobControl(t *testing.T) {
	srv, jobs := runBot(t)

	voice := srv.PushVoice(alice, srv.AddFile([]byte("OggS voice"), "voice/a.oga"), 3, 10)
	waitUntil(t, "the job to start", func() bool { return jobs.startedCount() == 1 })
	calls := srv.GetUpdatesCalls()
	srv.Redeliver(voice.UpdateID)
	// The call after the one that returned the copy confirms it handled.
	waitUntil(t, "the redelivery to be handled", func() bool { return srv.GetUpdatesCalls() >= calls+2 })
	if n := jobs.startedCount(); n != 1 {
		t.Fatalf("%d jobs started for one message; want 1", n)
	}
	req := jobs.started[0]
	id := workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	if req.ID != id || req.Input.Source != job.SourceTelegram || req.Input.Original.FileID == "" {
		t.Errorf("start = %+v; want job %s from telegram with the voice note's file id", req, id)
	}
	// The sender owns the job, whichever chat it came from.
	if got, want := req.Input.Owner, job.TelegramOwner(alice.ID); got != want {
		t.Errorf("owner = %q; want %q", got, want)
	}
	want := job.Recipient{Address: job.Ref(strconv.FormatInt(voice.ChatID, 10)), Message: job.Ref(strconv.Itoa(voice.MessageID)), Language: "en"}
	if r := req.Input.Recipient; r == nil || *r != want {
		t.Errorf("recipient = %+v; want %+v", r, want)
	}

	ask := func(text string) string {
		t.Helper()
		n := len(srv.SentTo(voice.ChatID))
		srv.PushText(alice, text, &voice)
		sent := waitSentTo(t, srv, voice.ChatID, n+1)
		return sent[n].Text
	}
	jobs.set(id, job.Transcribing)
	if got, want := ask("/retry"), "That job is recognising speech; only failed jobs can be retried."; got != want {
		t.Errorf("/retry of a running job answered %q; want %q", got, want)
	}
	jobs.set(id, job.Dead)
	if got := ask("/retry"); got != "Trying again…" {
		t.Errorf("/retry of a dead job answered %q", got)
	}
	if len(jobs.revived) != 1 || jobs.revived[0] != id {
		t.Errorf("revived %v; want [%s]", jobs.revived, id)
	}
	if got := ask("/status"); got != "Job "+id+": stopped after several attempts." {
		t.Errorf("/status answered %q", got)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitSentTo(t *testing.T, srv *telegramtest.Server, chat int64, n int) []telegramtest.Sent {
	t.Helper()
	var sent []telegramtest.Sent
	waitUntil(t, "a reply", func() bool {
		sent = srv.SentTo(chat)
		return len(sent) >= n
	})
	return sent
}

// Scenario: An empty Telegram recording is refused and makes no job
func TestBotRefusesEmptyRecording(t *testing.T) {
	srv, jobs := runBot(t)
	for _, push := range []func() telegramtest.Message{
		func() telegramtest.Message { return srv.PushVoice(alice, srv.AddFile(nil, "voice/a.oga"), 0, 0) },
		func() telegramtest.Message {
			return srv.PushAudio(alice, srv.AddFile(nil, "music/a.mp3"), "a.mp3", "audio/mpeg", 0)
		},
	} {
		m := push()
		n := len(srv.SentTo(m.ChatID))
		sent := waitSentTo(t, srv, m.ChatID, n+1)
		if got := sent[n]; got.ReplyTo != m.MessageID || got.Text != "This recording is empty: there is nothing to transcribe." {
			t.Errorf("answer = %+v; want the recording called empty, quoting it", got)
		}
	}
	if n := jobs.startedCount(); n != 0 {
		t.Errorf("%d jobs started for empty recordings; want none", n)
	}
	if calls := srv.GetFileCalls(); len(calls) != 0 {
		t.Errorf("getFile %v; want nothing fetched", calls)
	}
}

// Scenario: The help names the 20 MB limit only where the cloud Bot API imposes it
func TestHelpNamesTheDownloadLimitOfTheCloudOnly(t *testing.T) {
	if got := helpText("en", true, time.Hour); !strings.Contains(got, "Limits: files up to 20 MB, recordings up to 1h0m0s.") {
		t.Errorf("cloud help = %q; want the 20 MB limit", got)
	}
	if got := helpText("ru", true, time.Hour); !strings.Contains(got, "файлы до 20 МБ, записи до 1h0m0s") {
		t.Errorf("cloud help in Russian = %q; want the 20 MB limit", got)
	}
	// A bot against a local Bot API server (here the stand-in) says no
	// file limit.
	srv, _ := runBot(t)
	m := srv.PushText(alice, "/help", nil)
	got := waitSentTo(t, srv, m.ChatID, 1)[0].Text
	if strings.Contains(got, "20 MB") || !strings.Contains(got, "Limits: recordings up to 4h0m0s.") {
		t.Errorf("local server help = %q; want only the recordings' limit", got)
	}
}
