package main

// End-to-end tests: the real command, the real embedded Temporal server and
// Web UI, real ffmpeg and pocketsphinx on real speech. This is the only
// test package that links the Temporal server.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/internal/transcript"
)

// env builds a getenv from pairs, isolated from the test process's own
// environment.
func env(pairs ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) string { return m[k] }
}

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

func runCLI(t testing.TB, getenv func(string) string, args ...string) result {
	t.Helper()
	return runCLIWithStdin(t, getenv, strings.NewReader(""), args...)
}

// runCLIWithStdin runs the command with stdin as its standard input.
func runCLIWithStdin(t testing.TB, getenv func(string) string, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	err := run(ctx, args, getenv, stdin, &stdout, &stderr)
	r := result{stdout: stdout.String(), code: exitCode(err, &stderr), took: time.Since(start)}
	r.stderr = stderr.String()
	return r
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func requireSpeechTools(t testing.TB) {
	t.Helper()
	testaudio.Require(t)
	if _, err := os.Stat("/usr/share/pocketsphinx/model/en-us/en-us.lm.bin"); err != nil {
		t.Skip("pocketsphinx-en-us is not installed; run make test, which installs it")
	}
}

// Scenario: A LibriVox recording is transcribed from the command line
func TestTranscribeLibriVox(t *testing.T) {
	requireSpeechTools(t)
	refs := testaudio.References(t)
	id := "sense_and_sensibility_01_austen_64kb-0870"
	r := runCLI(t, env(), "transcribe", testaudio.LibriVox(id))
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if w := testaudio.WER(refs[id], r.stdout); w > 0.40 {
		t.Errorf("WER = %.2f; want <= 0.40\nref: %s\nhyp: %s", w, refs[id], r.stdout)
	}
	t.Logf("WER %.2f in %v: %s", testaudio.WER(refs[id], r.stdout), r.took.Round(time.Millisecond), strings.TrimSpace(r.stdout))
}

// Scenario: A voice note in OGG/Opus is transcribed
func TestTranscribeVoiceNote(t *testing.T) {
	requireSpeechTools(t)
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, env(), "transcribe", note)
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if got := strings.TrimSpace(r.stdout); got != testaudio.GoForwardText {
		t.Errorf("transcript = %q; want %q", got, testaudio.GoForwardText)
	}
}

// Scenario: Transcripts come out as json, srt and vtt with timings
func TestTranscribeFormats(t *testing.T) {
	requireSpeechTools(t)
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, env(), "transcribe", "--format", "json", note)
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	var doc transcript.JSONDocument
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("json output: %v\n%s", err, r.stdout)
	}
	if doc.Text != testaudio.GoForwardText || doc.Engine != "local" || len(doc.Segments) == 0 || doc.Segments[0].End <= doc.Segments[0].Start {
		t.Errorf("document = %+v", doc)
	}
	// goforward.raw lasts about 2.8 s: a duration in seconds, beside
	// segment times in seconds.
	if last := doc.Segments[len(doc.Segments)-1].End; doc.Duration < 2 || doc.Duration > 4 || last > doc.Duration+0.1 {
		t.Errorf("duration = %v; want about 2.8 seconds, at least the last segment's end %v", doc.Duration, last)
	}
	for format, want := range map[string]string{"srt": "00:00:0", "vtt": "WEBVTT"} {
		r := runCLI(t, env(), "transcribe", "--format", format, note)
		if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, " --> ") {
			t.Errorf("--format %s: code %d, output:\n%s", format, r.code, r.stdout)
		}
	}
}

// Scenario: Several files are transcribed in one run, in order
func TestTranscribeSeveralFiles(t *testing.T) {
	requireSpeechTools(t)
	note := testaudio.VoiceNote(t, t.TempDir())
	wav := testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0920")
	r := runCLI(t, env(), "transcribe", note, wav)
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	i, j := strings.Index(r.stdout, "==> "+note), strings.Index(r.stdout, "==> "+wav)
	if i < 0 || j < i || !strings.Contains(r.stdout[i:j], testaudio.GoForwardText) || !strings.Contains(r.stdout[j:], "amiable") {
		t.Errorf("output not in file order:\n%s", r.stdout)
	}
}

// Scenario: Bad input fails promptly with a clear message and no retries
func TestTranscribeBadInput(t *testing.T) {
	requireSpeechTools(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.ogg")
	text := filepath.Join(dir, "song.mp3")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte("Dear diary, today I did not record any audio.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       []string
	}{
		{"empty file", empty, []string{"empty_audio", "no bytes", "nothing was submitted"}},
		{"text named mp3", text, []string{"failed", "unsupported_format", "not audio"}},
		{"missing file", filepath.Join(dir, "nope.wav"), []string{"nope.wav", "cannot read"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, env(), "transcribe", tc.path)
			if r.code == 0 {
				t.Fatalf("exit code 0 for %s; stdout %q", tc.name, r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			// Prompt: no back-off wait was spent on a verdict.
			if r.took > 20*time.Second {
				t.Errorf("took %v; a verdict must not wait for retries", r.took)
			}
		})
	}
}

// upInstance is a "transcriber up" running in this test process.
type upInstance struct {
	http, ui, temporal string
	dataDir            string
	// getenv is the environment of up itself; client that of commands
	// talking to it, as an operator on the same machine would set it.
	getenv, client func(string) string
	stop           func()
	logs           *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startUp(t *testing.T, dataDir string, extra ...string) *upInstance {
	t.Helper()
	return startUpWith(t, dataDir, fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		strconv.Itoa(freePort(t)), extra...)
}

// startUpWith runs up on the given addresses, so that a test can restart it
// where it was.
func startUpWith(t *testing.T, dataDir, httpAddr, uiAddr, temporalPort string, extra ...string) *upInstance {
	t.Helper()
	u := &upInstance{
		http:     httpAddr,
		ui:       uiAddr,
		temporal: temporalPort,
		dataDir:  dataDir,
		logs:     &syncBuffer{},
	}
	pairs := append([]string{
		"TRANSCRIBER_DATA_DIR", dataDir,
		"TRANSCRIBER_HTTP_ADDR", u.http,
		"TRANSCRIBER_UI_ADDR", u.ui,
		"TRANSCRIBER_TEMPORAL_PORT", u.temporal,
	}, extra...)
	u.getenv = env(pairs...)
	u.client = env(append(pairs, "TEMPORAL_ADDRESS", "127.0.0.1:"+u.temporal)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"up"}, u.getenv, nil, io.Discard, u.logs) }()
	var once sync.Once
	u.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("up: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("up did not stop within 30s")
			}
		})
	}
	t.Cleanup(u.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("up logs:\n%s", u.logs.String())
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + u.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return u
			}
		}
		select {
		case err := <-done:
			t.Fatalf("up exited: %v\n%s", err, u.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("up not ready: %v\n%s", err, u.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Scenario: Up serves health, metrics and the Temporal Web UI
func TestUpServesHealthMetricsAndWebUI(t *testing.T) {
	requireSpeechTools(t)
	u := startUp(t, t.TempDir())

	if code, body := get(t, "http://"+u.http+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("/healthz = %d %q", code, body)
	}
	// One job so that the job series have samples.
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, u.client, "transcribe", note)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("transcribe through up: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
	}
	code, metrics := get(t, "http://"+u.http+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, series := range []string{
		`transcriber_activity_runs_total{activity="Convert",outcome="success"} 1`,
		`transcriber_activity_runs_total{activity="Recognize",outcome="success"} 1`,
		`transcriber_jobs_total{outcome="done",source="cli"} 1`,
		`transcriber_job_duration_seconds_count 1`,
		`transcriber_engine_request_duration_seconds_count{engine="local"} 1`,
		"temporal_",
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	code, page := get(t, "http://"+u.ui+"/")
	if code != 200 || !strings.Contains(strings.ToLower(page), "<html") {
		t.Errorf("web ui / = %d, %.200q", code, page)
	}
	code, body := get(t, "http://"+u.ui+"/api/v1/namespaces/default/workflows")
	if code != 200 || !strings.Contains(body, "TranscribeRecording") {
		t.Errorf("web ui workflow list = %d, %.300q", code, body)
	}
	if strings.Contains(u.logs.String(), testaudio.GoForwardText) {
		t.Error("the log holds transcript text")
	}
}

// Scenario: Operators list, show and cancel jobs
func TestJobsCommands(t *testing.T) {
	requireSpeechTools(t)
	u := startUp(t, t.TempDir())
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, u.client, "transcribe", note)
	if r.code != 0 {
		t.Fatalf("transcribe: %d\n%s", r.code, r.stderr)
	}
	bad := filepath.Join(t.TempDir(), "notes.mp3")
	if err := os.WriteFile(bad, []byte("not audio at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, u.client, "transcribe", bad)
	if r.code == 0 || !strings.Contains(r.stderr, "transcriber jobs revive ") {
		t.Fatalf("bad input: code %d, stderr:\n%s", r.code, r.stderr)
	}
	failedID := strings.Fields(r.stderr[strings.Index(r.stderr, "jobs revive ")+len("jobs revive "):])[0]

	var list result
	waitFor(t, "failed job listed", func() bool {
		list = runCLI(t, u.client, "jobs", "list", "--state", "failed")
		return strings.Contains(list.stdout, failedID)
	})
	all := runCLI(t, u.client, "jobs", "list")
	if strings.Count(all.stdout, "cli-") != 2 || !strings.Contains(all.stdout, "done") {
		t.Errorf("jobs list:\n%s", all.stdout)
	}

	show := runCLI(t, u.client, "jobs", "show", failedID)
	for _, w := range []string{"state:", "failed", "unsupported_format", "converting"} {
		if !strings.Contains(show.stdout, w) {
			t.Errorf("jobs show lacks %q:\n%s", w, show.stdout)
		}
	}
	doneID := ""
	for _, line := range strings.Split(all.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "done" {
			doneID = f[0]
		}
	}
	show = runCLI(t, u.client, "jobs", "show", doneID)
	if !strings.Contains(show.stdout, "transcript:\n"+testaudio.GoForwardText) {
		t.Errorf("jobs show of a done job lacks the transcript:\n%s", show.stdout)
	}
	if r := runCLI(t, u.client, "jobs", "revive", doneID); r.code == 0 || !strings.Contains(r.stderr, "only failed or dead") {
		t.Errorf("revive of a done job: code %d, %s", r.code, r.stderr)
	}
	if r := runCLI(t, u.client, "jobs", "show", "no-such-job"); r.code == 0 || !strings.Contains(r.stderr, "no job no-such-job") {
		t.Errorf("show of a missing job: code %d, %s", r.code, r.stderr)
	}
	if r := runCLI(t, u.client, "jobs", "cancel", failedID); r.code != 0 {
		t.Errorf("cancel: code %d, %s", r.code, r.stderr)
	}
	waitFor(t, "cancelled job listed", func() bool {
		return strings.Contains(runCLI(t, u.client, "jobs", "list", "--state", "cancelled").stdout, failedID)
	})
}

// Scenario: Every command explains itself with --help
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"up", "--help"}, {"worker", "--help"}, {"bot", "--help"}, {"transcribe", "--help"}, {"jobs", "--help"}} {
		r := runCLI(t, env(), args...)
		out := r.stdout + r.stderr
		if r.code != 0 || !strings.Contains(out, "Usage: transcriber") {
			t.Errorf("%v: code %d, output:\n%s", args, r.code, out)
		}
	}
	if r := runCLI(t, env(), "frobnicate"); r.code != 2 {
		t.Errorf("unknown command: code %d; want 2", r.code)
	}
	if r := runCLI(t, env("TRANSCRIBER_ENGINE", "whisperx"), "transcribe", "x.wav"); r.code != 2 || !strings.Contains(r.stderr, "TRANSCRIBER_ENGINE") {
		t.Errorf("bad engine: code %d, %s", r.code, r.stderr)
	}
}

// waitFor polls cond until it holds. The deadline is generous: some
// conditions wait out a 30 s heartbeat timeout on a busy machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
