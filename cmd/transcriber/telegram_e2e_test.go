package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/telegram/telegramtest"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

const botToken = "987654:e2e-BOT-token-never-in-logs"

var (
	owner    = telegramtest.User{ID: 5001, Username: "owner", FirstName: "Olga", LanguageCode: "ru"}
	friend   = telegramtest.User{ID: 5002, Username: "Friend", FirstName: "Fred", LanguageCode: "en-GB"}
	stranger = telegramtest.User{ID: 6666, Username: "mallory", FirstName: "Mallory", LanguageCode: "en"}
)

// botEnv is what up needs to run the bot against the stand-in.
func botEnv(tg *telegramtest.Server, extra ...string) []string {
	return append([]string{
		"TELEGRAM_BOT_TOKEN", botToken,
		"TELEGRAM_API_ENDPOINT", tg.URL(),
		"TELEGRAM_ALLOWED_USERS", strconv.FormatInt(owner.ID, 10) + ",@friend",
	}, extra...)
}

func voiceNoteBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor until a message to chat satisfies ok; returns it.
func waitMessage(t *testing.T, tg *telegramtest.Server, chat int64, what string, ok func(telegramtest.Sent) bool) telegramtest.Sent {
	t.Helper()
	var found telegramtest.Sent
	waitFor(t, what, func() bool {
		for _, s := range tg.SentTo(chat) {
			if ok(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// waitShown until one of the bot's messages in chat, as it reads now,
// satisfies ok; returns it.
func waitShown(t *testing.T, tg *telegramtest.Server, chat int64, what string, ok func(telegramtest.Shown) bool) telegramtest.Shown {
	t.Helper()
	var found telegramtest.Shown
	waitFor(t, what, func() bool {
		for _, m := range tg.BotMessages(chat) {
			if ok(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// showing returns the bot's messages in chat that read text now: what the
// sender sees, however many calls made it so.
func showing(tg *telegramtest.Server, chat int64, text string) []telegramtest.Shown {
	var out []telegramtest.Shown
	for _, m := range tg.BotMessages(chat) {
		if m.Text == text {
			out = append(out, m)
		}
	}
	return out
}

// quotes reports a message of the bot that reads text and quotes the
// recording.
func quotes(recording telegramtest.Message, text string) func(telegramtest.Shown) bool {
	return func(m telegramtest.Shown) bool { return m.ReplyTo == recording.MessageID && m.Text == text }
}

func countMessages(tg *telegramtest.Server, chat int64, ok func(telegramtest.Sent) bool) int {
	n := 0
	for _, s := range tg.SentTo(chat) {
		if ok(s) {
			n++
		}
	}
	return n
}

// Scenario: A voice note comes back as text, once, even when Telegram delivers it twice
func TestTelegramVoiceNote(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	u := startUp(t, t.TempDir(), botEnv(tg)...)
	voice := tg.PushVoice(friend, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("calls to the chat: %+v", tg.SentTo(voice.ChatID))
		}
	})
	// The transcript replaces the status message, which quotes the voice
	// note.
	reply := waitShown(t, tg, voice.ChatID, "the transcript", quotes(voice, testaudio.GoForwardText))
	// Telegram delivers the same update again, as after a lost confirmation.
	tg.Redeliver(voice.UpdateID)
	waitFor(t, "the redelivered update to be handled", func() bool {
		return strings.Contains(u.logs.String(), "recording seen again")
	})
	id := workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	waitFor(t, "the job to close as done", func() bool {
		return showField(runCLI(t, u.client, "jobs", "show", id).stdout, "state") == "done"
	})
	time.Sleep(2 * time.Second) // a late duplicate or a "done" over the transcript would be there by now
	if got := showing(tg, voice.ChatID, testaudio.GoForwardText); len(got) != 1 || got[0].MessageID != reply.MessageID {
		t.Errorf("messages showing the transcript = %+v; want only message %d", got, reply.MessageID)
	}
	if n := countMessages(tg, voice.ChatID, func(s telegramtest.Sent) bool { return s.Text == testaudio.GoForwardText }); n != 1 {
		t.Errorf("the transcript went out in %d calls; want one edit", n)
	}
	if n := len(tg.GetFileCalls()); n != 1 {
		t.Errorf("file fetched %d times; want once", n)
	}
	// The status message quoted the voice note, showed the steps and now
	// holds the transcript.
	sent := tg.SentTo(voice.ChatID)
	if sent[0].Method != "sendMessage" || sent[0].ReplyTo != voice.MessageID || sent[0].Text != "Received, in the queue…" {
		t.Errorf("first message = %+v; want the English status message quoting the voice note", sent[0])
	}
	status := sent[0].MessageID
	if reply.MessageID != status {
		t.Errorf("the transcript is in message %d; want the status message %d", reply.MessageID, status)
	}
	for _, step := range []string{"⏳ downloading…", "⏳ converting…", "⏳ recognising speech…"} {
		if countMessages(tg, voice.ChatID, func(s telegramtest.Sent) bool { return s.MessageID == status && s.Text == step }) != 1 {
			t.Errorf("status message never said %q", step)
		}
	}
	if n := countMessages(tg, voice.ChatID, func(s telegramtest.Sent) bool { return strings.HasPrefix(s.Text, "✅") }); n != 0 {
		t.Errorf("the status message said done %d times after the transcript; want never", n)
	}
	if show := runCLI(t, u.client, "jobs", "show", id); showField(show.stdout, "state") != "done" || showField(show.stdout, "source") != "telegram" {
		t.Errorf("jobs show %s:\n%s", id, show.stdout)
	}
	logs := u.logs.String()
	if strings.Contains(logs, testaudio.GoForwardText) || strings.Contains(logs, botToken) {
		t.Error("the log holds the transcript or the bot token")
	}
}

// Scenario: Strangers are refused and nothing of theirs is fetched
func TestTelegramStrangerIsRefused(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	u := startUp(t, t.TempDir(), botEnv(tg)...)
	voice := tg.PushVoice(stranger, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	refusal := waitMessage(t, tg, voice.ChatID, "the refusal", func(s telegramtest.Sent) bool { return s.Method == "sendMessage" })
	if !strings.Contains(refusal.Text, "private") || !strings.Contains(refusal.Text, "6666") {
		t.Errorf("refusal = %q; want a polite refusal naming the stranger's id", refusal.Text)
	}
	time.Sleep(time.Second)
	if calls, downloads := tg.GetFileCalls(), tg.Downloads(); len(calls) != 0 || len(downloads) != 0 {
		t.Errorf("a stranger's file was touched: getFile %v, downloads %v", calls, downloads)
	}
	if list := runCLI(t, u.client, "jobs", "list"); strings.Contains(list.stdout, "tg-") {
		t.Errorf("a stranger got a job:\n%s", list.stdout)
	}
}

// Scenario: A text document, an empty recording and a file over the download limit get explanations
func TestTelegramExplainsWhatItCannotDo(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	u := startUp(t, t.TempDir(), botEnv(tg)...)
	doc := tg.PushDocument(friend, tg.AddFile([]byte("shopping list"), "documents/list.txt"), "list.txt", "text/plain", 13)
	notMedia := waitMessage(t, tg, doc.ChatID, "the explanation", func(s telegramtest.Sent) bool { return s.ReplyTo == doc.MessageID })
	if !strings.Contains(notMedia.Text, "only transcribe voice messages, audio and video") {
		t.Errorf("answer to a text document = %q", notMedia.Text)
	}
	empty := tg.PushVoice(friend, tg.AddFile(nil, "voice/empty.oga"), 0, 0)
	waitMessage(t, tg, empty.ChatID, "the empty-recording answer", func(s telegramtest.Sent) bool {
		return s.ReplyTo == empty.MessageID && strings.Contains(s.Text, "recording is empty")
	})
	big := tg.PushVoice(friend, tg.AddTooBigFile(25<<20), 1500, 25<<20)
	notice := waitShown(t, tg, big.ChatID, "the too-big notice", func(s telegramtest.Shown) bool {
		return s.ReplyTo == big.MessageID && strings.Contains(s.Text, "20 MB")
	})
	if !strings.Contains(notice.Text, "telegram-bot-api --local") || !strings.Contains(notice.Text, "TELEGRAM_API_ENDPOINT") {
		t.Errorf("too-big notice = %q; want the limit and how to lift it", notice.Text)
	}
	if list := runCLI(t, u.client, "jobs", "list"); strings.Count(list.stdout, "tg-") != 1 || !strings.Contains(list.stdout, "failed") {
		t.Errorf("jobs (the document and the empty voice note have none, the big voice note failed):\n%s", list.stdout)
	}
}

// Scenario: The bot speaks the sender's language and answers commands
func TestTelegramCommandsAndLanguage(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	// The engine refuses everything, so that /status and /retry have a failed job.
	engine := newOpenAIStandIn(t)
	engine.set(http.StatusUnauthorized)
	startUp(t, t.TempDir(), botEnv(tg, "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")...)
	start := tg.PushText(owner, "/start", nil)
	help := waitMessage(t, tg, start.ChatID, "help", func(s telegramtest.Sent) bool { return s.ReplyTo == start.MessageID })
	if !strings.Contains(help.Text, "голосовые") || !strings.Contains(help.Text, "Приватность") {
		t.Errorf("/start for a Russian sender = %q", help.Text)
	}
	voice := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	notice := waitShown(t, tg, voice.ChatID, "the failure notice", func(s telegramtest.Shown) bool {
		return s.ReplyTo == voice.MessageID && strings.HasPrefix(s.Text, "Не получилось")
	})
	if !strings.Contains(notice.Text, "ключ доступа") {
		t.Errorf("notice = %q; want the reason in Russian", notice.Text)
	}
	lang := tg.PushText(owner, "/lang en", nil)
	waitMessage(t, tg, lang.ChatID, "/lang", func(s telegramtest.Sent) bool {
		return s.ReplyTo == lang.MessageID && s.Text == "I'll speak English in this chat."
	})
	status := tg.PushText(owner, "/status", &voice)
	statusReply := waitMessage(t, tg, status.ChatID, "/status", func(s telegramtest.Sent) bool { return s.ReplyTo == status.MessageID })
	if !strings.Contains(statusReply.Text, "failed") || !strings.Contains(statusReply.Text, "credentials") {
		t.Errorf("/status = %q; want the state and reason in English now", statusReply.Text)
	}
	engine.set(http.StatusOK)
	retry := tg.PushText(owner, "/retry", &voice)
	waitMessage(t, tg, retry.ChatID, "/retry", func(s telegramtest.Sent) bool { return s.ReplyTo == retry.MessageID && s.Text == "Trying again…" })
	// The transcript replaces the failure notice in the status message.
	after := waitShown(t, tg, voice.ChatID, "the transcript after retry", quotes(voice, testaudio.GoForwardText))
	if after.MessageID != notice.MessageID {
		t.Errorf("the transcript is in message %d; want it in place of the notice, %d", after.MessageID, notice.MessageID)
	}
	bare := tg.PushText(owner, "/status", nil)
	waitMessage(t, tg, bare.ChatID, "/status without a reply", func(s telegramtest.Sent) bool {
		return s.ReplyTo == bare.MessageID && strings.Contains(s.Text, "as a reply")
	})
}

// Scenario: Messages sent while the service was down are handled when it returns
func TestTelegramCatchesUpAfterDowntime(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	voice := tg.PushVoice(friend, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	startUp(t, t.TempDir(), botEnv(tg)...)
	waitShown(t, tg, voice.ChatID, "the transcript", quotes(voice, testaudio.GoForwardText))
}

// Scenario: Undeliverable Telegram replies are recorded across a restart without the bot
func TestTelegramRepliesUndeliverableAfterRestart(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	dataDir := t.TempDir()
	common := []string{"TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL + "/v1", "TRANSCRIBER_RETRY_SCHEDULE", "1s"}
	first := startUp(t, dataDir, append(botEnv(tg), common...)...)
	voice := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	<-engine.inFlight
	// Restart on the same data dir, now without the bot: the job finishes
	// and its reply has nowhere to go.
	first.stop()
	second := startUpOn(t, dataDir, first, common...)
	engine.unblock()
	id := workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	waitFor(t, "the job to finish without its bot", func() bool {
		return showField(runCLI(t, second.client, "jobs", "show", id).stdout, "state") == "done"
	})
	logs := second.logs.String()
	if !strings.Contains(logs, `level=WARN msg="reply undelivered"`) || !strings.Contains(logs, "job_id="+id) || !strings.Contains(logs, "reason=intake_not_running") {
		t.Errorf("no WARN intake_not_running record for %s:\n%s", id, logs)
	}
	_, metrics := get(t, "http://"+second.http+"/metrics")
	if got := metricValue(t, metrics, `transcriber_replies_undelivered_total{reason="intake_not_running"}`); got != "1" {
		t.Errorf("undelivered{intake_not_running} = %s; want 1", got)
	}
	if n := countMessages(tg, voice.ChatID, func(s telegramtest.Sent) bool { return s.Text == testaudio.GoForwardText }); n != 0 {
		t.Errorf("a reply went out through a bot that is not running: %d", n)
	}

	// Restart again with the bot, and meet a Telegram job whose recipient
	// lost its address: only a defect can do that, so it is an ERROR.
	second.stop()
	third := startUpOn(t, dataDir, first, append(botEnv(tg), common...)...)
	blobs, err := blob.NewLocal(filepath.Join(dataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	orphan := "tg-0-1"
	key := blob.JobKey(orphan, "original.ogg")
	if _, err := blobs.Put(context.Background(), key, bytes.NewReader(voiceNoteBytes(t))); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + third.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: orphan, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.Input{Source: job.SourceTelegram, Original: workflows.Original{Key: key}, Engine: "openai", Policy: workflows.DefaultPolicy(),
			// A recipient, so a reply is expected, that lost its chat.
			Recipient: &job.Recipient{Message: "1"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the orphan job to finish", func() bool {
		return showField(runCLI(t, third.client, "jobs", "show", orphan).stdout, "state") == "done"
	})
	logs = third.logs.String()
	if !strings.Contains(logs, `level=ERROR msg="reply undelivered"`) || !strings.Contains(logs, "job_id="+orphan) || !strings.Contains(logs, "reason=recipient_missing") {
		t.Errorf("no ERROR recipient_missing record for %s:\n%s", orphan, logs)
	}
	for _, l := range []string{first.logs.String(), logs, third.logs.String()} {
		if strings.Contains(l, testaudio.GoForwardText) || strings.Contains(l, botToken) {
			t.Error("a log holds the transcript or the bot token")
		}
	}
}

// startUpOn restarts up on the ports and data dir of an earlier instance.
func startUpOn(t *testing.T, dataDir string, prev *upInstance, extra ...string) *upInstance {
	t.Helper()
	return startUpWith(t, dataDir, prev.http, prev.ui, prev.temporal, extra...)
}

// Scenario: The bot runs as its own process beside the workers
func TestTelegramBotRole(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	srv, err := devserver.Start(devserver.Options{Namespace: "default", SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	dataDir := t.TempDir()
	common := []string{"TEMPORAL_ADDRESS", srv.FrontendAddr(), "TRANSCRIBER_DATA_DIR", dataDir,
		"TELEGRAM_BOT_TOKEN", botToken, "TELEGRAM_API_ENDPOINT", tg.URL()}
	// A worker with the token fetches and replies but polls nothing; the bot
	// polls and starts jobs but runs none.
	worker := runRole(t, common, "worker")
	bot := runRole(t, common, "bot")
	waitFor(t, "the bot to start", func() bool { return strings.Contains(bot.String(), "bot=@transcriber_test_bot") })
	if !strings.Contains(bot.String(), "nobody may use the bot: set TELEGRAM_ALLOWED_USERS") {
		t.Errorf("the bot does not say how to allow users:\n%s", bot.String())
	}
	// Nobody is allowed yet: even the owner is refused.
	voice := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	waitMessage(t, tg, voice.ChatID, "the refusal", func(s telegramtest.Sent) bool { return strings.Contains(s.Text, "5001") })
	if strings.Contains(worker.String(), "bot=@") {
		t.Error("a worker polls Telegram")
	}
}

// runRole runs one role of transcriber in this process with the settings of
// common and extra until the test ends, once it is ready, and returns its
// logs.
func runRole(t *testing.T, common []string, name string, extra ...string) *syncBuffer {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	stop, logs := startRole(t, env(append(append(slices.Clone(common), "TRANSCRIBER_HTTP_ADDR", addr), extra...)...), addr, name)
	t.Cleanup(stop)
	return logs
}

// Scenario: A bot without engine settings leaves the engine and the retries to the workers
func TestTelegramBotLeavesEngineToWorkers(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	tg := telegramtest.New(t, botToken)
	engine := newOpenAIStandIn(t)
	srv, err := devserver.Start(devserver.Options{Namespace: "default", SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	common := []string{"TEMPORAL_ADDRESS", srv.FrontendAddr(), "TRANSCRIBER_DATA_DIR", t.TempDir(),
		"TELEGRAM_BOT_TOKEN", botToken, "TELEGRAM_API_ENDPOINT", tg.URL()}
	runRole(t, common, "worker", "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1", "TRANSCRIBER_MAX_ATTEMPTS", "7")
	runRole(t, common, "bot", "TELEGRAM_ALLOWED_USERS", strconv.FormatInt(owner.ID, 10))
	voice := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	waitShown(t, tg, voice.ChatID, "the transcript", quotes(voice, testaudio.GoForwardText))
	id := workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, err := (&jobctl.Service{Client: c, Namespace: "default"}).Status(context.Background(), id); err != nil || st.Policy.MaxAttempts != 7 {
		t.Errorf("the bot's job has at most %d attempts (%v); want the workers' 7", st.Policy.MaxAttempts, err)
	}
	show := runCLI(t, env(common...), "jobs", "show", id)
	if showField(show.stdout, "engine") != "openai" || engine.count() != 1 {
		t.Errorf("the bot's job went to %q (OpenAI stand-in requests: %d); want the workers' openai:\n%s",
			showField(show.stdout, "engine"), engine.count(), show.stdout)
	}
}

// Scenario: A chat whose speech language no engine here recognises is told so, and /speech changes it
func TestTelegramSpeechLanguage(t *testing.T) {
	requireSpeechTools(t)
	tg := telegramtest.New(t, botToken)
	// The default engine, local, knows English only, and no route sends
	// Russian elsewhere.
	u := startUp(t, t.TempDir(), botEnv(tg)...)
	first := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/first.oga"), 3, 8138)
	notice := waitShown(t, tg, first.ChatID, "the notice about the language", func(m telegramtest.Shown) bool {
		return m.ReplyTo == first.MessageID && strings.HasPrefix(m.Text, "Не получилось")
	})
	for _, want := range []string{"русский (ru)", "TRANSCRIBER_ENGINE_ROUTES", "ru=openai", "/speech en"} {
		if !strings.Contains(notice.Text, want) {
			t.Errorf("notice %q lacks %q", notice.Text, want)
		}
	}
	id := workflows.TelegramJobID(first.ChatID, first.MessageID)
	show := runCLI(t, u.client, "jobs", "show", id)
	if !strings.HasPrefix(showField(show.stdout, "failure"), "unsupported_language at converting: the local engine does not recognise ru, only en") {
		t.Errorf("jobs show %s:\n%s", id, show.stdout)
	}
	if n := len(showing(tg, first.ChatID, testaudio.GoForwardText)); n != 0 {
		t.Errorf("an English transcript went out for a Russian chat: %d", n)
	}

	set := tg.PushText(owner, "/speech en", nil)
	waitMessage(t, tg, set.ChatID, "/speech", func(s telegramtest.Sent) bool {
		return s.ReplyTo == set.MessageID && s.Text == "Теперь записи в этом чате считаются записями на языке: английский (en)."
	})
	second := tg.PushVoice(owner, tg.AddFile(voiceNoteBytes(t), "voice/second.oga"), 3, 8138)
	waitShown(t, tg, second.ChatID, "the transcript in English", quotes(second, testaudio.GoForwardText))
	// The bot still speaks Russian here: the two languages are apart.
	help := tg.PushText(owner, "/speech", nil)
	waitMessage(t, tg, help.ChatID, "/speech without a code", func(s telegramtest.Sent) bool {
		return s.ReplyTo == help.MessageID && strings.Contains(s.Text, "английский (en)") && strings.Contains(s.Text, "/speech ru")
	})
}
