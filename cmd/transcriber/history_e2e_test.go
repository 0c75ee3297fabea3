package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/internal/engine/assemblyai/assemblyaitest"
	"github.com/transcriber/transcriber/internal/telegram/telegramtest"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

var updateHistories = flag.Bool("update-histories", false,
	"write the recorded workflow histories to workflows/testdata/histories for the replay test")

// historyDir is where the workflows package's replay test reads histories.
const historyDir = "../../workflows/testdata/histories"

// Scenario: Histories of real jobs replay against the current workflow
//
// Runs real jobs through every path the workflow has today, checks that
// each history replays against the current code, and with
// -update-histories keeps them for the replay test that guards later
// changes.
func TestRecordWorkflowHistories(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	aai := assemblyaitest.New(t, "aai-key")
	aai.SetResult(testaudio.GoForwardText, "en_us", nil)
	tg := telegramtest.New(t, botToken)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	u := startUpWith(t, t.TempDir(), httpAddr, fmt.Sprintf("127.0.0.1:%d", freePort(t)), strconv.Itoa(freePort(t)),
		"OPENAI_BASE_URL", engine.URL+"/v1",
		"ASSEMBLYAI_BASE_URL", aai.URL(), "ASSEMBLYAI_API_KEY", "aai-key", "ASSEMBLYAI_POLL_INTERVAL", "1s",
		"ASSEMBLYAI_WEBHOOK_URL", "http://"+httpAddr+"/v1/callbacks/assemblyai", "ASSEMBLYAI_WEBHOOK_SECRET", "history",
		"TRANSCRIBER_CHUNK_DURATION", "30s",
		"TELEGRAM_BOT_TOKEN", botToken, "TELEGRAM_API_ENDPOINT", tg.URL(), "TELEGRAM_ALLOWED_USERS", strconv.FormatInt(friend.ID, 10))
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	with := func(pairs ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(pairs); i += 2 {
				if pairs[i] == k {
					return pairs[i+1]
				}
			}
			return u.client(k)
		}
	}
	dir := t.TempDir()
	note := testaudio.VoiceNote(t, dir)
	histories := map[string]string{}

	r := runCLI(t, u.client, "transcribe", note)
	if r.code != 0 {
		t.Fatalf("done: %s", r.stderr)
	}
	// A command with no engine settings leaves the engine and the policy
	// to the service (done-local was recorded before it could).
	histories["done-service-defaults"] = cliJobID(t, note, "")

	// A Telegram job acknowledges, shows its progress and replies; one
	// that fails tells the sender why.
	voice := tg.PushVoice(friend, tg.AddFile(voiceNoteBytes(t), "voice/file.oga"), 3, 8138)
	// Since reply-in-status-message the transcript replaces the status
	// message; done-telegram and failed-telegram were recorded before it.
	waitShown(t, tg, voice.ChatID, "the Telegram transcript", quotes(voice, testaudio.GoForwardText))
	histories["done-telegram-edited"] = workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	notAudio := []byte("these bytes are not audio")
	doc := tg.PushDocument(friend, tg.AddFile(notAudio, "documents/notes.mp3"), "notes.mp3", "audio/mpeg", int64(len(notAudio)))
	failedTelegram := workflows.TelegramJobID(doc.ChatID, doc.MessageID)
	waitFor(t, "the Telegram job to fail", func() bool {
		return showField(runCLI(t, u.client, "jobs", "show", failedTelegram).stdout, "state") == "failed"
	})
	histories["failed-telegram-edited"] = failedTelegram

	bad := filepath.Join(dir, "notes.mp3")
	if err := os.WriteFile(bad, []byte("not audio"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, u.client, "transcribe", bad)
	histories["failed-unsupported"], _ = jobOf(t, r.stderr)

	engine.set(http.StatusServiceUnavailable)
	openaiEnv := with("TRANSCRIBER_ENGINE", "openai", "TRANSCRIBER_RETRY_SCHEDULE", "100ms", "TRANSCRIBER_MAX_ATTEMPTS", "2")
	r = runCLI(t, openaiEnv, "transcribe", note)
	id, _ := jobOf(t, r.stderr)
	engine.set(http.StatusOK)
	if r := runCLI(t, u.client, "jobs", "revive", id); r.code != 0 {
		t.Fatalf("revive: %s", r.stderr)
	}
	waitFor(t, "revived job done", func() bool {
		return showField(runCLI(t, u.client, "jobs", "show", id).stdout, "state") == "done"
	})
	histories["dead-revived-openai"] = id

	if r := runCLI(t, with("TRANSCRIBER_ENGINE", "assemblyai"), "transcribe", note); r.code != 0 {
		t.Fatalf("assemblyai: %s", r.stderr)
	}
	histories["done-assemblyai-polled"] = cliJobID(t, note, "assemblyai")

	// The same engine calling back when it finishes: the job's wait ends
	// on the callback signal instead of the timer.
	aai.NeverFinish()
	other := filepath.Join(dir, "other.wav")
	testaudio.FFmpeg(t, "-f", "s16le", "-ar", "16000", "-ac", "1", "-i", testaudio.GoForwardRaw, "-af", "volume=0.8", other)
	hooked := make(chan result, 1)
	go func() { hooked <- runCLI(t, with("TRANSCRIBER_ENGINE", "assemblyai"), "transcribe", other) }()
	waitFor(t, "the second AssemblyAI transcript", func() bool { return len(aai.Created()) == 2 })
	if got := aai.Complete(); len(got) != 1 || got[0] != http.StatusOK {
		t.Fatalf("callback answered %v", got)
	}
	if r := <-hooked; r.code != 0 {
		t.Fatalf("assemblyai callback: %s", r.stderr)
	}
	histories["done-assemblyai-callback"] = cliJobID(t, other, "assemblyai")

	long, _ := testaudio.Long(t, dir, 70*time.Second, time.Second)
	if r := runCLI(t, with("TRANSCRIBER_ENGINE", "openai"), "transcribe", long); r.code != 0 {
		t.Fatalf("chunked: %s", r.stderr)
	}
	histories["done-chunked-openai"] = cliJobID(t, long, "openai")

	blocking := newBlockingEngine(t, testaudio.GoForwardText)
	u2 := startUp(t, t.TempDir(), "OPENAI_BASE_URL", blocking.URL+"/v1")
	c2, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u2.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	go runCLI(t, func(k string) string {
		if k == "TRANSCRIBER_ENGINE" {
			return "openai"
		}
		return u2.client(k)
	}, "transcribe", note)
	<-blocking.inFlight
	cancelled := cliJobID(t, note, "openai")
	if r := runCLI(t, u2.client, "jobs", "cancel", cancelled); r.code != 0 {
		t.Fatalf("cancel: %s", r.stderr)
	}

	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.TranscribeRecording, workflow.RegisterOptions{Name: workflows.WorkflowName})
	record := func(name string, c client.Client, id string) {
		// The histories recorded before lean-publish, before local-inspect
		// (lean-*) and before lean-publish 2 implied it (inspect-*) keep
		// their names, so that jobs of those shapes stay guarded.
		name = "lean2-" + name
		h := closedHistory(t, c, id)
		path := filepath.Join(dir, name+".json")
		body, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
			t.Errorf("%s does not replay: %v", name, err)
		}
		if *updateHistories {
			if err := os.MkdirAll(historyDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(historyDir, name+".json"), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, id := range histories {
		// Failed jobs wait for revive; closing them ends their history.
		if strings.HasPrefix(name, "failed-") {
			if err := c.TerminateWorkflow(context.Background(), id, "", "recorded"); err != nil {
				t.Fatal(err)
			}
		}
		record(name, c, id)
	}
	record("cancelled-while-recognising", c2, cancelled)
}

// closedHistory waits for the job to close and returns its history.
func closedHistory(t *testing.T, c client.Client, id string) *historypb.History {
	t.Helper()
	waitFor(t, "job "+id+" to close", func() bool {
		d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	})
	h := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	if !strings.Contains(h.String(), workflows.WorkflowName) {
		t.Fatalf("history of %s is not a %s", id, workflows.WorkflowName)
	}
	return h
}

// cliJobID is the id transcribe gives a file.
func cliJobID(t *testing.T, path, engine string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return workflows.CLIJobID(sum[:], engine, "")
}
