package devserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	postgresplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/tools/common/schema"
	toolsql "go.temporal.io/server/tools/sql"

	"github.com/transcriber/transcriber/internal/devserver/pgurl"
)

// The schemas the Temporal server module embeds for PostgreSQL 12 and
// later; the same the admin tools' temporal-sql-tool applies.
const (
	postgresSchema           = "postgresql/v12/temporal"
	postgresVisibilitySchema = "postgresql/v12/visibility"
)

// postgresShards is fixed when the database is first used. It matches the
// compose file's default, so that either can take over a database the
// other created.
const postgresShards = 4

// postgresMaxConns bounds each connection pool. Every service of the
// server keeps one pool per store, so four services and two stores stay
// within PostgreSQL's default of 100 connections.
const postgresMaxConns = 10

// SQLSTATE codes the start-up turns into advice.
const (
	pgInvalidCatalogName    = "3D000"
	pgDuplicateDatabase     = "42P04"
	pgInsufficientPrivilege = "42501"
	pgInvalidPassword       = "28P01"
	pgInvalidAuthorization  = "28000"
)

func postgresSQL(u pgurl.URL, database string) *config.SQL {
	attrs := maps.Clone(u.Params)
	attrs["sslmode"] = u.SSLMode()
	return &config.SQL{
		PluginName:        postgresplugin.PluginName,
		DatabaseName:      database,
		ConnectAddr:       u.Addr,
		ConnectProtocol:   "tcp",
		User:              u.User,
		Password:          u.Password,
		ConnectAttributes: attrs,
		MaxConns:          postgresMaxConns,
		MaxIdleConns:      postgresMaxConns,
		MaxConnLifetime:   time.Hour,
	}
}

// preparePostgres makes sure both databases exist and carry the schema
// version this server needs: it creates what is missing and applies the
// schema versions a database lacks, so a first start sets everything up,
// a restart changes nothing, and a newer server migrates an older schema.
func preparePostgres(ctx context.Context, u pgurl.URL, logger log.Logger) error {
	for _, db := range []struct{ name, schema string }{
		{u.Database, postgresSchema},
		{u.VisibilityDatabase(), postgresVisibilitySchema},
	} {
		if err := ensureDatabase(ctx, u, db.name); err != nil {
			return err
		}
		if err := migrate(postgresSQL(u, db.name), db.schema, logger); err != nil {
			return fmt.Errorf("schema of database %s on %s: %w", db.name, u.Addr, err)
		}
	}
	return nil
}

// migrate runs Temporal's own schema tool: its setup step creates the
// version tables when they are missing, and its update step applies every
// embedded schema version newer than the one recorded.
func migrate(cfg *config.SQL, schemaName string, logger log.Logger) error {
	conn, err := toolsql.NewConnection(cfg, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
		return fmt.Errorf("set up version tables: %w", err)
	}
	if err := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: cfg.DatabaseName, SchemaName: schemaName}, logger).Run(); err != nil {
		return fmt.Errorf("apply %s: %w", schemaName, err)
	}
	return nil
}

// ensureDatabase connects to database, creating it first when PostgreSQL
// says it does not exist. Failures say what to fix; the server's own
// connection pool would only report that no connection could be made.
func ensureDatabase(ctx context.Context, u pgurl.URL, database string) error {
	err := ping(ctx, u, database)
	if err == nil {
		return nil
	}
	if sqlState(err) != pgInvalidCatalogName {
		return explain(u, database, err)
	}
	// The visibility database is created from the main one, which exists by
	// then; the main one from the maintenance database every cluster has.
	from := u.Database
	if database == u.Database {
		from = "postgres"
	}
	db, err := sql.Open("postgres", u.ConnString(from))
	if err != nil {
		return explain(u, from, err)
	}
	// The pool served one statement; closing it can only fail on
	// connections that are gone already.
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, `CREATE DATABASE "`+database+`"`)
	switch sqlState(err) {
	case "", pgDuplicateDatabase:
	case pgInsufficientPrivilege:
		return fmt.Errorf("PostgreSQL at %s has no database %s and user %s may not create it: create it (createdb -O %s %s) or grant the user CREATEDB",
			u.Addr, database, u.User, u.User, database)
	default:
		return fmt.Errorf("create database %s: %w", database, explain(u, from, err))
	}
	return explain(u, database, ping(ctx, u, database))
}

func ping(ctx context.Context, u pgurl.URL, database string) error {
	db, err := sql.Open("postgres", u.ConnString(database))
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // as in ensureDatabase
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// explain turns a connection failure into advice; nil stays nil.
func explain(u pgurl.URL, database string, err error) error {
	if err == nil {
		return nil
	}
	var ne net.Error
	switch code := sqlState(err); {
	case code == pgInvalidPassword:
		return fmt.Errorf("PostgreSQL at %s refused user %s: wrong password", u.Addr, u.User)
	case code == pgInvalidAuthorization:
		return fmt.Errorf("PostgreSQL at %s refused user %s for database %s: %w (allow it in pg_hba.conf)", u.Addr, u.User, database, err)
	case code == pgInvalidCatalogName:
		return fmt.Errorf("PostgreSQL at %s has no database %s: %w", u.Addr, database, err)
	case errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cannot reach PostgreSQL at %s: %w", u.Addr, err)
	default:
		return fmt.Errorf("PostgreSQL at %s, database %s: %w", u.Addr, database, err)
	}
}

func sqlState(err error) string {
	var pe *pq.Error
	if errors.As(err, &pe) {
		return string(pe.Code)
	}
	return ""
}

// redactor removes a password from text that might quote a connection
// string: drivers and the server's own pools may put one in an error.
// Only the forms a connection string gives it are replaced, so that a
// password that is also an ordinary word does not blank that word out.
type redactor struct {
	forms []string
}

func newRedactor(password string) *redactor {
	if password == "" {
		return nil
	}
	userinfo := strings.TrimPrefix(url.UserPassword("", password).String(), ":")
	r := &redactor{}
	for _, f := range []string{":" + password + "@", ":" + url.QueryEscape(password) + "@", ":" + userinfo + "@", "password=" + password} {
		if !slices.Contains(r.forms, f) {
			r.forms = append(r.forms, f)
		}
	}
	return r
}

func (r *redactor) redact(s string) string {
	if r == nil {
		return s
	}
	for _, f := range r.forms {
		if strings.Contains(s, f) {
			repl := ":xxxxx@"
			if strings.HasPrefix(f, "password=") {
				repl = "password=xxxxx"
			}
			s = strings.ReplaceAll(s, f, repl)
		}
	}
	return s
}

// redactedError is an error whose text went through a redactor; it wraps
// nothing, so that no caller can reach the original text.
type redactedError string

func (e redactedError) Error() string { return string(e) }

func (r *redactor) error(err error) error {
	if r == nil || err == nil {
		return err
	}
	return redactedError(r.redact(err.Error()))
}
