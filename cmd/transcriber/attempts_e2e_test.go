package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

// hang is an answer of scriptedOpenAI that never comes: the request waits
// until its worker is gone.
const hang = 0

// scriptedOpenAI answers the n-th request with the n-th status of its
// script, the last one repeated, and tells the test of every arrival.
type scriptedOpenAI struct {
	*httptest.Server
	script  []int
	arrived chan int
	mu      sync.Mutex
	n       int
}

func newScriptedOpenAI(t *testing.T, script ...int) *scriptedOpenAI {
	s := &scriptedOpenAI{script: script, arrived: make(chan int, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PRI" {
			// Another test's gRPC client on this port's former owner, not
			// a request of the job (see openAIStandIn.serve).
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
			return
		}
		s.mu.Lock()
		n := s.n
		s.n++
		s.mu.Unlock()
		s.arrived <- n
		// The request is read whole, as a real server does before it
		// answers, and so that the server notices when the worker goes
		// away; an error only means it already has.
		_, _ = io.Copy(io.Discard, r.Body)
		status := s.script[min(n, len(s.script)-1)]
		if status == hang {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, `{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error"}}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptedOpenAI) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// servingWorker starts a worker of the cluster and returns it with the
// address of its /metrics.
func (cl *cluster) servingWorker(t *testing.T) (*proc, string) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	return startProc(t, append(cl.env, "TRANSCRIBER_HTTP_ADDR="+addr), "worker"), addr
}

// startTelegramJob starts a job as the bot would, with the policy given.
// No bot runs in the cluster, so each reply is recorded as undeliverable
// in the log of the worker that sent it, which makes replies countable.
func (cl *cluster) startTelegramJob(t *testing.T, id string, p workflows.Policy) {
	t.Helper()
	blobs, err := blob.NewLocal(filepath.Join(cl.dataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // only read
	key := blob.JobKey(id, "original.ogg")
	if _, err := blobs.Put(context.Background(), key, f); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.Input{
			Source: job.SourceTelegram, Recipient: &job.Recipient{Address: "78", Message: "1002"},
			Original: workflows.Original{Key: key}, Engine: "openai", Policy: p,
		}); err != nil {
		t.Fatal(err)
	}
}

// Scenario: A step that kills its worker on every attempt ends dead as a timeout, its attempts counted
//
// Each attempt costs the heartbeat timeout (30 s) before Temporal gives
// the step to the next worker, so the job has two attempts; the cases run
// in parallel.
func TestStepKillingItsWorkerEndsDead(t *testing.T) {
	requireSpeechTools(t)
	tests := []struct {
		name   string
		script []int
		// causeAttempt is the attempt named by the failure Temporal gives
		// the timed-out last attempt as its cause; 0 is none named.
		causeAttempt int
	}{
		{"killed on every attempt", []int{hang, hang}, 0},
		{"killed after a 503", []int{http.StatusServiceUnavailable, hang}, 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			engine := newScriptedOpenAI(t, tc.script...)
			cl := startCluster(t, engine.URL)
			id := fmt.Sprintf("tg-78-%d", 1002+i)
			cl.startTelegramJob(t, id, workflows.Policy{Backoff: []time.Duration{time.Second}, MaxAttempts: 2, ParkFor: time.Hour})
			w, addr := cl.servingWorker(t)
			workers := []*proc{w}
			for range tc.script {
				var n int
				select {
				case n = <-engine.arrived:
				case <-time.After(2 * time.Minute):
					t.Fatalf("engine request %d did not arrive", len(workers))
				}
				if tc.script[n] == hang {
					// The step is in its engine call: its worker dies
					// there, and a new one waits for the next attempt.
					w.kill()
					w, addr = cl.servingWorker(t)
					workers = append(workers, w)
				}
			}

			jobs := &jobctl.Service{Client: cl.c, Namespace: "default"}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			st, err := awaitSettled(ctx, jobs, id, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != job.Dead || st.Failure == nil || st.Failure.Kind != job.Timeout || st.Failure.Step != job.Transcribing ||
				!strings.Contains(st.Failure.Message, "heartbeat timeout") {
				t.Fatalf("job: %s, failure %+v; want dead with a heartbeat timeout at transcribing", st.State, st.Failure)
			}
			// The job is dead before its sender is told: wait for the
			// reply step, so that the count of replies below is final.
			waitFor(t, "the reply to the sender", func() bool { return completions(t, cl.c, id)["SendReply"] > 0 })
			if st.Failure.Attempts != 2 || engine.count() != 2 {
				t.Errorf("attempts recorded %d, engine requests %d; want 2 and 2", st.Failure.Attempts, engine.count())
			}
			if got := timedOutCauseAttempt(t, cl.c, id); got != tc.causeAttempt {
				t.Errorf("the timeout's cause names attempt %d; want %d", got, tc.causeAttempt)
			}
			show := runCLI(t, cl.getenv, "jobs", "show", id)
			if showField(show.stdout, "state") != "dead" || showField(show.stdout, "attempts") != "2" ||
				!strings.HasPrefix(showField(show.stdout, "failure"), "timeout at transcribing") {
				t.Errorf("jobs show of the dead job:\n%s", show.stdout)
			}
			var logs strings.Builder
			for _, w := range workers {
				logs.WriteString(w.logs.String())
			}
			if n := strings.Count(logs.String(), `msg="reply undelivered"`); n != 1 {
				t.Errorf("reply attempts = %d; want the sender told exactly once", n)
			}
			// The last worker, the only one alive, parked the job.
			_, metrics := get(t, "http://"+addr+"/metrics")
			for series, want := range map[string]string{
				`transcriber_failures_total{kind="timeout"}`:               "1",
				`transcriber_jobs_total{outcome="dead",source="telegram"}`: "1",
			} {
				if got := metricValue(t, metrics, series); got != want {
					t.Errorf("%s = %s; want %s", series, got, want)
				}
			}
		})
	}
}

// Scenario: An engine that cannot be reached makes the job dead as no_ack, counted by kind
func TestUnreachableEngineIsCountedAsNoAck(t *testing.T) {
	requireSpeechTools(t)
	// A port nobody listens on: every request is refused.
	refused := fmt.Sprintf("http://127.0.0.1:%d/v1", freePort(t))
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", refused,
		"TRANSCRIBER_RETRY_SCHEDULE", "1s", "TRANSCRIBER_MAX_ATTEMPTS", "2")

	r := runCLI(t, u.client, "transcribe", testaudio.VoiceNote(t, t.TempDir()))
	id, state := jobOf(t, r.stderr)
	if r.code == 0 || state != "dead" || !strings.Contains(r.stderr, "no_ack") {
		t.Fatalf("transcribe: code %d, job %s %s:\n%s", r.code, id, state, r.stderr)
	}
	show := runCLI(t, u.client, "jobs", "show", id)
	if showField(show.stdout, "attempts") != "2" || !strings.HasPrefix(showField(show.stdout, "failure"), "no_ack at transcribing") {
		t.Errorf("jobs show of the dead job:\n%s", show.stdout)
	}
	_, metrics := get(t, "http://"+u.http+"/metrics")
	for series, want := range map[string]string{
		`transcriber_failures_total{kind="no_ack"}`:                               "1",
		`transcriber_activity_runs_total{activity="Recognize",outcome="failure"}`: "2",
	} {
		if got := metricValue(t, metrics, series); got != want {
			t.Errorf("%s = %s; want %s", series, got, want)
		}
	}
}

// timedOutCauseAttempt reads the job's history for the failure that
// Temporal gave its timed-out activity as the cause, and returns the
// attempt it names, as the workflow reads it.
func timedOutCauseAttempt(t *testing.T, c client.Client, id string) int {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskTimedOutEventAttributes(); a != nil {
			cause := temporal.GetDefaultFailureConverter().FailureToError(a.GetFailure().GetCause())
			if d, ok := activities.DetailsOf(cause); ok {
				return d.Attempt
			}
			return 0
		}
	}
	t.Fatal("no activity timed out")
	return 0
}
