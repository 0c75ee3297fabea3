package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/httpapi"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/workflows"
)

func runUp(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return serve(ctx, args, env, stderr, role{name: "up", mode: embedPersistent, worker: true, intakes: true, api: true}, `Usage: transcriber up [flags]

Runs everything on one machine in one process: an embedded Temporal server
that keeps its state in $TRANSCRIBER_DATA_DIR/temporal.db (or in the
PostgreSQL that TRANSCRIBER_DB names), the Temporal Web
UI on $TRANSCRIBER_UI_ADDR, a worker, the HTTP server on
$TRANSCRIBER_HTTP_ADDR (/healthz, /readyz, /metrics, and the job API under
/v1 when TRANSCRIBER_API_TOKENS is set), and the Telegram bot when
TELEGRAM_BOT_TOKEN is set. With TEMPORAL_ADDRESS set it embeds nothing
and joins that cluster instead. Stop with Ctrl-C or SIGTERM: running steps
get time to finish, and nothing is lost either way.`)
}

func runWorker(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return serve(ctx, args, env, stderr, role{name: "worker", mode: dialLocal, worker: true}, `Usage: transcriber worker [flags]

Runs a worker that executes jobs from the Temporal server at
TEMPORAL_ADDRESS (default: the "transcriber up" on this machine), with the
HTTP server for /healthz, /readyz and /metrics. Start as many as the
machines allow; Temporal hands each step to exactly one of them. Workers
that should fetch and answer Telegram recordings need TELEGRAM_BOT_TOKEN.`)
}

func runBot(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return serve(ctx, args, env, stderr, role{name: "bot", mode: dialLocal, intakes: true, only: job.SourceTelegram}, `Usage: transcriber bot [flags]

Runs the Telegram bot alone against the Temporal server at TEMPORAL_ADDRESS
(default: the "transcriber up" on this machine), with the HTTP server for
/healthz, /readyz and /metrics. It needs TELEGRAM_BOT_TOKEN; who may use it
is TELEGRAM_ALLOWED_USERS. Workers do the jobs it starts.`)
}

// role says what one command runs.
type role struct {
	name   string
	mode   embedMode
	worker bool
	// intakes runs the configured intakes; only, when set, runs that one
	// alone, and it must be configured.
	intakes bool
	only    job.Source
	// api serves the job API under /v1 beside health and metrics.
	api bool
	// vaultArg: the one argument is the vault (TRANSCRIBER_VAULT_DIR).
	vaultArg bool
	// help, when set, focuses --help on these shared settings, for a
	// role a person starts by hand.
	help []string
}

// serve runs the role's parts and the HTTP server until ctx ends or one of
// them fails, embedding a Temporal server first when the role says so.
// Start-up binds the HTTP port before anything else, so a busy port stops
// it before a server or worker runs; shutdown stops taking work in (HTTP
// and the intakes), then drains the workers, then closes the client and the
// server.
func serve(ctx context.Context, args []string, env func(string) string, stderr io.Writer, r role, usage string) error {
	cfg, err := config.Load(env)
	if err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet(r.name, usage, stderr)
	cfg.RegisterFlags(fs)
	if r.help != nil {
		focusHelp(fs, usage, stderr, r.help...)
	}
	if err := loadConfig(fs, &cfg, args); err != nil {
		return err
	}
	switch {
	case r.vaultArg && fs.NArg() == 1:
		cfg.VaultDir = fs.Arg(0)
	case r.vaultArg && fs.NArg() == 0 && cfg.VaultDir == "":
		return usageError("%s needs the vault: transcriber %s DIR", r.name, r.name)
	case r.vaultArg && fs.NArg() > 1, !r.vaultArg && fs.NArg() > 0:
		return usageError("%s takes no arguments but the vault, got %q", r.name, fs.Args())
	}
	run := r.intakesToRun(cfg)
	if r.only != "" && len(run) == 0 {
		return usageError("the %s intake is not configured: it needs %s", r.only, intakeNamed(r.only).needs)
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

	stopNats, err := prepareNats(cfg, r.mode == embedPersistent && r.worker, r.worker, logger)
	if err != nil {
		return err
	}
	defer stopNats()

	conn, err := connect(ctx, cfg, r.mode, logger, tel)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ensureSearchAttributes(ctx, conn.client, cfg.TemporalNamespace); err != nil {
		return err
	}
	blobs, err := blob.OpenStore(ctx, cfg.BlobURL, cfg.DataDir, env)
	if err != nil {
		return err
	}
	natsSettings(cfg).Blobs = blobs
	// Stopping the workers happens in the shutdown order below; the
	// deferred call covers a start-up that fails before it.
	stopWorkers := func() {}
	var inbox func(context.Context) error
	if r.worker {
		stop, err := startWorker(cfg, conn.client, blobs, tel, true)
		if err != nil {
			return err
		}
		stopWorkers = sync.OnceFunc(stop)
		defer stopWorkers()
		var closeInbox func()
		if inbox, closeInbox, err = natsInbox(cfg, conn.jobs(cfg), logger); err != nil {
			return err
		}
		defer closeInbox()
	}

	var api *httpapi.API
	if r.api {
		webUI := ""
		if conn.server != nil && conn.server.UIAddr() != "" {
			webUI = "http://" + conn.server.UIAddr()
		}
		if api, err = newAPI(cfg, conn.jobs(cfg), blobs, webUI, logger); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler: natsAudioRoute(cfg, httpapi.NewHandler(httpapi.Options{
			API:       api,
			Callbacks: engineCallbacks(cfg, conn.jobs(cfg), logger),
			Gatherer:  tel.reg,
			Ready: map[string]httpapi.Check{
				"temporal": func(ctx context.Context) error {
					_, err := conn.client.CheckHealth(ctx, &client.CheckHealthRequest{})
					return err
				},
			},
		}), blobs, logger),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if api != nil {
		// Requests waiting for a transcript answer with the job's id at
		// once, instead of holding the shutdown up.
		srv.RegisterOnShutdown(api.Drain)
	}
	// The parts run in one group: the first to fail ends them all, and
	// its error is the one returned.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	if inbox != nil {
		g.Go(func() error { return inbox(gctx) })
	}
	var intakesDone sync.WaitGroup
	var names []string
	for _, in := range run {
		deps := intakeDeps{jobs: conn.jobs(cfg), blobs: blobs, logger: logger, choices: choices{engine: true, policy: true}}
		if !r.worker {
			// An intake without the service's workers beside it leaves to
			// them what its own settings do not name.
			deps.choices = clientChoices(env, fs)
		}
		loop, err := in.loop(cfg, deps)
		if err != nil {
			return err
		}
		names = append(names, string(in.source))
		intakesDone.Add(1)
		g.Go(func() error {
			defer intakesDone.Done()
			if err := loop(gctx); err != nil && gctx.Err() == nil {
				return fmt.Errorf("%s intake: %w", in.source, err)
			}
			return nil
		})
	}
	// Shutdown goes in one order, whatever ended the run: first stop
	// taking new work (the HTTP server drains its requests while the
	// intakes stop), then let the workers finish their running steps,
	// and only then, on return, close the Temporal client and the
	// embedded server they all use.
	g.Go(func() error {
		<-gctx.Done()
		if ctx.Err() != nil {
			logger.Info("stopping: letting running steps finish")
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			logger.Warn("http server shutdown", "error", err)
		}
		intakesDone.Wait()
		stopWorkers()
		return nil
	})

	attrs := []any{"role", r.name, "http", "http://" + ln.Addr().String(), "engine", cfg.Engine,
		"namespace", cfg.TemporalNamespace, "task_queue", workflows.TaskQueue, "intakes", names}
	if conn.server != nil {
		attrs = append(attrs, "temporal", conn.server.FrontendAddr(), "database", conn.server.Database(), "data_dir", cfg.DataDir)
		if ui := conn.server.UIAddr(); ui != "" {
			attrs = append(attrs, "web_ui", "http://"+ui)
		}
	} else {
		attrs = append(attrs, "temporal", conn.addr)
	}
	logger.Info("transcriber is running", attrs...)

	return g.Wait()
}

// intakesToRun are the intakes the role runs with this configuration.
func (r role) intakesToRun(cfg config.Config) []intake {
	if !r.intakes {
		return nil
	}
	var run []intake
	for _, in := range intakes {
		if in.configured(cfg) && (r.only == "" || in.source == r.only) {
			run = append(run, in)
		}
	}
	return run
}

func intakeNamed(source job.Source) intake {
	for _, in := range intakes {
		if in.source == source {
			return in
		}
	}
	panic("no intake " + string(source))
}
