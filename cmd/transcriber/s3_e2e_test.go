package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/blob/s3test"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// Scenario: A worker in another process reads from S3 what the intake stored there
func TestWorkerReadsWhatIntakeStoredInS3(t *testing.T) {
	requireSpeechTools(t)
	s3 := s3test.Start(t)
	s3.CreateBucket(t, "e2e")
	engine := newOpenAIStandIn(t)
	cl := startCluster(t, engine.URL)
	// The worker and the intake share nothing but Temporal and the bucket:
	// each has its own data directory.
	workerDir, intakeDir := t.TempDir(), t.TempDir()
	cl.env = slices.DeleteFunc(cl.env, func(kv string) bool { return strings.HasPrefix(kv, "TRANSCRIBER_DATA_DIR=") })
	cl.env = append(cl.env, s3.Environ("s3://e2e/jobs-store")...)
	w := startProc(t, append(cl.env, "TRANSCRIBER_DATA_DIR="+workerDir, "TRANSCRIBER_HTTP_ADDR=127.0.0.1:0"), "worker")
	defer w.kill()
	cl.env = append(cl.env, "TRANSCRIBER_DATA_DIR="+intakeDir)

	note := testaudio.VoiceNote(t, t.TempDir())
	r := awaitResult(t, cl.submit(t, note))
	if r.code != 0 {
		t.Fatalf("transcribe exited %d\n%s\nworker:\n%s", r.code, r.stderr, w.logs.String())
	}
	if !strings.Contains(r.stdout, testaudio.GoForwardText) {
		t.Errorf("transcript = %q; want %q", r.stdout, testaudio.GoForwardText)
	}
	objects := strings.Join(s3.Objects(t, "e2e"), "\n")
	for _, want := range []string{"original", "transcript.json"} {
		if !strings.Contains(objects, want) {
			t.Errorf("the bucket holds no %s object:\n%s", want, objects)
		}
	}
	// The engine takes the voice note as it is: what reached it is the
	// original, read back from the bucket.
	want, err := os.ReadFile(note)
	if err != nil {
		t.Fatal(err)
	}
	if files := engine.received(); len(files) != 1 || !bytes.Equal(files[0].data, want) || files[0].name != "audio.ogg" {
		t.Errorf("the engine got %d files; want the voice note from the bucket as audio.ogg", len(files))
	}
	for _, dir := range []string{workerDir, intakeDir} {
		if _, err := os.Stat(filepath.Join(dir, "blobs")); !os.IsNotExist(err) {
			t.Errorf("%s has a local blob directory (%v); everything belongs in the bucket", dir, err)
		}
	}
}
