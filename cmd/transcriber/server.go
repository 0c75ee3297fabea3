package main

import (
	"context"
	"io"

	"github.com/transcriber/transcriber/internal/config"
)

func runServer(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := config.Load(env)
	if err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet("server", `Usage: transcriber server [flags]

Runs only the Temporal server, for workers, bots and APIs started
elsewhere with TEMPORAL_ADDRESS pointing at it: the frontend on
$TRANSCRIBER_TEMPORAL_HOST:$TRANSCRIBER_TEMPORAL_PORT and the Web UI on $TRANSCRIBER_UI_ADDR
(off turns it off). The state is kept in $TRANSCRIBER_DATA_DIR/temporal.db
(SQLite), or in PostgreSQL when TRANSCRIBER_DB is a URL such as
postgres://temporal:PASSWORD@db.example:5432/temporal?sslmode=verify-full.
On PostgreSQL the database and its companion <database>_visibility are
created when missing (the user needs CREATEDB for that) and their schemas
set up or migrated to this version at every start. The namespace
TEMPORAL_NAMESPACE is created with the job search attributes.
TEMPORAL_ADDRESS is ignored: this is the server the others dial. Stop with
Ctrl-C or SIGTERM; everything it holds is on disk.`, stderr)
	cfg.RegisterFlags(fs)
	if err := loadConfig(fs, &cfg, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("server takes no arguments, got %q", fs.Args())
	}
	logger := newLogger(cfg, stderr)
	// Roles on one machine often share one environment, with
	// TEMPORAL_ADDRESS naming this very server.
	cfg.TemporalAddress = ""
	conn, err := connect(ctx, cfg, embedPersistent, logger, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	// A namespace created by another tool may lack the job attributes; the
	// roles add them too, but the Web UI's saved searches need them first.
	if err := ensureSearchAttributes(ctx, conn.client, cfg.TemporalNamespace); err != nil {
		return err
	}
	attrs := []any{"temporal", conn.server.FrontendAddr(), "database", conn.server.Database(), "namespace", cfg.TemporalNamespace}
	if ui := conn.server.UIAddr(); ui != "" {
		attrs = append(attrs, "web_ui", "http://"+ui)
	}
	logger.Info("temporal server is running", attrs...)
	<-ctx.Done()
	logger.Info("stopping the temporal server")
	return nil
}
