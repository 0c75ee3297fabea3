package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	natsio "github.com/nats-io/nats.go"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/builtin"
	natsengine "github.com/transcriber/transcriber/internal/engine/nats"
)

const recognizerUsage = `Usage: transcriber recognizer [flags]

Runs the reference recognition service of the nats engine: it takes jobs
from transcriber.recognition.jobs.$TRANSCRIBER_NATS_SERVICE at NATS_URL
(default: the NATS server that "transcriber up" embeds on this machine,
$TRANSCRIBER_NATS_EMBED_ADDR), fetches each job's audio from its signed
URL, recognises it with $TRANSCRIBER_RECOGNIZER_ENGINE (local pocketsphinx
by default; any engine and its settings), and publishes the result on
transcriber.recognition.results. Start as many as the machines allow: they
share the queue, and each job goes to one. Raw answers are kept in the
blob store (TRANSCRIBER_BLOB_URL or the data directory), which must be the
one the workers read for them to be found. Stop with Ctrl-C or SIGTERM; a
job in hand is handed back to the queue.`

// recognizerName is the service name results carry.
const recognizerName = "transcriber-recognizer"

func runRecognizer(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := config.Load(env)
	if err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet("recognizer", recognizerUsage, stderr)
	cfg.RegisterFlags(fs)
	if err := loadConfig(fs, &cfg, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("recognizer takes no arguments, got %q", fs.Args())
	}
	logger := newLogger(cfg, stderr)
	nc := *natsSettings(cfg)
	inner := nc.RecognizerEngine
	if inner == "" {
		inner = "local"
	}
	if inner == natsengine.Name {
		return usageError("TRANSCRIBER_RECOGNIZER_ENGINE cannot be nats: the recognizer answers that engine's jobs")
	}
	if nc.URL == "" {
		nc.URL = "nats://" + nc.EmbedAddr
	}
	// The recognizer's own engine is built alone: the nats engine itself
	// would only open a second connection it never uses.
	settings := cfg.EngineSettings
	natsSettings(cfg).URL = ""
	built, err := builtin.Engines.Build(settings, inner)
	if err != nil {
		return err
	}
	rec, ok := built[inner]
	if !ok {
		return usageError("TRANSCRIBER_RECOGNIZER_ENGINE=%s is not configured: %s", inner, "set its credentials")
	}
	tools, err := audio.NewTools()
	if err != nil {
		return err
	}
	blobs, err := blob.OpenStore(ctx, cfg.BlobURL, cfg.DataDir, env)
	if err != nil {
		return err
	}
	conn, err := natsengine.Connect(nc, recognizerName)
	if err != nil {
		return err
	}
	defer conn.Close()
	x, err := natsengine.NewExchange(conn)
	if err != nil {
		return err
	}
	svc := &natsengine.Service{
		X: x, Queue: nc.Service, Name: recognizerName, Version: recognizerVersion(), Store: blobs, KeyOf: blob.JobKey,
		Recognize: recognizeWith(rec, tools), WorkDir: os.TempDir(), HTTP: nil,
		Logger: logger.With("engine", inner),
	}
	if nc.RecognizerHTTPAddr != "" {
		stop, err := serveRecognizerHealth(nc.RecognizerHTTPAddr, conn)
		if err != nil {
			return err
		}
		defer stop()
	}
	logger.Info("recognizer is starting", "nats", natsengine.Redact(nc.URL), "queue", nc.Service, "engine", inner)
	return svc.Run(ctx)
}

// serveRecognizerHealth answers health checks: alive while the process
// runs, ready while it is connected to the broker.
func serveRecognizerHealth(addr string, conn *natsio.Conn) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("recognizer http: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !conn.IsConnected() {
			http.Error(w, "not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

func recognizerVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// recognizeWith recognises with one engine, converting the audio first
// when the engine wants another format, and waiting out its operations.
func recognizeWith(rec engine.Engine, tools *audio.Tools) natsengine.Recognize {
	return func(ctx context.Context, path string, job natsengine.JobMessage) (engine.Result, error) {
		f := rec.Format()
		in := path
		if filepath.Ext(path) != f.Ext {
			in = path + ".converted" + f.Ext
			if _, err := tools.Convert(ctx, path, in, f, nil); err != nil {
				var ie *audio.InputError
				if errors.As(err, &ie) {
					code := "UNSUPPORTED_FORMAT"
					if errors.Is(ie.Err, audio.ErrEmpty) {
						code = "EMPTY_AUDIO"
					}
					return engine.Result{}, &engine.Error{Kind: engine.Rejected, Code: code, Message: ie.Error()}
				}
				return engine.Result{}, err
			}
		}
		sub, err := rec.Submit(ctx, engine.Request{AudioPath: in, Language: job.Language,
			Duration: time.Duration(job.DurationSeconds * float64(time.Second)), JobID: job.JobID})
		for err == nil && !sub.Done() {
			wait := engine.DefaultPollInterval
			if p, ok := rec.(engine.Poller); ok && p.PollInterval() > 0 {
				wait = p.PollInterval()
			}
			select {
			case <-ctx.Done():
				return engine.Result{}, ctx.Err()
			case <-time.After(max(wait, sub.CheckAfter)):
			}
			op := sub.OperationID
			sub, err = rec.Check(ctx, op)
			if err == nil && !sub.Done() && sub.OperationID == "" {
				sub.OperationID = op
			}
		}
		if err != nil {
			return engine.Result{}, fmt.Errorf("recognise: %w", err)
		}
		return *sub.Result, nil
	}
}
