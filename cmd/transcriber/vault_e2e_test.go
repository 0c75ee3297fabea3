package main

// The notes-vault intake end to end: a real vault folder, the real watcher,
// the embedded Temporal server, real ffmpeg and pocketsphinx or an OpenAI
// stand-in, and the vault commands as a person runs them.

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/internal/vault"
	"github.com/transcriber/transcriber/workflows"
)

// vaultNote is a note of the vault as a test reads it.
type vaultNote struct {
	path, content string
}

// field is the value of a frontmatter key of the note, unquoted.
func (n vaultNote) field(key string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `:\s*(.*)$`).FindStringSubmatch(n.content)
	if m == nil {
		return ""
	}
	return strings.Trim(strings.TrimSpace(m[1]), `"'`)
}

// notesWithID finds every note of the vault whose voice-id is id, in any
// folder.
func notesWithID(t *testing.T, dir, id string) []vaultNote {
	t.Helper()
	var out []vaultNote
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		n := vaultNote{path: path, content: string(b)}
		if n.field(vault.KeyID) == id {
			out = append(out, n)
		}
		return nil
	})
	return out
}

// statusLog records every voice-status a recording's note shows while a
// test watches it, to prove that nothing outside the lifecycle appears.
type statusLog struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (l *statusLog) saw(id, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.seen[id]; len(s) == 0 || s[len(s)-1] != status {
		l.seen[id] = append(l.seen[id], status)
	}
}

func (l *statusLog) of(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen[id])
}

var statuses = &statusLog{seen: map[string][]string{}}

// awaitNote waits until the recording's note has the status, and returns
// it.
func awaitNote(t *testing.T, dir, id, status string) vaultNote {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last []vaultNote
	for time.Now().Before(deadline) {
		last = notesWithID(t, dir, id)
		if len(last) == 1 {
			statuses.saw(dir+id, last[0].field(vault.KeyStatus))
			if last[0].field(vault.KeyStatus) == status {
				return last[0]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("note %s never became %s; notes: %+v", id, status, last)
	return vaultNote{}
}

// editNote changes a note the way an editor saves it: the whole file
// replaced at once.
func editNote(t *testing.T, path string, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), ".edit.tmp")
	if err := os.WriteFile(tmp, []byte(edit(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// addKey adds a key of the person's to the note's frontmatter.
func addKey(t *testing.T, path, line string) {
	editNote(t, path, func(s string) string { return strings.Replace(s, "---\n", "---\n"+line+"\n", 1) })
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	// Written beside, then renamed in: a half-copied file is tested on its
	// own.
	tmp := filepath.Join(filepath.Dir(to), "."+filepath.Base(to)+".part")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func source(v, name string) string { return filepath.Join(v, "voice", "source", name) }

// Scenario: A voice note copied into the source folder is transcribed into its note
// Scenario: An empty recording gets no note and no job
// Scenario: A recording cut short is transcribed and its note says so
// Scenario: Another device's recording is left alone until it is taken over
func TestVaultTranscribesVoiceNotesWithTheLocalEngine(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	v := t.TempDir()
	u := startUp(t, t.TempDir(), "TRANSCRIBER_VAULT_DIR", v, "TRANSCRIBER_DEVICE", "mac")
	voice := testaudio.VoiceNote(t, t.TempDir())

	if err := os.MkdirAll(source(v, ""), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(source(v, "empty.ogg"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, voice, source(v, "a.ogg"))
	a := awaitNote(t, v, "a", "inserted")
	if dir := filepath.Dir(a.path); dir != filepath.Join(v, "voice", "inbox") {
		t.Errorf("note made in %s; want voice/inbox", dir)
	}
	if !strings.Contains(a.content, testaudio.GoForwardText) || !strings.Contains(a.content, "![[voice/source/a.ogg]]") {
		t.Errorf("note of a.ogg:\n%s", a.content)
	}
	if a.field(vault.KeyDevice) != "mac" || a.field(vault.KeyAttempts) != "0" || a.field(vault.KeySentAt) == "" {
		t.Errorf("frontmatter of a:\n%s", a.content)
	}
	// The text comes right under the recording.
	if i, j := strings.Index(a.content, "![[voice/source/a.ogg]]"), strings.Index(a.content, testaudio.GoForwardText); j < i {
		t.Errorf("transcript above the recording:\n%s", a.content)
	}
	if got := notesWithID(t, v, "empty"); len(got) != 0 {
		t.Errorf("an empty recording got a note: %+v", got)
	}
	if !strings.Contains(u.logs.String(), "empty recording gets no note") {
		t.Error("the empty recording was not logged")
	}
	if _, err := os.Stat(source(v, "empty.ogg")); err != nil {
		t.Errorf("the empty recording was removed: %v", err)
	}
	r := runCLI(t, u.client, "jobs", "show", vault.JobID("mac", "a"))
	if r.code != 0 || showField(r.stdout, "source") != "vault" || showField(r.stdout, "state") != "done" ||
		showField(r.stdout, "owner") != job.VaultOwner("mac") {
		t.Errorf("jobs show of the vault job: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Half an Ogg stream: the recorder was killed.
	long := filepath.Join(t.TempDir(), "long.ogg")
	testaudio.FFmpeg(t, "-i", testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870"), "-c:a", "libopus", long)
	data, err := os.ReadFile(long)
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(t.TempDir(), "cut.ogg")
	if err := os.WriteFile(half, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, half, source(v, "cut.ogg"))
	cut := awaitNote(t, v, "cut", "inserted")
	if !regexp.MustCompile(`cut short: 0:0[2-5] of audio were kept`).MatchString(cut.content) {
		t.Errorf("the note of a recording cut short does not say so with its length:\n%s", cut.content)
	}
	if text := cut.content[strings.Index(cut.content, "![[voice/source/cut.ogg]]"):]; len(strings.Fields(text)) < 12 {
		t.Errorf("the recording cut short has no transcript:\n%s", cut.content)
	}

	// Another device's recording, synced here: its note first, then its
	// audio.
	other := filepath.Join(v, "voice", "inbox", "phone.md")
	if err := os.WriteFile(other, []byte("---\nvoice-id: phone\nvoice-status: saved\nvoice-device: other-phone\nvoice-attempts: 0\n---\n![[voice/source/phone.ogg]]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, voice, source(v, "phone.ogg"))
	time.Sleep(4 * time.Second) // two settle periods and more: it would have been sent by now
	if n := notesWithID(t, v, "phone"); len(n) != 1 || n[0].field(vault.KeyStatus) != "saved" || n[0].field(vault.KeyDevice) != "other-phone" {
		t.Fatalf("another device's note was touched: %+v", n)
	}
	if r := runCLI(t, u.client, "jobs", "show", vault.JobID("mac", "phone")); r.code == 0 {
		t.Errorf("another device's recording got a job here:\n%s", r.stdout)
	}
	r = runCLI(t, u.getenv, "vault", "take-over")
	if r.code != 0 || !strings.Contains(r.stdout, "voice/inbox/phone.md") || !strings.Contains(r.stdout, "1 recording(s) taken over by device mac") {
		t.Fatalf("vault take-over: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	phone := awaitNote(t, v, "phone", "inserted")
	if phone.field(vault.KeyDevice) != "mac" || !strings.Contains(phone.content, testaudio.GoForwardText) {
		t.Errorf("the note taken over:\n%s", phone.content)
	}
	for _, id := range []string{"a", "cut", "phone"} {
		for _, s := range statuses.of(v + id) {
			if !slices.Contains([]string{"saved", "sent", "retry", "inserted"}, s) {
				t.Errorf("note %s showed status %q", id, s)
			}
		}
	}
	// Failed, inserted and recently sent recordings of other devices are
	// not taken over.
	for name, front := range map[string]string{
		"gone":   "voice-status: failed\nvoice-device: tablet",
		"done":   "voice-status: inserted\nvoice-device: tablet",
		"flying": "voice-status: sent\nvoice-device: tablet\nvoice-sent-at: " + time.Now().Add(-2*time.Minute).UTC().Format(time.RFC3339),
	} {
		content := "---\nvoice-id: " + name + "\n" + front + "\n---\nno audio here\n"
		if err := os.WriteFile(filepath.Join(v, name+".md"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := runCLI(t, u.getenv, "vault", "take-over"); r.code != 0 || !strings.Contains(r.stdout, "0 recording(s) taken over") {
		t.Errorf("take-over of failed, inserted and recently sent notes: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range []string{"gone", "done", "flying"} {
		if n := notesWithID(t, v, name); len(n) != 1 || n[0].field(vault.KeyDevice) != "tablet" {
			t.Errorf("note %s changed: %+v", name, n)
		}
	}
}

// Scenario: Recordings are sent one at a time
// Scenario: A person's key added while the note is saved or sent survives
// Scenario: A note moved to another folder is still processed
func TestVaultSendsOneAtATimeAndKeepsThePersonsEdits(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	v := t.TempDir()
	startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1",
		"TRANSCRIBER_VAULT_DIR", v, "TRANSCRIBER_DEVICE", "mac")
	voice := testaudio.VoiceNote(t, t.TempDir())

	copyFile(t, voice, source(v, "x.ogg"))
	select {
	case <-engine.inFlight:
	case <-time.After(2 * time.Minute):
		t.Fatal("the first recording never reached the engine")
	}
	x := awaitNote(t, v, "x", "sent")
	copyFile(t, voice, source(v, "y.ogg"))
	y := awaitNote(t, v, "y", "saved")
	addKey(t, x.path, "mood: calm")
	addKey(t, y.path, "project: alpha")
	moved := filepath.Join(v, "projects", "y.md")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(y.path, moved); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if n := engine.count(); n != 1 {
		t.Errorf("engine requests while the first is in flight: %d; want 1", n)
	}
	if n := notesWithID(t, v, "y"); len(n) != 1 || n[0].field(vault.KeyStatus) != "saved" {
		t.Errorf("the second recording while the first is in flight: %+v; want it saved", n)
	}
	engine.unblock()
	x = awaitNote(t, v, "x", "inserted")
	y = awaitNote(t, v, "y", "inserted")
	if !strings.Contains(x.content, "mood: calm\n") || !strings.Contains(x.content, testaudio.GoForwardText) {
		t.Errorf("note x lost the person's key or has no transcript:\n%s", x.content)
	}
	if y.path != moved || !strings.Contains(y.content, "project: alpha\n") || !strings.Contains(y.content, testaudio.GoForwardText) {
		t.Errorf("note y (moved to projects/): %s\n%s", y.path, y.content)
	}
	if n := engine.count(); n != 2 {
		t.Errorf("engine requests: %d; want 2", n)
	}
}

// Scenario: Deleting a note cancels its job and keeps the audio
// Scenario: A result that arrives after the note was deleted is dropped
func TestVaultDeletedNoteCancelsItsJob(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	v := t.TempDir()
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1",
		"TRANSCRIBER_VAULT_DIR", v, "TRANSCRIBER_DEVICE", "mac")
	copyFile(t, testaudio.VoiceNote(t, t.TempDir()), source(v, "d.ogg"))
	<-engine.inFlight
	d := awaitNote(t, v, "d", "sent")
	if err := os.Remove(d.path); err != nil {
		t.Fatal(err)
	}
	id := vault.JobID("mac", "d")
	waitFor(t, "the job of the deleted note to be cancelled", func() bool {
		return showField(runCLI(t, u.client, "jobs", "show", id).stdout, "state") == "cancelled"
	})
	engine.unblock() // the engine answers after all
	time.Sleep(3 * time.Second)
	if n := notesWithID(t, v, "d"); len(n) != 0 {
		t.Errorf("the deleted note came back: %+v", n)
	}
	if _, err := os.Stat(source(v, "d.ogg")); err != nil {
		t.Errorf("the audio of the deleted note: %v; want it kept", err)
	}
	if show := runCLI(t, u.client, "jobs", "show", id).stdout; showField(show, "state") != "cancelled" {
		t.Errorf("jobs show after the late answer:\n%s", show)
	}
	if logs := u.logs.String(); strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "its job is cancelled") {
		t.Errorf("logs of the deletion:\n%s", logs)
	}
}

// Scenario: A permanent error fails the recording at once, and a retry after the fix inserts it
// Scenario: Temporary errors are retried on the schedule, then fail with the last error
// Scenario: A transcript without speech fails the recording and the note says so
// Scenario: A retry of a recording that is neither failed nor waiting changes nothing
// Scenario: An operator's revive and cancel keep the note in step
func TestVaultFailuresAndRetry(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	engine := newOpenAIStandIn(t)
	v := t.TempDir()
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1",
		"TRANSCRIBER_VAULT_DIR", v, "TRANSCRIBER_DEVICE", "mac",
		"TRANSCRIBER_RETRY_SCHEDULE", "3s", "TRANSCRIBER_MAX_ATTEMPTS", "2")
	voice := testaudio.VoiceNote(t, t.TempDir())

	engine.set(401)
	copyFile(t, voice, source(v, "r.ogg"))
	r := awaitNote(t, v, "r", "failed")
	if e := r.field(vault.KeyError); !strings.Contains(e, "invalid_api_key") || !strings.Contains(e, "401") {
		t.Errorf("voice-error of a 401: %q", e)
	}
	if n := engine.count(); n != 1 {
		t.Errorf("requests for a 401: %d; want 1, no retry", n)
	}

	engine.set(503)
	copyFile(t, voice, source(v, "s.ogg"))
	s := awaitNote(t, v, "s", "retry")
	failedAt := time.Now()
	next, err := time.Parse(time.RFC3339, s.field(vault.KeyNextAttempt))
	if err != nil || s.field(vault.KeyAttempts) != "1" || !strings.Contains(s.field(vault.KeyError), "overloaded") {
		t.Errorf("note after the first temporary error:\n%s", s.content)
	}
	if d := next.Sub(failedAt); d < -time.Second || d > 4*time.Second {
		t.Errorf("voice-next-attempt %s is %v from now; want the 3 s of the schedule", next, d)
	}
	s = awaitNote(t, v, "s", "failed")
	if s.field(vault.KeyAttempts) != "2" || !strings.Contains(s.field(vault.KeyError), "overloaded") || s.field(vault.KeyNextAttempt) != "" {
		t.Errorf("note after the attempts ran out:\n%s", s.content)
	}

	engine.mu.Lock()
	engine.status, engine.text = 200, "  "
	engine.mu.Unlock()
	copyFile(t, voice, source(v, "quiet.ogg"))
	q := awaitNote(t, v, "quiet", "failed")
	if !strings.Contains(q.field(vault.KeyError), "no_speech") || !strings.Contains(q.content, "No speech was recognised in this recording.") {
		t.Errorf("note without speech:\n%s", q.content)
	}

	// The key is fixed: a retry sends each again, attempts from zero.
	engine.mu.Lock()
	engine.text = testaudio.GoForwardText
	engine.mu.Unlock()
	rel, _ := filepath.Rel(v, r.path)
	if out := runCLI(t, u.getenv, "vault", "retry", rel); out.code != 0 || !strings.Contains(out.stdout, "attempts from zero") {
		t.Fatalf("vault retry %s: code %d\n%s%s", rel, out.code, out.stdout, out.stderr)
	}
	r = awaitNote(t, v, "r", "inserted")
	if r.field(vault.KeyAttempts) != "0" || r.field(vault.KeyError) != "" || !strings.Contains(r.content, testaudio.GoForwardText) {
		t.Errorf("note after the retry:\n%s", r.content)
	}
	if out := runCLI(t, u.getenv, "vault", "retry", "s"); out.code != 0 {
		t.Fatalf("vault retry s: code %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	s = awaitNote(t, v, "s", "inserted")
	if s.field(vault.KeyAttempts) != "0" {
		t.Errorf("attempts after the retry of s:\n%s", s.content)
	}
	// An operator's revive and cancel reach the note too.
	if out := runCLI(t, u.client, "jobs", "revive", vault.JobID("mac", "quiet")); out.code != 0 {
		t.Fatalf("jobs revive: code %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	q = awaitNote(t, v, "quiet", "inserted")
	if !strings.Contains(q.content, testaudio.GoForwardText) || strings.Contains(q.content, "No speech") {
		t.Errorf("note revived from the Web UI or the command line:\n%s", q.content)
	}
	engine.set(503)
	copyFile(t, voice, source(v, "c.ogg"))
	awaitNote(t, v, "c", "retry")
	if out := runCLI(t, u.client, "jobs", "cancel", vault.JobID("mac", "c")); out.code != 0 {
		t.Fatalf("jobs cancel: code %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	c := awaitNote(t, v, "c", "failed")
	if !strings.Contains(c.field(vault.KeyError), "cancelled") {
		t.Errorf("note of a cancelled job:\n%s", c.content)
	}
	engine.set(200)
	if out := runCLI(t, u.getenv, "vault", "retry", "c"); out.code != 0 {
		t.Fatalf("vault retry c: code %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	awaitNote(t, v, "c", "inserted")

	before := r.content
	out := runCLI(t, u.getenv, "vault", "retry", "r")
	if out.code != 1 || !strings.Contains(out.stderr, "is inserted") || !strings.Contains(out.stderr, "nothing changed") {
		t.Errorf("vault retry of an inserted note: code %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	if now := notesWithID(t, v, "r"); len(now) != 1 || now[0].content != before {
		t.Errorf("the refused retry changed the note")
	}
	if logs := u.logs.String(); strings.Contains(logs, testaudio.GoForwardText) {
		t.Error("the logs hold transcript text")
	}
}

// Scenario: A request cut off with its worker counts as a failed attempt once its lease expires
func TestVaultRecordingOfALostWorkerIsRetried(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	cl := startCluster(t, engine.URL)
	for i, kv := range cl.env {
		if strings.HasPrefix(kv, "TRANSCRIBER_RETRY_SCHEDULE=") {
			cl.env[i] = "TRANSCRIBER_RETRY_SCHEDULE=6s"
		}
	}
	w := cl.worker(t)
	v := t.TempDir()
	// The vault machine names no engine and no retry policy: the jobs
	// take the workers' (openai, a 6 s schedule).
	getenv := func(k string) string {
		switch k {
		case "TRANSCRIBER_DEVICE":
			return "mac"
		case "TRANSCRIBER_HTTP_ADDR":
			return "127.0.0.1:0"
		case "TRANSCRIBER_ENGINE", "TRANSCRIBER_RETRY_SCHEDULE":
			return ""
		}
		return cl.getenv(k)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() { done <- run(ctx, []string{"vault", v}, getenv, nil, io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("vault: %v", err)
		}
		if t.Failed() {
			t.Logf("vault logs:\n%s", logs.String())
		}
	})
	copyFile(t, testaudio.VoiceNote(t, t.TempDir()), source(v, "k.ogg"))
	<-engine.inFlight
	awaitNote(t, v, "k", "sent")
	w.kill()
	cl.worker(t)
	// Until the lease of the lost attempt runs out, the request may still
	// be running: the note stays sent.
	time.Sleep(5 * time.Second)
	if n := notesWithID(t, v, "k"); len(n) != 1 || n[0].field(vault.KeyStatus) != "sent" || n[0].field(vault.KeyAttempts) != "0" {
		t.Errorf("note while the lost request's lease runs: %+v", n)
	}
	k := awaitNote(t, v, "k", "retry")
	if k.field(vault.KeyAttempts) != "1" || !strings.Contains(strings.ToLower(k.field(vault.KeyError)), "timeout") {
		t.Errorf("note once the lease expired:\n%s", k.content)
	}
	k = awaitNote(t, v, "k", "inserted")
	if k.field(vault.KeyAttempts) != "1" || !strings.Contains(k.content, testaudio.GoForwardText) {
		t.Errorf("note after the retry:\n%s", k.content)
	}
	if n := engine.count(); n != 2 {
		t.Errorf("engine requests = %d; want 2 (the lost one and its retry)", n)
	}
}

// Scenario: Changes during a pass lead to exactly one more pass
func TestVaultChangesDuringAPassMakeOneMorePass(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, "http://127.0.0.1:1")
	dir := t.TempDir()
	blobs, err := blob.NewLocal(filepath.Join(cl.dataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := vault.New(vault.Config{Dir: dir, SourceDir: vault.DefaultSourceDir, InboxDir: vault.DefaultInboxDir,
		Device: "mac", DataDir: cl.dataDir, Engine: "local", Policy: workflows.DefaultPolicy(), Idle: time.Hour},
		&jobctl.Service{Client: cl.c, Namespace: "default"}, blobs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}, 1), make(chan struct{})
	in.BeforePass = func() {
		if in.Passes() == 0 {
			held <- struct{}{}
			<-release
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = in.Run(ctx) }()
	<-held
	// The watcher is on; three changes arrive while the first pass runs.
	for i, name := range []string{"one.md", "two.md", "three.md"} {
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte("x"), i+1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the watcher has told of all three
	close(release)
	waitFor(t, "the pass after the changes", func() bool { return in.Passes() >= 2 })
	time.Sleep(2 * time.Second)
	if n := in.Passes(); n != 2 {
		t.Errorf("passes = %d; want 2: the held one and exactly one more", n)
	}
}
