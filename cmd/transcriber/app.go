package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc/codes"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/internal/devserver/pgurl"
	"github.com/transcriber/transcriber/internal/engine/builtin"
	"github.com/transcriber/transcriber/internal/httpapi"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/logging"
	"github.com/transcriber/transcriber/internal/metrics"
	"github.com/transcriber/transcriber/workflows"
)

// loadConfig reads the environment, then the command's flags over it.
func loadConfig(fs *flag.FlagSet, cfg *config.Config, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	return nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(logging.JobFields(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(logging.JobFields(slog.NewTextHandler(w, opts)))
}

// telemetry is the registry every role serves on /metrics.
type telemetry struct {
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	sdk     metrics.SDKHandler
}

func newTelemetry() *telemetry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	return &telemetry{reg: reg, metrics: m, sdk: metrics.NewSDKHandler(reg, m)}
}

// embedMode says whether and how a command embeds a Temporal server when
// TEMPORAL_ADDRESS is unset.
type embedMode int

const (
	// dialLocal: talk to the server of a "transcriber up" on this machine.
	dialLocal embedMode = iota
	// embedPersistent: run the server on the data dir's SQLite file, or on
	// the PostgreSQL that TRANSCRIBER_DB names, with the Web UI; what "up"
	// and "server" do.
	embedPersistent
	// embedEphemeral: run a private in-memory server on free ports for the
	// life of one command.
	embedEphemeral
)

// temporalConn is a client and whatever server was started for it.
type temporalConn struct {
	client client.Client
	server *devserver.Server
	// addr is the frontend dialed.
	addr string
}

func (t *temporalConn) Close() {
	t.client.Close()
	if t.server != nil {
		if err := t.server.Stop(); err != nil {
			slog.Default().Warn("stop embedded temporal server", "error", err)
		}
	}
}

// connect dials TEMPORAL_ADDRESS or, when it is unset, embeds a server as
// mode says and dials that.
func connect(ctx context.Context, cfg config.Config, mode embedMode, logger *slog.Logger, tel *telemetry) (*temporalConn, error) {
	conn := &temporalConn{}
	addr := cfg.TemporalAddress
	if addr == "" {
		switch mode {
		case dialLocal:
			addr = net.JoinHostPort(cfg.TemporalHost, strconv.Itoa(cfg.TemporalPort))
		case embedPersistent, embedEphemeral:
			opts := devserver.Options{
				Namespace:        cfg.TemporalNamespace,
				SearchAttributes: workflows.SearchAttributes(),
				Logger:           logger,
				LogLevel:         slog.LevelWarn,
			}
			if mode == embedPersistent {
				if cfg.DB == "" {
					opts.DatabaseFile = cfg.DatabaseFile()
				} else {
					u, err := pgurl.Parse(cfg.DB)
					if err != nil {
						return nil, fmt.Errorf("TRANSCRIBER_DB: %w", err)
					}
					opts.Postgres = &u
				}
				opts.FrontendPort = cfg.TemporalPort
				opts.Host = cfg.TemporalHost
				opts.UIAddr = cfg.UIAddr
			} else {
				// One-shot runs are quiet; the server's warnings about its
				// own start-up mean nothing to someone transcribing a file.
				opts.LogLevel = slog.LevelError
				opts.WithoutSystemWorker = true
			}
			srv, err := devserver.Start(opts)
			if err != nil {
				return nil, fmt.Errorf("embedded temporal server: %w", err)
			}
			conn.server = srv
			addr = srv.FrontendAddr()
		}
	}
	opts := client.Options{
		HostPort:  addr,
		Namespace: cfg.TemporalNamespace,
		Logger:    sdklog.NewStructuredLogger(logger),
	}
	if tel != nil {
		opts.MetricsHandler = tel.sdk
	}
	sec := cfg.TemporalSecurity
	if conn.server == nil {
		if err := sec.Apply(&opts); err != nil {
			return nil, fmt.Errorf("temporal connection settings: %w", err)
		}
	} else if sec.Configured() {
		// The embedded server speaks plain gRPC on loopback; the settings
		// were most likely meant for a cluster that TEMPORAL_ADDRESS names.
		logger.Warn("TEMPORAL_TLS* and TEMPORAL_API_KEY apply to the cluster TEMPORAL_ADDRESS names; the embedded server ignores them")
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.DialContext(dialCtx, opts)
	if err != nil {
		if conn.server != nil {
			if stopErr := conn.server.Stop(); stopErr != nil {
				logger.Warn("stop embedded temporal server", "error", stopErr)
			}
		}
		if cfg.TemporalAddress == "" && mode == dialLocal {
			return nil, fmt.Errorf("no Temporal server at %s: start one with \"transcriber up\" or set TEMPORAL_ADDRESS (%w)%s", addr, err, dialHint(err, sec))
		}
		return nil, fmt.Errorf("connect to Temporal at %s: %w%s", addr, err, dialHint(err, sec))
	}
	conn.client, conn.addr = c, addr
	return conn, nil
}

// dialHint says which settings to look at when a secured cluster turns a
// client away. The SDK's error alone names gRPC codes and handshake
// details, not our variables.
func dialHint(err error, sec config.TemporalSecurity) string {
	if code := serviceerror.ToStatus(err).Code(); code == codes.PermissionDenied || code == codes.Unauthenticated {
		if sec.APIKey == "" {
			return "; the cluster wants credentials: set TEMPORAL_API_KEY, or a client certificate with TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
		}
		return "; the cluster refused TEMPORAL_API_KEY: check the key and its permissions on TEMPORAL_NAMESPACE"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate signed by unknown authority"), strings.Contains(msg, "certificate is not valid"),
		strings.Contains(msg, "doesn't contain any IP SANs"), strings.Contains(msg, "certificate is valid for"):
		return "; the server's certificate is not trusted: set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the CA that signed it, or TEMPORAL_TLS_SERVER_NAME to the name it carries"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"),
		strings.Contains(msg, "unknown certificate authority"):
		return "; the server wants a client certificate it trusts: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "; the server does not speak TLS: unset TEMPORAL_TLS or set it to false"
	case !sec.TLSEnabled() && strings.Contains(msg, "server preface"):
		// A TLS listener hangs up on a client that greets it in clear.
		return "; the server may want TLS: set TEMPORAL_TLS=true (and TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private CA)"
	case sec.TLSEnabled() && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "EOF")):
		// In TLS 1.3 the server judges the client's certificate after the
		// client thinks the handshake is over, so a refusal may arrive as
		// a connection closed under the first request rather than an alert.
		return "; the server closed the connection: it may want a client certificate it trusts, set with TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
	}
	return ""
}

// ensureSearchAttributes registers the job search attributes on a server
// that lacks them, such as a fresh external cluster. The embedded server
// has them from the start.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	ops := c.OperatorService()
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := workflows.SearchAttributes()
	for name := range have.GetCustomAttributes() {
		delete(missing, name)
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return awaitSearchAttributes(ctx, c, namespace, slices.Sorted(maps.Keys(missing)))
}

// searchAttributesTimeout bounds the wait for a server to use attributes
// just added; servers refresh their copy of a namespace every 10 s by
// default.
const searchAttributesTimeout = time.Minute

// awaitSearchAttributes waits until the server accepts a query naming every
// one of names. A server uses an attribute added to a namespace only once
// it refreshes its copy of the namespace; until then it refuses jobs that
// set it, and a job accepted meanwhile would be answered with an error.
func awaitSearchAttributes(ctx context.Context, c client.Client, namespace string, names []string) error {
	conds := make([]string, len(names))
	for i, n := range names {
		conds[i] = n + " IS NULL"
	}
	req := &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: strings.Join(conds, " AND ")}
	ctx, cancel := context.WithTimeout(ctx, searchAttributesTimeout)
	defer cancel()
	for {
		_, err := c.WorkflowService().CountWorkflowExecutions(ctx, req)
		var invalid *serviceerror.InvalidArgument
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &invalid) && ctx.Err() == nil:
			return fmt.Errorf("check search attributes %s: %w", strings.Join(names, ", "), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes %s were added, but the server did not use them within %v: %w",
				strings.Join(names, ", "), searchAttributesTimeout, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// newActivities wires the steps to the engines and stores the
// configuration selects.
// Workers that serve no intake (a one-shot transcribe) pass withIntakes
// false and run only the command line's and the API's jobs.
func newActivities(cfg config.Config, blobs blob.Store, tel *telemetry, withIntakes bool) (*activities.Activities, error) {
	tools, err := audio.NewTools()
	if err != nil {
		return nil, err
	}
	built, err := builtin.Engines.Build(cfg.EngineSettings, cfg.Engine)
	if err != nil {
		return nil, err
	}
	engines := make(map[string]activities.Recognizer, len(built))
	for name, e := range built {
		engines[name] = e
	}
	fetchers, repliers := map[job.Source]activities.Fetcher{}, map[job.Source]activities.Replier{}
	if withIntakes {
		if fetchers, repliers, err = intakeSteps(cfg); err != nil {
			return nil, err
		}
	}
	work := os.TempDir()
	return &activities.Activities{
		Blobs:         blobs,
		Audio:         tools,
		Engines:       engines,
		Repliers:      repliers,
		Fetchers:      fetchers,
		Metrics:       tel.metrics,
		WorkDir:       work,
		MaxDuration:   cfg.MaxDuration,
		ChunkDuration: cfg.ChunkDuration,
	}, nil
}

// newWorkers registers the workflow and the steps on the job task queue,
// and each engine's steps on the engine's own queue, where this worker runs
// at most concurrency of them at once: Temporal keeps the rest queued, so
// the limit holds across all jobs without a lock of ours.
func newWorkers(c client.Client, acts *activities.Activities, tel *telemetry, concurrency int) workerGroup {
	info, _ := debug.ReadBuildInfo()
	// The SDK's default checksum reads the whole executable.
	worker.SetBinaryChecksum(buildID(info))
	opts := worker.Options{
		Interceptors: []interceptor.WorkerInterceptor{&activities.Interceptor{Metrics: tel.metrics}},
		// Give in-flight steps time to finish before a stop abandons them;
		// Temporal hands abandoned ones to another worker after their lease.
		WorkerStopTimeout: 10 * time.Second,
	}
	w := worker.New(c, workflows.TaskQueue, opts)
	w.RegisterWorkflowWithOptions(workflows.TranscribeRecording, workflow.RegisterOptions{Name: workflows.WorkflowName})
	w.RegisterActivity(acts)
	group := workerGroup{w}
	for _, name := range slices.Sorted(maps.Keys(acts.Engines)) {
		eo := opts
		eo.DisableWorkflowWorker = true
		eo.MaxConcurrentActivityExecutionSize = concurrency
		eo.MaxConcurrentActivityTaskPollers = min(concurrency, 2)
		ew := worker.New(c, workflows.EngineTaskQueue(name), eo)
		ew.RegisterActivity(acts.Recognize)
		ew.RegisterActivity(acts.CheckRecognition)
		group = append(group, ew)
	}
	return group
}

// workerGroup starts and stops a role's workers together.
type workerGroup []worker.Worker

func (g workerGroup) Start() error {
	for i, w := range g {
		if err := w.Start(); err != nil {
			g[:i].Stop()
			return err
		}
	}
	return nil
}

// Stop drains all workers at once, so stopping takes one drain period
// however many engines there are.
func (g workerGroup) Stop() {
	var wg sync.WaitGroup
	for _, w := range g {
		wg.Go(w.Stop)
	}
	wg.Wait()
}

// jobEngines picks the engine of a new job and its fallback: the engine
// the sender named, else the route for the job's language.
func jobEngines(cfg config.Config, named, language string) (engine, fallback string) {
	if named == "" {
		return cfg.Route(language)
	}
	if cfg.FallbackEngine != named {
		fallback = cfg.FallbackEngine
	}
	return named, fallback
}

func policyFrom(cfg config.Config) workflows.Policy {
	return workflows.Policy{Backoff: cfg.RetrySchedule, MaxAttempts: cfg.MaxAttempts, ParkFor: cfg.ParkFor, Retain: cfg.Retention,
		OperationTimeout: cfg.OperationTimeout}
}

// serviceDefaults answers jobs that leave their engine or retry policy to
// the service with this worker's settings.
func serviceDefaults(cfg config.Config) *activities.ServiceDefaults {
	p := policyFrom(cfg)
	return &activities.ServiceDefaults{
		Route: cfg.Route,
		Policy: activities.Defaults{Backoff: p.Backoff, MaxAttempts: p.MaxAttempts, ParkFor: p.ParkFor, Retain: p.Retain,
			OperationTimeout: p.OperationTimeout},
	}
}

// startWorker wires the steps and starts a worker; stop drains it.
func startWorker(cfg config.Config, c client.Client, blobs blob.Store, tel *telemetry, withIntakes bool) (stop func(), err error) {
	acts, err := newActivities(cfg, blobs, tel, withIntakes)
	if err != nil {
		return nil, err
	}
	w := newWorkers(c, acts, tel, cfg.EngineConcurrency)
	// The webhook step runs on the job queue, beside the job's other steps;
	// the service's defaults are a local step of the job's own worker.
	w[0].RegisterActivity(newNotifier(cfg))
	w[0].RegisterActivity(serviceDefaults(cfg))
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	return w.Stop, nil
}

// engineCallbacks receives the calls of engines whose settings turn their
// callbacks on (AssemblyAI's webhook secret); nil, when none does, turns
// the endpoint off.
func engineCallbacks(cfg config.Config, jobs *jobctl.Service, logger *slog.Logger) *httpapi.EngineCallbacks {
	receivers := builtin.Engines.Callbacks(cfg.EngineSettings)
	if len(receivers) == 0 {
		return nil
	}
	return &httpapi.EngineCallbacks{
		Engines: receivers,
		Logger:  logger,
		Notify: func(ctx context.Context, jobID string, cb workflows.EngineCallback) error {
			err := jobs.NotifyEngineCallback(ctx, jobID, cb)
			if errors.Is(err, jobctl.ErrNotRunning) {
				return httpapi.ErrJobNotRunning
			}
			return err
		},
	}
}
