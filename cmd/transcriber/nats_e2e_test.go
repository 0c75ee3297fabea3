package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	natsengine "github.com/transcriber/transcriber/internal/engine/nats"
	"github.com/transcriber/transcriber/internal/engine/nats/natstest"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

// natsClient is what an operator with the nats CLI does by hand: read a
// job message, publish a result.
type natsClient struct {
	js jetstream.JetStream
}

func dialNats(t *testing.T, url string) *natsClient {
	t.Helper()
	nc, err := natsio.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &natsClient{js: js}
}

// jobMessage waits for the message with the id on the service queue and
// returns its body.
func (c *natsClient) jobMessage(t *testing.T, msgID string) natsengine.JobMessage {
	t.Helper()
	var found natsengine.JobMessage
	waitFor(t, "job message "+msgID, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cons, err := c.js.OrderedConsumer(ctx, natsengine.JobsStream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{"transcriber.recognition.jobs.default"}})
		if err != nil {
			return false
		}
		for {
			m, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
			if err != nil {
				return false
			}
			if m.Headers().Get("Nats-Msg-Id") == msgID {
				if err := json.Unmarshal(m.Data(), &found); err != nil {
					t.Fatal(err)
				}
				return true
			}
		}
	})
	return found
}

// publish sends a result as a service would and reports whether the
// broker took it as a duplicate.
func (c *natsClient) publish(t *testing.T, msgID string, body map[string]any) bool {
	t.Helper()
	m := natsio.NewMsg("transcriber.recognition.results")
	m.Header.Set("Nats-Msg-Id", msgID)
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	m.Data = data
	ack, err := c.js.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Duplicate
}

func resultBody(jobID string, n int, status string) map[string]any {
	b := map[string]any{"schema_version": 1, "job_id": jobID, "submission": n, "status": status,
		"service": map[string]any{"name": "hand-service", "version": "0.1"}}
	switch status {
	case "done", "needs_check":
		b["text"] = testaudio.GoForwardText
		b["segments"] = []map[string]any{{"start": 0.2, "end": 1.9, "text": testaudio.GoForwardText}}
	case "error":
		b["error"] = map[string]any{"code": "UNSUPPORTED_FORMAT", "message": "the service cannot read this audio"}
	}
	return b
}

// transcribeAsync runs transcribe in the background.
func transcribeAsync(t *testing.T, getenv func(string) string, args ...string) <-chan result {
	done := make(chan result, 1)
	go func() { done <- runCLI(t, getenv, append([]string{"transcribe"}, args...)...) }()
	return done
}

// jobShow runs jobs show and returns its output.
func jobShow(t *testing.T, u *upInstance, id string, args ...string) string {
	t.Helper()
	r := runCLI(t, u.client, append([]string{"jobs", "show"}, append(args, id)...)...)
	if r.code != 0 {
		t.Fatalf("jobs show %s: code %d\n%s", id, r.code, r.stderr)
	}
	return r.stdout
}

func natsJobState(t *testing.T, u *upInstance, id string) string {
	t.Helper()
	var st struct {
		State   string `json:"state"`
		Failure *struct {
			Kind string `json:"kind"`
			Code string `json:"code"`
		} `json:"failure"`
	}
	if err := json.Unmarshal([]byte(jobShow(t, u, id, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Failure != nil {
		return st.State + " " + st.Failure.Kind + " " + st.Failure.Code
	}
	return st.State
}

func metricsText(t *testing.T, u *upInstance) string {
	t.Helper()
	resp, err := http.Get("http://" + u.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Scenario: An operator answers jobs by hand over the broker
func TestNatsResultsByHand(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	url := natstest.Start(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "nats", "NATS_URL", url)
	nats := dialNats(t, url)
	note := testaudio.VoiceNote(t, t.TempDir())

	// Scenario: A done result finishes the job with the service's name
	t.Run("done", func(t *testing.T) {
		done := transcribeAsync(t, u.client, note)
		id := cliJobID(t, note, "nats")
		msg := nats.jobMessage(t, "job:"+id+":1")
		if msg.JobID != id || msg.Submission != 1 || msg.Audio.URL == "" || msg.ReplyDeadline.Before(time.Now()) {
			t.Fatalf("job message = %+v", msg)
		}
		// The audio is the job's, fetched with the URL alone.
		resp, err := http.Get(msg.Audio.URL)
		if err != nil {
			t.Fatal(err)
		}
		audio, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(audio) < 1000 || string(audio[:4]) != "RIFF" {
			t.Fatalf("audio URL: %d, %d bytes", resp.StatusCode, len(audio))
		}
		if nats.publish(t, "result:"+id+":1", resultBody(id, 1, "done")) {
			t.Fatal("the first result was taken as a duplicate")
		}
		// Scenario: The same Nats-Msg-Id again changes nothing
		t.Run("repeat", func(t *testing.T) {
			if !nats.publish(t, "result:"+id+":1", resultBody(id, 1, "done")) {
				t.Error("the repeat within the duplicate window was not taken as a duplicate")
			}
		})
		r := awaitResult(t, done)
		if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
			t.Fatalf("transcribe: code %d, out %q\n%s", r.code, r.stdout, r.stderr)
		}
		show := jobShow(t, u, id)
		if !strings.Contains(show, "hand-service 0.1") {
			t.Errorf("jobs show does not name the service:\n%s", show)
		}
		if n := strings.Count(u.logs.String(), "recognition result applied"); n != 1 {
			t.Errorf("%d results applied; want 1", n)
		}
	})

	// Scenario: An error result fails the job with the service's code
	t.Run("error", func(t *testing.T) {
		done := transcribeAsync(t, u.client, "--language", "en", note)
		id := cliJobIDLang(t, note, "nats", "en")
		nats.jobMessage(t, "job:"+id+":1")
		nats.publish(t, "result:"+id+":1", resultBody(id, 1, "error"))
		r := awaitResult(t, done)
		if r.code == 0 || !strings.Contains(r.stderr, "UNSUPPORTED_FORMAT") && !strings.Contains(r.stderr, "cannot read") {
			t.Errorf("transcribe of a refused job: code %d\n%s", r.code, r.stderr)
		}
		if got := natsJobState(t, u, id); got != "failed service_error UNSUPPORTED_FORMAT" {
			t.Errorf("job = %q; want failed service_error UNSUPPORTED_FORMAT", got)
		}
		if m := metricsText(t, u); !strings.Contains(m, `transcriber_failures_total{kind="service_error"} 1`) {
			t.Errorf("metrics lack one service_error failure:\n%s", grepLines(m, "failures_total"))
		}
	})

	// Scenario: A needs_check result finishes the job flagged for review
	t.Run("needs_check", func(t *testing.T) {
		done := transcribeAsync(t, u.client, "--language", "ru", note)
		id := cliJobIDLang(t, note, "nats", "ru")
		nats.jobMessage(t, "job:"+id+":1")
		nats.publish(t, "result:"+id+":1", resultBody(id, 1, "needs_check"))
		if r := awaitResult(t, done); r.code != 0 {
			t.Fatalf("transcribe: code %d\n%s", r.code, r.stderr)
		}
		if show := jobShow(t, u, id); !strings.Contains(show, "needs check") {
			t.Errorf("jobs show does not flag the review:\n%s", show)
		}
		r := runCLI(t, u.client, "jobs", "list", "--state", "done")
		if r.code != 0 || !strings.Contains(r.stdout, id) {
			t.Errorf("jobs list: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// The review flag is a command of its own in the history.
		keepHistory(t, u, "done-nats-needs-check", id)
	})
	if strings.Contains(u.logs.String(), testaudio.GoForwardText) {
		t.Error("the log holds the transcript")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Scenario: No result by the reply deadline makes the job dead with kind timeout
func TestNatsReplyDeadline(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	url := natstest.Start(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "nats", "NATS_URL", url, "TRANSCRIBER_NATS_REPLY_DEADLINE", "5s")
	nats := dialNats(t, url)
	note := testaudio.VoiceNote(t, t.TempDir())
	done := transcribeAsync(t, u.client, note)
	id := cliJobID(t, note, "nats")
	msg := nats.jobMessage(t, "job:"+id+":1")
	if d := time.Until(msg.ReplyDeadline); d > 6*time.Second {
		t.Errorf("reply deadline in %v; want 5s", d)
	}
	r := awaitResult(t, done)
	if r.code == 0 {
		t.Fatalf("transcribe of an unanswered job succeeded:\n%s", r.stdout)
	}
	if got := natsJobState(t, u, id); got != "dead timeout " {
		t.Fatalf("job = %q; want dead with kind timeout", got)
	}

	// Scenario: A result after the deadline leaves the job dead and is logged as dropped
	t.Run("late result", func(t *testing.T) {
		nats.publish(t, "result:"+id+":1", resultBody(id, 1, "done"))
		waitFor(t, "the late result dropped", func() bool {
			return strings.Contains(grepLines(u.logs.String(), "job_id="+id), "recognition result dropped")
		})
		if got := natsJobState(t, u, id); got != "dead timeout " {
			t.Errorf("job after a late result = %q; want still dead", got)
		}
	})

	// Scenario: A revive publishes the job anew with the next submission number
	t.Run("revive", func(t *testing.T) {
		if r := runCLI(t, u.client, "jobs", "revive", id); r.code != 0 {
			t.Fatalf("jobs revive: %d\n%s", r.code, r.stderr)
		}
		nats.jobMessage(t, "job:"+id+":2")
		nats.publish(t, "result:"+id+":2", resultBody(id, 2, "done"))
		waitFor(t, "the revived job done", func() bool { return natsJobState(t, u, id) == "done" })
		if m := metricsText(t, u); !strings.Contains(m, `transcriber_failures_total{kind="timeout"} 1`) {
			t.Errorf("metrics lack one timeout failure:\n%s", grepLines(m, "failures_total"))
		}
		keepHistory(t, u, "dead-revived-nats", id)
	})
}

// keepHistory checks that a closed job's history replays and, with
// -update-histories, keeps it for the workflows package's replay test.
func keepHistory(t *testing.T, u *upInstance, name, id string) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(closedHistory(t, c, id))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.TranscribeRecording, workflow.RegisterOptions{Name: workflows.WorkflowName})
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
		t.Errorf("%s does not replay: %v", name, err)
	}
	if *updateHistories {
		if err := os.WriteFile(filepath.Join(historyDir, name+".json"), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Scenario: A broker that never acknowledges makes the job dead with kind no_ack
func TestNatsBrokerDownIsNoAck(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "nats", "NATS_URL", "nats://127.0.0.1:"+strconv.Itoa(freePort(t)),
		"TRANSCRIBER_MAX_ATTEMPTS", "2", "TRANSCRIBER_RETRY_SCHEDULE", "1s")
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, u.client, "transcribe", note)
	if r.code == 0 {
		t.Fatalf("transcribe without a broker succeeded:\n%s", r.stdout)
	}
	id := cliJobID(t, note, "nats")
	if got := natsJobState(t, u, id); got != "dead no_ack " {
		t.Errorf("job = %q; want dead with kind no_ack", got)
	}
}

// Scenario: The reference recognizer transcribes a voice note through the broker that up embeds
func TestNatsRecognizerEndToEnd(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	dataDir := t.TempDir()
	embed := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	u := startUp(t, dataDir, "TRANSCRIBER_ENGINE", "nats", "TRANSCRIBER_NATS_EMBED_ADDR", embed)
	if !strings.Contains(u.logs.String(), "embedded nats server is running") {
		t.Fatalf("up did not embed a NATS server:\n%s", u.logs.String())
	}
	// The recognizer shares the data directory, so its raw answers are in
	// the store the worker reads, and finds the embedded broker by itself.
	recLogs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, []string{"recognizer"}, env("TRANSCRIBER_DATA_DIR", dataDir, "TRANSCRIBER_NATS_EMBED_ADDR", embed), nil, io.Discard, recLogs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("recognizer: %v", err)
		}
		if t.Failed() {
			t.Logf("recognizer logs:\n%s", recLogs.String())
		}
	})

	note := testaudio.VoiceNote(t, t.TempDir())
	// Without TEMPORAL_ADDRESS the job goes to the up on this machine,
	// whose inbox and HTTP server the exchange needs.
	r := runCLI(t, u.getenv, "transcribe", note)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("transcribe: code %d, out %q\n%s", r.code, r.stdout, r.stderr)
	}
	id := cliJobID(t, note, "nats")
	show := jobShow(t, u, id)
	if !strings.Contains(show, "transcriber-recognizer") {
		t.Errorf("jobs show does not name the service:\n%s", show)
	}
	secret, err := os.ReadFile(filepath.Join(dataDir, "nats-audio-secret"))
	if err != nil || len(strings.TrimSpace(string(secret))) < 16 {
		t.Fatalf("no audio URL secret kept in the data directory: %v", err)
	}
	for _, logs := range []string{u.logs.String(), recLogs.String()} {
		if strings.Contains(logs, testaudio.GoForwardText) {
			t.Error("a log holds the transcript")
		}
		if strings.Contains(logs, strings.TrimSpace(string(secret))) {
			t.Error("a log holds the audio URL secret")
		}
	}
	if !strings.Contains(recLogs.String(), "job answered") {
		t.Errorf("the recognizer did not log its answer:\n%s", recLogs.String())
	}
}

// cliJobIDLang is the job transcribe --language starts for a file.
func cliJobIDLang(t *testing.T, path, engine, language string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return workflows.CLIJobID(sum[:], engine, language)
}
