package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

const transcribeUsage = `Usage: transcriber transcribe [flags] FILE...

Transcribes each FILE (any audio or video ffmpeg reads) and prints the
transcripts to standard output, in order. Without TEMPORAL_ADDRESS it runs a
private in-memory Temporal server and worker inside this process; with it,
the jobs go to that cluster (whose workers must see the same data dir).
Exits non-zero, naming the state and the reason, when a job fails or dies.`

func runTranscribe(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(env)
	if err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet("transcribe", transcribeUsage, stderr)
	cfg.RegisterFlags(fs)
	format := fs.String("format", "txt", "output format: "+strings.Join(transcript.Formats, ", "))
	language := fs.String("language", "", "language of the speech, e.g. en or ru; empty lets the engine decide")
	if err := loadConfig(fs, &cfg, args); err != nil {
		return err
	}
	named := ""
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "engine" {
			named = cfg.Engine
		}
	})
	files := fs.Args()
	if len(files) == 0 {
		fs.Usage()
		return usageError("give at least one FILE")
	}
	if !validFormat(*format) {
		return usageError("--format %q: want one of %s", *format, strings.Join(transcript.Formats, ", "))
	}
	// Unreadable and empty files are refused before anything starts, so
	// nothing is created for them.
	for _, f := range files {
		if err := checkInput(f); err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
	}

	logger := newLogger(cfg, stderr)
	var blobDir string
	mode := dialLocal
	if cfg.TemporalAddress == "" {
		// A one-shot run keeps nothing: its server lives in memory and its
		// files in a temporary directory removed at exit.
		mode = embedEphemeral
		tmp, err := os.MkdirTemp("", "transcriber-*")
		if err != nil {
			return err
		}
		defer func() {
			if err := os.RemoveAll(tmp); err != nil {
				logger.Warn("remove the run's temporary directory", "dir", tmp, "error", err)
			}
		}()
		blobDir = tmp
		if env("TRANSCRIBER_LOG_LEVEL") == "" {
			// The outcome of every file is printed; logs would repeat it.
			cfg.LogLevel = slog.LevelError
			logger = newLogger(cfg, stderr)
		}
	}
	var blobs blob.Store
	if mode == embedEphemeral {
		blobs, err = blob.NewLocal(blobDir)
	} else {
		blobs, err = blob.OpenStore(ctx, cfg.BlobURL, cfg.DataDir, env)
	}
	if err != nil {
		return err
	}
	tel := newTelemetry()
	conn, err := connect(ctx, cfg, mode, logger, tel)
	if err != nil {
		return err
	}
	stopWorker := func() {}
	defer func() {
		shutdown := func() {
			stopWorker()
			conn.Close()
		}
		if conn.server == nil {
			shutdown()
			return
		}
		// A one-shot run owes nothing more once its results are out: its
		// server lives in memory and its jobs have settled. Stopping them
		// gracefully takes about a second that nobody waits for, so it
		// goes on in the background and the process exits without it.
		go shutdown()
	}()
	if conn.server != nil {
		stop, err := startWorker(cfg, conn.client, blobs, tel, false)
		if err != nil {
			return err
		}
		stopWorker = stop
	}

	jobs := conn.jobs(cfg)
	ids := make([]string, len(files))
	for i, f := range files {
		id, err := submitFile(ctx, jobs, blobs, cfg, f, named, *language)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		ids[i] = id
	}
	var failed []string
	for i, f := range files {
		st, err := awaitSettled(ctx, jobs, ids[i], stderr)
		if err != nil && ctx.Err() != nil && mode == embedEphemeral {
			return &exitError{code: 130, msg: "interrupted; nothing was kept"}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if len(files) > 1 {
			fmt.Fprintf(stdout, "==> %s <==\n", f)
		}
		if st.State != job.Done {
			msg := fmt.Sprintf("%s: job %s is %s", f, st.JobID, st.State)
			if st.Failure != nil {
				msg += fmt.Sprintf(" (%s at %s): %s", st.Failure.Kind, st.Failure.Step, st.Failure.Message)
			}
			if st.State == job.Failed || st.State == job.Dead {
				if mode == embedEphemeral {
					msg += "; nothing was kept"
				} else {
					msg += fmt.Sprintf("; revive it with: transcriber jobs revive %s", st.JobID)
				}
			}
			fmt.Fprintln(stderr, "transcriber:", msg)
			failed = append(failed, f)
			continue
		}
		if err := printTranscript(ctx, stdout, blobs, st.TranscriptKey, *format); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	if len(failed) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

func validFormat(f string) bool {
	for _, v := range transcript.Formats {
		if v == f {
			return true
		}
	}
	return false
}

func checkInput(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: cannot read it: %w", path, errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() == 0 {
		return fmt.Errorf("%s: %s: the file has no bytes; nothing was submitted", path, job.EmptyAudio)
	}
	return nil
}

// submitFile keeps the recording in the blob store, then starts its job.
// The store comes first: a job never refers to bytes that are not kept.
func submitFile(ctx context.Context, jobs *jobctl.Service, blobs blob.Store, cfg config.Config, path, named, language string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // only read
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	engine, fallback := jobEngines(cfg, named, language)
	id := workflows.CLIJobID(h.Sum(nil), engine, language)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	key := blob.JobKey(id, "original"+safeExt(path))
	size, err := blobs.Put(ctx, key, f)
	if err != nil {
		return "", err
	}
	in := workflows.Input{
		Source:     job.SourceCLI,
		Original:   workflows.Original{Key: key, Name: filepath.Base(path), Size: size},
		Engine:     engine,
		Fallback:   fallback,
		Language:   language,
		Policy:     policyFrom(cfg),
		AcceptedAt: time.Now(),
	}
	// The same file submitted while its job runs joins that job; once the
	// job has closed, submitting it again starts afresh.
	if _, err := jobs.Start(ctx, jobctl.StartRequest{ID: id, Input: in, Policy: jobctl.JoinRunning}); err != nil {
		return "", err
	}
	return id, nil
}

// safeExt keeps a short alphanumeric extension of a file name, which helps
// people reading the store, and drops anything else a hostile name holds.
func safeExt(name string) string {
	ext := strings.ToLower(filepath.Ext(name))
	if len(ext) < 2 || len(ext) > 9 {
		return ".bin"
	}
	for _, r := range ext[1:] {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return ".bin"
		}
	}
	return ext
}

// awaitSettled waits for the job to be done, failed, dead or cancelled,
// saying once when no worker answers for it for a while.
func awaitSettled(ctx context.Context, jobs *jobctl.Service, id string, stderr io.Writer) (workflows.Status, error) {
	st, err := jobs.Await(ctx, id, func(err error) {
		fmt.Fprintf(stderr, "transcriber: job %s: no worker answers yet (%v); still waiting\n", id, err)
	})
	if err != nil && ctx.Err() != nil {
		return st, fmt.Errorf("stopped waiting for job %s (state %s); it goes on", id, st.State)
	}
	return st, err
}

func printTranscript(ctx context.Context, w io.Writer, blobs blob.Store, key, format string) error {
	doc, err := transcript.Load(ctx, blobs, key)
	if err != nil {
		return err
	}
	return transcript.Render(w, doc, format)
}
