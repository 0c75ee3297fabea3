package main

// Telegram replies under kill -9: a worker lost between Telegram accepting
// a reply and Temporal recording the step's completion, and the whole
// service killed again and again while it answers many voice notes.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/telegram/telegramtest"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

// telegramCluster is a cluster whose workers talk to the Telegram
// stand-in, with the bot running as a process of its own.
func telegramCluster(t *testing.T, engineURL string, tg *telegramtest.Server) *cluster {
	t.Helper()
	cl := startCluster(t, engineURL)
	cl.env = append(cl.env,
		"TELEGRAM_BOT_TOKEN="+botToken,
		"TELEGRAM_API_ENDPOINT="+tg.URL(),
		"TELEGRAM_ALLOWED_USERS="+strconv.FormatInt(owner.ID, 10),
	)
	startProc(t, append(cl.env, fmt.Sprintf("TRANSCRIBER_HTTP_ADDR=127.0.0.1:%d", freePort(t))), "bot")
	return cl
}

// awaitJob waits for the job to close and returns its result.
func awaitJob(t *testing.T, c client.Client, id string) workflows.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var r workflows.Result
	var err error
	for ctx.Err() == nil {
		// The job may not have started yet when the bot is slow.
		if err = c.GetWorkflow(ctx, id, "").Get(ctx, &r); err == nil {
			return r
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("job %s did not close: %v", id, err)
	return r
}

// killOnceAccepted waits until Telegram took the call that accepted
// holds, kills the worker that made it before the answer reaches it, and
// starts another worker to take the step over.
func killOnceAccepted(t *testing.T, cl *cluster, first *proc, accepted <-chan telegramtest.Sent, release func(), what string) telegramtest.Sent {
	t.Helper()
	var s telegramtest.Sent
	select {
	case s = <-accepted:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s never reached Telegram", what)
	}
	first.kill()
	release()
	cl.worker(t)
	return s
}

// replyAttempts is the attempt of the job's reply step that completed.
func replyAttempts(t *testing.T, c client.Client, id string) int32 {
	t.Helper()
	scheduled := map[int64]bool{}
	var attempt int32
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "SendReply" {
			scheduled[e.GetEventId()] = true
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] {
			attempt = a.GetAttempt()
		}
	}
	return attempt
}

// Scenario: A worker killed after Telegram accepted the transcript does not make it arrive twice
func TestTelegramReplyOnceWhenWorkerKilledAfterTelegramAccepted(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	tg := telegramtest.New(t, botToken)
	engine := newOpenAIStandIn(t)
	cl := telegramCluster(t, engine.URL, tg)
	first := cl.worker(t)
	// Telegram takes the transcript; its answer never reaches the worker,
	// which dies before it can report the step done.
	accepted, release := tg.HoldAnswer(func(s telegramtest.Sent) bool { return s.Text == testaudio.GoForwardText })
	defer release()
	voice := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	killOnceAccepted(t, cl, first, accepted, release, "the transcript")
	id := workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	if r := awaitJob(t, cl.c, id); r.State != "done" {
		t.Fatalf("job %s = %+v; want done", id, r)
	}
	if n := replyAttempts(t, cl.c, id); n < 2 {
		t.Errorf("the reply step completed in attempt %d; want a retry after the lost worker", n)
	}
	got := showing(tg, voice.ChatID, testaudio.GoForwardText)
	if len(got) != 1 || got[0].ReplyTo != voice.MessageID {
		t.Fatalf("messages showing the transcript = %+v; want exactly one, quoting the voice note", got)
	}
	if shown := tg.BotMessages(voice.ChatID); len(shown) != 1 {
		t.Errorf("the chat shows %+v; want only the status message, now the transcript", shown)
	}
}

// Scenario: A worker killed in the middle of a long reply repeats at most the part in flight
func TestTelegramLongReplyResumesAfterKilledWorker(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	tg := telegramtest.New(t, botToken)
	engine := newOpenAIStandIn(t)
	// Three messages' worth: sent as replies of their own, not in the
	// status message.
	sentences := make([]string, 220)
	for i := range sentences {
		sentences[i] = fmt.Sprintf("Sentence number %d of a long recording goes here.", i)
	}
	engine.mu.Lock()
	engine.text = strings.Join(sentences, " ")
	engine.mu.Unlock()
	cl := telegramCluster(t, engine.URL, tg)
	first := cl.worker(t)
	parts := 0
	accepted, release := tg.HoldAnswer(func(s telegramtest.Sent) bool {
		if s.Method == "sendMessage" && strings.HasPrefix(s.Text, "Sentence number") {
			parts++
		}
		return parts == 2
	})
	defer release()
	voice := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	second := killOnceAccepted(t, cl, first, accepted, release, "the second part")
	id := workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	if r := awaitJob(t, cl.c, id); r.State != "done" {
		t.Fatalf("job %s = %+v; want done", id, r)
	}
	var texts []string
	for _, m := range tg.BotMessages(voice.ChatID) {
		if strings.HasPrefix(m.Text, "Sentence number") {
			texts = append(texts, m.Text)
		}
	}
	// The part in flight may come twice, no other part may.
	if len(texts) != 4 || texts[1] != second.Text || texts[2] != second.Text || texts[0] == texts[3] {
		t.Fatalf("the parts arrived as %d messages; want the three parts with only the second repeated", len(texts))
	}
	if got := strings.Join([]string{texts[0], texts[2], texts[3]}, " "); got != strings.Join(sentences, " ") {
		t.Error("the parts do not make up the transcript")
	}
}

// Scenario: Sixty voice notes answered while the service is killed with -9 and restarted get one transcript each
func TestTelegramSixtyNotesUnderKills(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	const notes = 60
	const maxKills = 10
	tg := telegramtest.New(t, botToken)
	// Each transcript reaches Telegram well before its answer reaches the
	// service, as over a slow network, so that kills land in that window.
	tg.DelayAnswers(func(s telegramtest.Sent) bool { return s.Text == testaudio.GoForwardText }, 1500*time.Millisecond)
	engine := newOpenAIStandIn(t)
	dataDir := t.TempDir()
	environ := []string{
		"TRANSCRIBER_DATA_DIR=" + dataDir,
		"TRANSCRIBER_ENGINE=openai",
		"OPENAI_BASE_URL=" + engine.URL + "/v1",
		"TRANSCRIBER_RETRY_SCHEDULE=1s",
		"TRANSCRIBER_TEMPORAL_PORT=" + strconv.Itoa(freePort(t)),
		fmt.Sprintf("TRANSCRIBER_HTTP_ADDR=127.0.0.1:%d", freePort(t)),
		"TRANSCRIBER_UI_ADDR=off",
		"TELEGRAM_BOT_TOKEN=" + botToken,
		"TELEGRAM_API_ENDPOINT=" + tg.URL(),
		"TELEGRAM_ALLOWED_USERS=" + strconv.FormatInt(owner.ID, 10),
	}
	start := time.Now()
	up := startProc(t, environ, "up")
	note := voiceNoteBytes(t)
	voices := make([]telegramtest.Message, notes)
	for i := range voices {
		voices[i] = tg.PushVoice(owner, tg.AddFile(note, "voice/file.oga"), 3, int64(len(note)))
	}
	answered := func() int {
		n := 0
		for _, v := range voices {
			if len(quoting(tg, v, testaudio.GoForwardText)) > 0 {
				n++
			}
		}
		return n
	}
	kills := 0
	killUntil := time.Now().Add(90 * time.Second)
	for kills < maxKills && time.Now().Before(killUntil) && answered() < notes {
		// Sixty short jobs take seconds, so the kills come often enough
		// to land several times among them.
		time.Sleep(time.Duration(700+rand.IntN(1300)) * time.Millisecond)
		up.kill()
		kills++
		up = startProc(t, environ, "up")
	}
	deadline := time.Now().Add(4 * time.Minute)
	for answered() < notes && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	// Replies retried after the last kill have had their chance to repeat.
	time.Sleep(3 * time.Second)
	t.Logf("%d notes, %d kills, all answered after %s", notes, kills, time.Since(start).Round(time.Second))
	if kills < 3 {
		t.Errorf("the service was killed %d times; the run proves little under 3", kills)
	}
	for i, v := range voices {
		if n := len(quoting(tg, v, testaudio.GoForwardText)); n != 1 {
			t.Errorf("note %d (message %d) shows its transcript %d times; want once", i+1, v.MessageID, n)
		}
	}
	if n := len(showing(tg, owner.ID, testaudio.GoForwardText)); n != notes {
		t.Errorf("%d messages show a transcript; want %d", n, notes)
	}
}

// quoting returns the bot's messages that quote the recording and read
// text.
func quoting(tg *telegramtest.Server, recording telegramtest.Message, text string) []telegramtest.Shown {
	var out []telegramtest.Shown
	for _, m := range tg.BotMessages(recording.ChatID) {
		if quotes(recording, text)(m) {
			out = append(out, m)
		}
	}
	return out
}
