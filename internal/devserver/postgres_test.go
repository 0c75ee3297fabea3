package devserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	postgresv12 "go.temporal.io/server/schema/postgresql/v12"

	"github.com/transcriber/transcriber/internal/devserver/pgtest"
	"github.com/transcriber/transcriber/internal/devserver/pgurl"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var stateKey = temporal.NewSearchAttributeKeyKeyword("TranscriptionState")

func postgresOptions(t *testing.T, rawURL string, logs *syncBuffer) Options {
	t.Helper()
	u, err := pgurl.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Postgres:  &u,
		Namespace: "default",
		SearchAttributes: map[string]enumspb.IndexedValueType{
			stateKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		},
		// Info, so that the schema tool's and the server's chatter is there
		// to be searched for the password.
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LogLevel: slog.LevelInfo,
	}
}

// schemaState is what the schema tool recorded in one database.
func schemaState(t *testing.T, pg *pgtest.Server, database string) (version string, updates int) {
	t.Helper()
	pg.Query(t, database, fmt.Sprintf("SELECT curr_version FROM schema_version WHERE db_name = '%s'", database), &version)
	pg.Query(t, database, "SELECT count(*) FROM schema_update_history", &updates)
	return version, updates
}

// Scenario: The server sets up its PostgreSQL databases on first start and keeps jobs in them across restarts
func TestPostgresSetUpOnceAndKeptAcrossRestarts(t *testing.T) {
	pg := pgtest.Start(t)
	role := pg.NewRole(t, true)
	// The main database exists, as an operator would create it; the
	// visibility database is left for the server to create.
	db := pg.NewDatabase(t, role)
	logs := &syncBuffer{}
	opts := postgresOptions(t, pg.URL(role, db), logs)

	srv, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop()
		}
	})
	if got := srv.Database(); strings.Contains(got, role.Password) || !strings.HasPrefix(got, "postgres://"+role.Name+"@") {
		t.Errorf("Database() = %q; want the URL without its password", got)
	}
	if dbs := pg.Databases(t); !slices.Contains(dbs, db+"_visibility") {
		t.Errorf("databases = %v; want %s_visibility created", dbs, db)
	}
	for _, d := range []struct{ name, want string }{{db, postgresv12.Version}, {db + "_visibility", postgresv12.VisibilityVersion}} {
		if v, _ := schemaState(t, pg, d.name); v != d.want {
			t.Errorf("schema of %s at version %q; want %q", d.name, v, d.want)
		}
	}
	_, mainUpdates := schemaState(t, pg, db)
	_, visUpdates := schemaState(t, pg, db+"_visibility")

	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sa, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sa.GetCustomAttributes()[stateKey.GetName()]; got != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
		t.Errorf("search attribute %s = %v; want Keyword", stateKey.GetName(), got)
	}
	// No worker polls this queue: the workflow stays open, as a job whose
	// worker is away would.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "kept", TaskQueue: "nobody-polls", TypedSearchAttributes: temporal.NewSearchAttributes(stateKey.ValueSet("accepted")),
	}, "SomeWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true

	srv2, err := Start(opts)
	if err != nil {
		t.Fatalf("restart on the same databases: %v", err)
	}
	t.Cleanup(func() { _ = srv2.Stop() })
	if _, n := schemaState(t, pg, db); n != mainUpdates {
		t.Errorf("restart applied schema updates to %s: %d recorded, %d before", db, n, mainUpdates)
	}
	if _, n := schemaState(t, pg, db+"_visibility"); n != visUpdates {
		t.Errorf("restart applied schema updates to visibility: %d recorded, %d before", n, visUpdates)
	}
	c2, err := client.Dial(client.Options{HostPort: srv2.FrontendAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	d, err := c2.DescribeWorkflowExecution(ctx, "kept", "")
	if err != nil {
		t.Fatalf("the workflow started before the restart: %v", err)
	}
	if got := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); got != run.GetRunID() {
		t.Errorf("run after restart = %s; want %s", got, run.GetRunID())
	}
	for {
		resp, err := c2.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", Query: stateKey.GetName() + ` = "accepted"`,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetExecutions()) == 1 && resp.GetExecutions()[0].GetExecution().GetWorkflowId() == "kept" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("visibility after restart: %v", resp.GetExecutions())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(logs.String(), role.Password) {
		t.Error("the log holds the database password")
	}
}

// Scenario: A PostgreSQL the server cannot use stops start-up with advice and without the password
func TestPostgresStartFailsClearly(t *testing.T) {
	pg := pgtest.Start(t)
	owner := pg.NewRole(t, false)
	owned := pg.NewDatabase(t, owner)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name, url string
		password  string
		want      []string
	}{
		{"wrong password", pg.URL(pgtest.Role{Name: owner.Name, Password: "not-the-password-5e1f"}, owned), "not-the-password-5e1f",
			[]string{"refused user " + owner.Name, "wrong password"}},
		{"no database and no right to create it", pg.URL(owner, "absent"), owner.Password,
			[]string{"no database absent", "may not create it", "createdb -O " + owner.Name + " absent"}},
		{"no right to create the visibility database", pg.URL(owner, owned), owner.Password,
			[]string{"no database " + owned + "_visibility", "createdb -O " + owner.Name + " " + owned + "_visibility"}},
		{"nobody listening", "postgres://" + owner.Name + ":" + owner.Password + "@" + closedAddr + "/" + owned + "?sslmode=disable&connect_timeout=5", owner.Password,
			[]string{"cannot reach PostgreSQL at " + closedAddr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuffer{}
			srv, err := Start(postgresOptions(t, tc.url, logs))
			if err == nil {
				_ = srv.Stop()
				t.Fatal("started; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tc.password) || strings.Contains(logs.String(), tc.password) {
				t.Errorf("the password shows in the error or the log:\n%v\n%s", err, logs.String())
			}
		})
	}
}

func TestRedactor(t *testing.T) {
	r := newRedactor("temporal p@ss")
	for _, in := range []string{
		"dial postgres://u:temporal p@ss@h/db",
		"dial postgres://u:temporal+p%40ss@h/db",
		"dial postgres://u:temporal%20p%40ss@h/db",
		"host=h password=temporal p@ss dbname=x",
	} {
		if out := r.redact(in); strings.Contains(out, "p@ss") || strings.Contains(out, "p%40ss") || !strings.Contains(out, "xxxxx") {
			t.Errorf("redact(%q) = %q", in, out)
		}
	}
	// A password that is also a word leaves the word alone elsewhere.
	if out := newRedactor("temporal").redact("temporal server at postgres://u:temporal@h"); out != "temporal server at postgres://u:xxxxx@h" {
		t.Errorf("redact = %q", out)
	}
	var none *redactor
	if none.redact("a") != "a" || none.error(nil) != nil {
		t.Error("a nil redactor changes things")
	}
}
