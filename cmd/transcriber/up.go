package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/httpapi"
	"github.com/transcriber/transcriber/workflows"
)

func runUp(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	return serve(ctx, args, env, stderr, embedPersistent, "up", `Usage: transcriber up [flags]

Runs everything on one machine in one process: an embedded Temporal server
that keeps its state in $TRANSCRIBER_DATA_DIR/temporal.db, the Temporal Web
UI on $TRANSCRIBER_UI_ADDR, a worker, and the HTTP server on
$TRANSCRIBER_HTTP_ADDR (/healthz, /readyz, /metrics). With TEMPORAL_ADDRESS
set it embeds nothing and joins that cluster instead. Stop with Ctrl-C or
SIGTERM: running steps get time to finish, and nothing is lost either way.`)
}

func runWorker(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	return serve(ctx, args, env, stderr, dialLocal, "worker", `Usage: transcriber worker [flags]

Runs a worker that executes jobs from the Temporal server at
TEMPORAL_ADDRESS (default: the "transcriber up" on this machine), with the
HTTP server for /healthz, /readyz and /metrics. Start as many as the
machines allow; Temporal hands each step to exactly one of them.`)
}

// serve runs a worker and the HTTP server until ctx ends, embedding a
// Temporal server first when mode says so.
func serve(ctx context.Context, args []string, env func(string) string, stderr io.Writer, mode embedMode, name, usage string) error {
	cfg, err := config.Load(env)
	if err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet(name, usage, stderr)
	cfg.RegisterFlags(fs)
	if err := loadConfig(fs, &cfg, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("%s takes no arguments, got %q", name, fs.Args())
	}
	logger := newLogger(cfg, stderr)
	tel := newTelemetry()

	// Bind the HTTP port first: a busy port should stop start-up before a
	// server and a worker are half running.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	defer ln.Close()

	conn, err := connect(ctx, cfg, mode, logger, tel)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ensureSearchAttributes(ctx, conn.client, cfg.TemporalNamespace); err != nil {
		return err
	}
	blobs, err := blob.NewLocal(cfg.BlobDir())
	if err != nil {
		return err
	}
	acts, err := newActivities(cfg, blobs, tel)
	if err != nil {
		return err
	}
	w := newWorker(conn.client, acts, tel)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	srv := &http.Server{
		Handler: httpapi.NewHandler(httpapi.Options{
			Gatherer: tel.reg,
			Ready: map[string]httpapi.Check{
				"temporal": func(ctx context.Context) error {
					_, err := conn.client.CheckHealth(ctx, &client.CheckHealthRequest{})
					return err
				},
			},
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(ln) }()

	attrs := []any{"role", name, "http", "http://" + ln.Addr().String(), "engine", cfg.Engine,
		"namespace", cfg.TemporalNamespace, "task_queue", workflows.TaskQueue}
	if conn.server != nil {
		attrs = append(attrs, "temporal", conn.server.FrontendAddr(), "data_dir", cfg.DataDir)
		if ui := conn.server.UIAddr(); ui != "" {
			attrs = append(attrs, "web_ui", "http://"+ui)
		}
	} else {
		attrs = append(attrs, "temporal", cfg.TemporalAddress)
	}
	logger.Info("transcriber is running", attrs...)

	select {
	case <-ctx.Done():
		logger.Info("stopping: letting running steps finish")
	case err := <-httpErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http server shutdown", "error", err)
	}
	return nil
}
