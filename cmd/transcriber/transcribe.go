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
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	natsengine "github.com/transcriber/transcriber/internal/engine/nats"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

const transcribeUsage = `Usage: transcriber transcribe [flags] FILE...

Transcribes each FILE (any audio or video ffmpeg reads; - reads standard
input) and prints the transcripts to standard output, in order, or with
--output-dir writes DIR/<name>.<format> for each. Progress goes to
standard error. Without TEMPORAL_ADDRESS it runs a private in-memory
Temporal server and worker inside this process; with it, the jobs go to
that cluster (whose workers must see the same data dir). The engine and
the retry policy are then the service's, unless this command names them
(--engine or TRANSCRIBER_ENGINE, TRANSCRIBER_ENGINE_ROUTES; the retry
settings such as TRANSCRIBER_RETRY_SCHEDULE); it says which apply. Exits
non-zero, naming the state and the reason, when a job fails or dies.`

// transcribeSettings are the shared settings that transcribe's help shows:
// where the jobs go and what recognises them.
var transcribeSettings = []string{"temporal-address", "temporal-namespace", "data-dir", "engine", "log-level"}

func runTranscribe(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := config.Load(env)
	if err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet("transcribe", transcribeUsage, stderr)
	cfg.RegisterFlags(fs)
	format := fs.String("format", "txt", "output formats, comma-separated: "+strings.Join(transcript.Formats, ", "))
	language := fs.String("language", "", "language of the speech, e.g. en or ru; empty lets the engine decide")
	var outDir string
	fs.StringVar(&outDir, "output-dir", "", "write each transcript to DIR/<name>.<format> instead of standard output")
	fs.StringVar(&outDir, "o", "", "short for --output-dir")
	force := fs.Bool("force", false, "overwrite transcript files that exist in the output dir")
	quiet := fs.Bool("quiet", false, "print no progress on standard error, only errors")
	var speakers speakersFlag
	fs.Var(&speakers, "speakers", "label who speaks, through engines that can (assemblyai, openai); --speakers=N expects N speakers")
	focusHelp(fs, transcribeUsage, stderr, transcribeSettings...)
	if err := loadConfig(fs, &cfg, args); err != nil {
		return err
	}
	named := ""
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "engine" {
			named = cfg.Engine
		}
	})
	choice := clientChoices(env, fs)
	if len(fs.Args()) == 0 {
		fs.Usage()
		return usageError("give at least one FILE, or - for standard input")
	}
	formats, err := parseFormats(*format)
	if err != nil {
		return usageError("--format: %v", err)
	}
	inputs, err := namedInputs(fs.Args())
	if err != nil {
		return usageError("%v", err)
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) && slices.ContainsFunc(inputs, func(in input) bool { return in.stdin }) {
		// Nobody types a recording, and a read from a terminal would
		// outlast Ctrl-C, which the run catches to stop cleanly.
		return usageError("- reads a recording from standard input, which is a terminal here; pipe one in: cat voice.ogg | transcriber transcribe -")
	}
	// Unreadable and empty files are refused before anything starts, so
	// nothing is created for them.
	for _, in := range inputs {
		if in.stdin {
			continue
		}
		if err := checkInput(in.path); err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
	}
	var outs outputs
	if outDir != "" {
		// Every file that would be written is known now, so a clash ends
		// the run before any work is spent on it.
		if outs, err = planOutputs(outDir, inputs, formats, *force); err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
	}
	for i, in := range inputs {
		if !in.stdin {
			continue
		}
		path, err := spoolStdin(stdin)
		if path != "" {
			defer func() { _ = os.Remove(path) }() // a temporary copy
		}
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		inputs[i].path = path
	}

	logger := newLogger(cfg, stderr)
	var blobDir string
	mode := dialLocal
	// The recognition exchange answers the inbox and serves the audio of
	// the "transcriber up" on this machine, which a private server could
	// not reach: jobs of the nats engine go to it.
	if cfg.TemporalAddress == "" && cfg.Engine != natsengine.Name {
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
	if mode != embedEphemeral && !*quiet {
		shown := named
		if shown == "" {
			shown = cfg.Engine
		}
		fmt.Fprintln(stderr, choice.describe(shown))
	}
	ids := make([]string, len(inputs))
	for i, in := range inputs {
		id, err := submitFile(ctx, jobs, blobs, cfg, in, named, *language, speakers.recognition(), choice, mode != embedEphemeral)
		if err != nil {
			return fmt.Errorf("%s: %w", in.label, err)
		}
		ids[i] = id
	}
	var failed []string
	headers := len(inputs) > 1 || len(formats) > 1
	prog := newProgress(stderr, *quiet)
	for i, in := range inputs {
		st, err := awaitShowing(ctx, jobs, ids[i], in.label, prog, stderr)
		if err != nil && ctx.Err() != nil && mode == embedEphemeral {
			return &exitError{code: 130, msg: "interrupted; nothing was kept"}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", in.label, err)
		}
		if st.State != job.Done {
			if outs == nil && len(inputs) > 1 {
				fmt.Fprintf(stdout, "==> %s <==\n", in.label)
			}
			msg := fmt.Sprintf("%s: job %s is %s", in.label, st.JobID, st.State)
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
			failed = append(failed, in.label)
			continue
		}
		doc, err := transcript.Load(ctx, blobs, st.TranscriptKey)
		if err != nil {
			return fmt.Errorf("%s: %w", in.label, err)
		}
		for _, f := range formats {
			if outs != nil {
				path := outs[i][f]
				if err := writeTranscript(path, doc, f, *force); err != nil {
					return fmt.Errorf("%s: %w", in.label, err)
				}
				if !*quiet {
					fmt.Fprintf(stderr, "transcriber: %s: wrote %s\n", in.label, path)
				}
				continue
			}
			if headers {
				if len(formats) > 1 {
					fmt.Fprintf(stdout, "==> %s [%s] <==\n", in.label, f)
				} else {
					fmt.Fprintf(stdout, "==> %s <==\n", in.label)
				}
			}
			if err := transcript.Render(stdout, doc, f); err != nil {
				return fmt.Errorf("%s: %w", in.label, err)
			}
		}
	}
	if len(failed) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// input is one recording named on the command line.
type input struct {
	// label names it in messages and headers: the argument, or stdin.
	label string
	// path is where its bytes are: the file, or standard input's copy.
	path  string
	stdin bool
	// name is the original's name in the job; stem that of its output
	// files.
	name, stem string
}

// stdinName is what a recording read from standard input is called, in
// the job and in output file names.
const stdinName = "stdin"

func namedInputs(args []string) ([]input, error) {
	var out []input
	seenStdin := false
	for _, a := range args {
		if a == "-" {
			if seenStdin {
				return nil, errors.New("- is given more than once; standard input can be read only once")
			}
			seenStdin = true
			out = append(out, input{label: stdinName, stdin: true, name: stdinName, stem: stdinName})
			continue
		}
		base := filepath.Base(a)
		out = append(out, input{label: a, path: a, name: base, stem: strings.TrimSuffix(base, filepath.Ext(base))})
	}
	return out, nil
}

// spoolStdin copies standard input to a temporary file, because ffmpeg
// seeks in some containers and a pipe cannot seek. The caller removes the
// file whenever path is not empty.
func spoolStdin(stdin io.Reader) (path string, err error) {
	f, err := os.CreateTemp("", "transcriber-stdin-*")
	if err != nil {
		return "", fmt.Errorf("stdin: keep a copy: %w", err)
	}
	n, err := io.Copy(f, stdin)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return f.Name(), fmt.Errorf("stdin: read: %w", err)
	}
	if n == 0 {
		return f.Name(), fmt.Errorf("%s: %s: standard input gave no bytes; nothing was submitted", stdinName, job.EmptyAudio)
	}
	return f.Name(), nil
}

// parseFormats reads a comma-separated list of formats, each once, in the
// order given.
func parseFormats(v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if !validFormat(f) {
			return nil, fmt.Errorf("%q: want one or more of %s, comma-separated", f, strings.Join(transcript.Formats, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// outputs are the files each input's transcript goes to, by format.
type outputs []map[string]string

// planOutputs names every file the run will write and refuses the run when
// two inputs would write the same file or, without force, when a file is
// there already. It creates dir, so that a directory that cannot be made
// is also found before any work is done.
func planOutputs(dir string, inputs []input, formats []string, force bool) (outputs, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("--output-dir %s: not a directory", dir)
	}
	byStem := map[string]string{}
	outs := make(outputs, len(inputs))
	var exist []string
	for i, in := range inputs {
		if prev, ok := byStem[in.stem]; ok {
			return nil, fmt.Errorf("%s and %s would both be written as %s.*; transcribe them into different directories",
				prev, in.label, filepath.Join(dir, in.stem))
		}
		byStem[in.stem] = in.label
		outs[i] = map[string]string{}
		for _, f := range formats {
			path := filepath.Join(dir, in.stem+"."+f)
			outs[i][f] = path
			if _, err := os.Lstat(path); err == nil && !force {
				exist = append(exist, path)
			}
		}
	}
	switch len(exist) {
	case 0:
	case 1:
		return nil, fmt.Errorf("%s already exists; nothing was submitted (--force overwrites it)", exist[0])
	default:
		return nil, fmt.Errorf("%s already exist; nothing was submitted (--force overwrites them)", strings.Join(exist, ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--output-dir: %w", err)
	}
	return outs, nil
}

// writeTranscript writes the rendering whole or not at all: a run stopped
// midway leaves no truncated subtitle file behind, and without force a file
// that appeared since the run began is still not overwritten.
func writeTranscript(path string, doc transcript.Document, format string, force bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // after a link the temporary name remains; after a rename this finds nothing
	err = transcript.Render(tmp, doc, format)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		if force {
			err = os.Rename(tmp.Name(), path)
		} else {
			err = os.Link(tmp.Name(), path)
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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
func submitFile(ctx context.Context, jobs *jobctl.Service, blobs blob.Store, cfg config.Config, in input, named, language string,
	rec workflows.Recognition, choice choices, toService bool) (string, error) {
	f, err := os.Open(in.path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // only read
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	engine, fallback := jobEngines(cfg, named, language)
	policy := policyFrom(cfg)
	if toService && !choice.engine {
		// The service's workers route the job by their own settings.
		engine, fallback = "", ""
	}
	if toService && !choice.policy {
		policy = workflows.Policy{}
	}
	id := workflows.CLIJobID(h.Sum(nil), engine, language, rec.Key())
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	key := blob.JobKey(id, "original"+safeExt(in.name))
	size, err := blobs.Put(ctx, key, f)
	if err != nil {
		return "", err
	}
	req := workflows.Input{
		Source:      job.SourceCLI,
		Original:    workflows.Original{Key: key, Name: in.name, Size: size},
		Engine:      engine,
		Fallback:    fallback,
		Language:    language,
		Recognition: rec,
		Policy:      policy,
		AcceptedAt:  time.Now(),
		Owner:       job.OwnerCLI,
	}
	// The same file submitted while its job runs joins that job; once the
	// job has closed, submitting it again starts afresh.
	if _, err := jobs.Start(ctx, jobctl.StartRequest{ID: id, Input: req, Policy: jobctl.JoinRunning}); err != nil {
		return "", err
	}
	return id, nil
}

// speakersFlag is --speakers: alone it asks for speaker labels, with a
// number it also says how many speakers to expect, which some providers
// take as a hint.
type speakersFlag struct {
	on       bool
	expected int
}

func (f *speakersFlag) String() string {
	switch {
	case f == nil || !f.on:
		return "false"
	case f.expected > 0:
		return strconv.Itoa(f.expected)
	}
	return "true"
}

func (f *speakersFlag) Set(v string) error {
	if b, err := strconv.ParseBool(v); err == nil {
		f.on, f.expected = b, 0
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 32 {
		return fmt.Errorf("%q is not true, false or a number of speakers from 1 to 32", v)
	}
	f.on, f.expected = true, n
	return nil
}

// IsBoolFlag lets --speakers stand alone.
func (f *speakersFlag) IsBoolFlag() bool { return true }

func (f *speakersFlag) recognition() workflows.Recognition {
	return workflows.Recognition{Speakers: f.on, SpeakersExpected: f.expected}
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
	return awaitShowing(ctx, jobs, id, id, newProgress(io.Discard, true), stderr)
}

// awaitShowing is awaitSettled that shows the job's progress on prog as
// the file named label.
func awaitShowing(ctx context.Context, jobs *jobctl.Service, id, label string, prog *progress, stderr io.Writer) (workflows.Status, error) {
	prog.begin()
	defer prog.end()
	st, err := jobs.AwaitReporting(ctx, id, func(err error) {
		prog.end()
		fmt.Fprintf(stderr, "transcriber: job %s: no worker answers yet (%v); still waiting\n", id, err)
	}, func(st workflows.Status) { prog.show(label, st) })
	if err != nil && ctx.Err() != nil {
		return st, fmt.Errorf("stopped waiting for job %s (state %s); it goes on", id, st.State)
	}
	return st, err
}

// choices say what a command that sends jobs to a running service decides
// itself: what its own settings name. The rest is the service's, as its
// workers are configured, so a client with an empty environment gets what
// the operator set up.
type choices struct {
	engine, policy bool
}

// engineSettings and policySettings are the settings that make the choices.
var (
	engineSettings = []string{"TRANSCRIBER_ENGINE", "TRANSCRIBER_ENGINE_ROUTES", "TRANSCRIBER_FALLBACK_ENGINE"}
	policySettings = []string{"TRANSCRIBER_RETRY_SCHEDULE", "TRANSCRIBER_MAX_ATTEMPTS", "TRANSCRIBER_PARK_FOR",
		"TRANSCRIBER_RETENTION", "TRANSCRIBER_OPERATION_TIMEOUT"}
)

// clientChoices finds which of the choices this command's environment and
// flags make.
func clientChoices(env func(string) string, fs *flag.FlagSet) choices {
	set := map[string]bool{}
	for _, name := range append(slices.Clone(engineSettings), policySettings...) {
		if env(name) != "" {
			set[name] = true
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if name, ok := config.SettingOfFlag(f.Name); ok {
			set[name] = true
		}
	})
	var c choices
	for _, name := range engineSettings {
		c.engine = c.engine || set[name]
	}
	for _, name := range policySettings {
		c.policy = c.policy || set[name]
	}
	return c
}

// describe says which choices apply, for a person who may have configured
// the service and not this shell.
func (c choices) describe(named string) string {
	engine := "the service's engine (this command names none)"
	if c.engine {
		engine = named + " (set here)"
	}
	policy := "the service's retry policy"
	if c.policy {
		policy = "the retry policy set here"
	}
	return "engine: " + engine + "; " + policy
}
