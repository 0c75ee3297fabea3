package main

// Fault tests with real processes: workers killed with SIGKILL or frozen
// with SIGSTOP in the middle of a step, and the all-in-one server killed
// and restarted from its SQLite file. Each waits for Temporal to notice the
// lost worker through the heartbeat timeout, so they run in parallel.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// transcriberBinary builds the command once for all fault tests.
func transcriberBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "transcriber-bin-*")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "transcriber")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// proc is a transcriber process started by a test.
type proc struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

func startProc(t *testing.T, environ []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(transcriberBinary(t), args...), logs: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, environ...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.kill()
		if t.Failed() {
			t.Logf("%s logs:\n%s", args[0], p.logs.String())
		}
	})
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// blockingEngine is an OpenAI stand-in whose first request hangs until the
// test releases it, so that a worker can be lost in the middle of the call.
type blockingEngine struct {
	*openAIStandIn
	inFlight chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	arrived  int
	answers  []string // text of the n-th request's answer; the last repeats
}

func newBlockingEngine(t *testing.T, answers ...string) *blockingEngine {
	b := &blockingEngine{inFlight: make(chan struct{}), release: make(chan struct{}), answers: answers}
	inner := newOpenAIStandIn(t)
	handler := inner.Config.Handler
	inner.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PRI" {
			// Another test's gRPC client on this port's former owner: not
			// a request of the job under test (see openAIStandIn.serve).
			handler.ServeHTTP(w, r)
			return
		}
		b.mu.Lock()
		n := b.arrived
		b.arrived++
		b.mu.Unlock()
		if n == 0 {
			close(b.inFlight)
			select {
			case <-b.release:
			case <-r.Context().Done():
				return
			}
		}
		inner.mu.Lock()
		inner.text = b.answers[min(n, len(b.answers)-1)]
		inner.mu.Unlock()
		handler.ServeHTTP(w, r)
	})
	b.openAIStandIn = inner
	t.Cleanup(func() { b.unblock() })
	return b
}

// count is the number of requests that arrived, answered or not.
func (b *blockingEngine) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.arrived
}

func (b *blockingEngine) unblock() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

// cluster is an embedded Temporal server in the test process, with the
// environment that workers and clients need to use it.
type cluster struct {
	srv     *devserver.Server
	c       client.Client
	dataDir string
	env     []string
}

func startCluster(t *testing.T, engineURL string) *cluster {
	t.Helper()
	dataDir := t.TempDir()
	srv, err := devserver.Start(devserver.Options{
		DatabaseFile:     filepath.Join(dataDir, "temporal.db"),
		Namespace:        "default",
		SearchAttributes: workflows.SearchAttributes(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// On a loaded machine the frontend may answer before it has loaded
	// the namespace; a job started then is refused as "not found".
	waitFor(t, "the cluster's namespace", func() bool {
		_, err := c.WorkflowService().DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		return err == nil
	})
	return &cluster{srv: srv, c: c, dataDir: dataDir, env: []string{
		"TEMPORAL_ADDRESS=" + srv.FrontendAddr(),
		"TRANSCRIBER_DATA_DIR=" + dataDir,
		"TRANSCRIBER_ENGINE=openai",
		"OPENAI_BASE_URL=" + engineURL + "/v1",
		"TRANSCRIBER_RETRY_SCHEDULE=1s",
		// The faults are about whole steps; an hour of noise must not be
		// cut into chunks.
		"OPENAI_MAX_UPLOAD_BYTES=1000000000",
	}}
}

func (cl *cluster) worker(t *testing.T) *proc {
	return startProc(t, append(cl.env, fmt.Sprintf("TRANSCRIBER_HTTP_ADDR=127.0.0.1:%d", freePort(t))), "worker")
}

// getenv is the cluster's environment, as a command run against it reads it.
func (cl *cluster) getenv(k string) string {
	for _, kv := range cl.env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// submit transcribes path through the cluster in the background.
func (cl *cluster) submit(t *testing.T, path string) <-chan result {
	out := make(chan result, 1)
	go func() { out <- runCLI(t, cl.getenv, "transcribe", path) }()
	return out
}

// startedActivity waits until the job's activity of the given type is
// running on a worker, and returns the job id.
func startedActivity(t *testing.T, c client.Client, activityType string) string {
	t.Helper()
	// A loaded machine may take minutes to store an hour of audio and
	// start its job; waiting longer proves as much.
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", Query: "ExecutionStatus = 'Running'",
		})
		if err == nil {
			for _, e := range resp.GetExecutions() {
				id := e.GetExecution().GetWorkflowId()
				d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
				if err != nil {
					continue
				}
				for _, pa := range d.GetPendingActivities() {
					if pa.GetActivityType().GetName() == activityType && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
						return id
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s activity started", activityType)
	return ""
}

// completions counts the activity completions of a job by activity type.
func completions(t *testing.T, c client.Client, id string) map[string]int {
	t.Helper()
	scheduled := map[int64]string{}
	got := map[string]int{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[e.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil {
			got[scheduled[a.GetScheduledEventId()]]++
		}
	}
	return got
}

func longNoise(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "long.flac")
	// An hour of noise: ffmpeg needs seconds to convert it, long enough to
	// lose the worker in the middle.
	testaudio.FFmpeg(t, "-f", "lavfi", "-i", "anoisesrc=d=3600:c=pink:r=16000:a=0.02", "-c:a", "flac", "-compression_level", "0", p)
	return p
}

func awaitResult(t *testing.T, out <-chan result) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(4 * time.Minute):
		t.Fatal("transcribe did not finish in 4 minutes")
	}
	return result{}
}

// Scenario: A worker killed during conversion loses the step to another worker
func TestWorkerKilledDuringConversion(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	engine := newOpenAIStandIn(t)
	cl := startCluster(t, engine.URL)
	a := cl.worker(t)
	out := cl.submit(t, longNoise(t))
	id := startedActivity(t, cl.c, "Convert")
	a.kill()
	cl.worker(t)

	r := awaitResult(t, out)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("transcribe: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := completions(t, cl.c, id); got["Convert"] != 1 || got["Recognize"] != 1 {
		t.Errorf("completed steps = %v; want conversion and recognition exactly once", got)
	}
	if n := engine.count(); n != 1 {
		t.Errorf("engine requests = %d; want 1", n)
	}
}

// Scenario: A worker killed during recognition loses the step to another worker
func TestWorkerKilledDuringRecognition(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	cl := startCluster(t, engine.URL)
	a := cl.worker(t)
	out := cl.submit(t, testaudio.VoiceNote(t, t.TempDir()))
	<-engine.inFlight
	a.kill()
	cl.worker(t)

	r := awaitResult(t, out)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("transcribe: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
	}
	id, _ := jobOfID(t, cl.c)
	// The engine takes the voice note as it is: no conversion step runs.
	if got := completions(t, cl.c, id); got["Convert"] != 0 || got["Recognize"] != 1 {
		t.Errorf("completed steps = %v; want recognition exactly once and no conversion", got)
	}
	if n := engine.count(); n != 2 {
		t.Errorf("engine requests = %d; want 2 (the lost one and its retry)", n)
	}
}

// Scenario: A step that outlives its lease has its late result ignored
func TestLateResultOfLostLeaseIsIgnored(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	const stale = "stale answer of a frozen worker"
	engine := newBlockingEngine(t, stale, testaudio.GoForwardText)
	cl := startCluster(t, engine.URL)
	a := cl.worker(t)
	// A job the Telegram bot accepted: its sender waits for a reply. No bot
	// runs here, so each reply is recorded as undeliverable in the log of
	// the worker that sent it, which makes replies countable.
	id := "tg-77-1001"
	blobs, err := blob.NewLocal(filepath.Join(cl.dataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	key := blob.JobKey(id, "original.ogg")
	if _, err := blobs.Put(context.Background(), key, f); err != nil {
		t.Fatal(err)
	}
	_ = f.Close() // only read
	if _, err := cl.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.Input{
			Source: job.SourceTelegram, Recipient: &job.Recipient{Address: "77", Message: "1001"},
			Original: workflows.Original{Key: key}, Engine: "openai", Policy: workflows.DefaultPolicy(),
		}); err != nil {
		t.Fatal(err)
	}
	<-engine.inFlight
	// Frozen, not dead: the worker will wake up later and finish its call.
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := cl.worker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if st, err := awaitSettled(ctx, &jobctl.Service{Client: cl.c, Namespace: "default"}, id, io.Discard); err != nil || st.State != job.Done {
		t.Fatalf("job: %s, %v", st.State, err)
	}
	st, err := (&jobctl.Service{Client: cl.c, Namespace: "default"}).Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}

	// Wake the frozen worker and let its call finish: it stores its result
	// under its own attempt's key and reports to a server that no longer
	// holds its lease.
	engine.unblock()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The woken attempt either stores its result under its own key before
	// it learns that its lease is gone, or learns it first from its
	// heartbeat and stops; its engine call may then end as cancelled or as
	// an engine error, depending on which of the two the engine client
	// saw first. All of them end its step on A.
	ended := regexp.MustCompile(`msg="step (stopped|failed)".* step=Recognize`)
	waitFor(t, "the stale attempt to end", func() bool {
		l := a.logs.String()
		return len(transcriptFiles(t, cl.dataDir)) == 2 || ended.MatchString(l) || strings.Contains(l, "Activity complete after timeout")
	})
	time.Sleep(time.Second) // any completion report reaches the server
	if n := len(transcriptFiles(t, cl.dataDir)); n > 2 {
		t.Errorf("%d transcripts stored; the stale attempt may add one beside the accepted one, no more", n)
	}

	after, err := (&jobctl.Service{Client: cl.c, Namespace: "default"}).Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != job.Done || after.TranscriptKey != st.TranscriptKey {
		t.Errorf("after the late result: state %s, transcript %s; want done, %s", after.State, after.TranscriptKey, st.TranscriptKey)
	}
	if got := completions(t, cl.c, id); got["Recognize"] != 1 || got["SendReply"] != 1 {
		t.Errorf("completed steps = %v; want one recognition and exactly one reply", got)
	}
	replies := strings.Count(a.logs.String()+b.logs.String(), `msg="reply undelivered"`)
	if replies != 1 {
		t.Errorf("reply attempts = %d; want exactly 1", replies)
	}
	r2 := runCLI(t, cl.getenv, "jobs", "show", id)
	if !strings.Contains(r2.stdout, "transcript:\n"+testaudio.GoForwardText) || strings.Contains(r2.stdout, stale) {
		t.Errorf("jobs show after the late result:\n%s", r2.stdout)
	}
}

// Scenario: The all-in-one server killed mid-job resumes it from its SQLite file
func TestUpRestartedFromItsDatabase(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	dataDir := t.TempDir()
	port := freePort(t)
	environ := []string{
		"TRANSCRIBER_DATA_DIR=" + dataDir,
		"TRANSCRIBER_ENGINE=openai",
		"OPENAI_BASE_URL=" + engine.URL + "/v1",
		"TRANSCRIBER_TEMPORAL_PORT=" + strconv.Itoa(port),
		fmt.Sprintf("TRANSCRIBER_HTTP_ADDR=127.0.0.1:%d", freePort(t)),
		"TRANSCRIBER_UI_ADDR=off",
	}
	up := startProc(t, environ, "up")
	getenv := func(k string) string {
		if k == "TEMPORAL_ADDRESS" {
			return "127.0.0.1:" + strconv.Itoa(port)
		}
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	waitFor(t, "up to accept jobs", func() bool {
		return runCLI(t, getenv, "jobs", "list").code == 0
	})
	out := make(chan result, 1)
	note := testaudio.VoiceNote(t, t.TempDir())
	go func() { out <- runCLI(t, getenv, "transcribe", note) }()
	<-engine.inFlight
	up.kill()
	startProc(t, environ, "up")
	// The command waiting for the job rides out the restart: its queries
	// fail while the server is down and succeed once it is back.
	r := awaitResult(t, out)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("after restart: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := engine.count(); n != 2 {
		t.Errorf("engine requests = %d; want 2 (the lost one and its retry)", n)
	}
	list := runCLI(t, getenv, "jobs", "list")
	if strings.Count(list.stdout, "cli-") != 1 {
		t.Errorf("jobs after restart:\n%s", list.stdout)
	}
}

// jobOfID returns the only job of a cluster and its status.
func jobOfID(t *testing.T, c client.Client) (string, workflows.Status) {
	t.Helper()
	resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
	if err != nil || len(resp.GetExecutions()) != 1 {
		t.Fatalf("jobs: %v, %v", resp, err)
	}
	id := resp.GetExecutions()[0].GetExecution().GetWorkflowId()
	st, err := (&jobctl.Service{Client: c, Namespace: "default"}).Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return id, st
}

func transcriptFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Name() == "transcript.json" {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
