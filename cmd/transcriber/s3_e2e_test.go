package main

import (
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

	r := awaitResult(t, cl.submit(t, testaudio.VoiceNote(t, t.TempDir())))
	if r.code != 0 {
		t.Fatalf("transcribe exited %d\n%s\nworker:\n%s", r.code, r.stderr, w.logs.String())
	}
	if !strings.Contains(r.stdout, testaudio.GoForwardText) {
		t.Errorf("transcript = %q; want %q", r.stdout, testaudio.GoForwardText)
	}
	objects := strings.Join(s3.Objects(t, "e2e"), "\n")
	for _, want := range []string{"original", "audio", "transcript.json"} {
		if !strings.Contains(objects, want) {
			t.Errorf("the bucket holds no %s object:\n%s", want, objects)
		}
	}
	for _, dir := range []string{workerDir, intakeDir} {
		if _, err := os.Stat(filepath.Join(dir, "blobs")); !os.IsNotExist(err) {
			t.Errorf("%s has a local blob directory (%v); everything belongs in the bucket", dir, err)
		}
	}
}
