package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/workflows"
)

// Scenario: The embedded store keeps the indexes jobs are listed by, and a list by another column still answers after a restart
func TestEmbeddedStoreIndexes(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "temporal.db")
	start := func() (*devserver.Server, client.Client) {
		t.Helper()
		srv, err := devserver.Start(devserver.Options{DatabaseFile: db, Namespace: "default", SearchAttributes: workflows.SearchAttributes()})
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr()})
		if err != nil {
			_ = srv.Stop()
			t.Fatal(err)
		}
		return srv, c
	}
	// Lists by columns whose indexes are gone: the task queue, the history's
	// length, and the namespace division every default list filters by.
	listed := func(c client.Client, query string) bool {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query})
		return err == nil && len(resp.GetExecutions()) == 1
	}
	queries := []string{
		"TaskQueue = 'nobody-polls'",
		"RootWorkflowId = 'kept' AND TranscriptionState = 'accepted'",
		"TemporalNamespaceDivision IS NULL AND WorkflowId = 'kept'",
	}

	srv, c := start()
	// No worker polls the queue: the job stays as it started.
	if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "kept", TaskQueue: "nobody-polls",
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.StateKey.ValueSet("accepted"))}, workflows.WorkflowName); err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		waitFor(t, "a list by "+q, func() bool { return listed(c, q) })
	}
	c.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility'")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	_ = rows.Close()
	_ = conn.Close()
	for _, want := range []string{"default_idx", "by_workflow_id", "by_status", "by_keyword_01", "by_keyword_10"} {
		if !slices.Contains(names, want) {
			t.Errorf("visibility indexes %v lack %s", names, want)
		}
	}
	for _, gone := range []string{"by_task_queue", "by_history_length", "by_temporal_namespace_division", "by_int_01"} {
		if slices.Contains(names, gone) {
			t.Errorf("visibility indexes %v still have %s", names, gone)
		}
	}

	srv, c = start()
	defer func() { _ = srv.Stop() }()
	defer c.Close()
	for _, q := range queries {
		waitFor(t, "a list by "+q+" after a restart", func() bool { return listed(c, q) })
	}
}

// Scenario: The all-in-one server syncs the log SQLite writes before it answers a start
func TestEmbeddedStoreSyncsItsLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A relative path, as the default data directory is: the log is
	// looked for where SQLite keeps it, whatever the directory later is.
	rel, err := filepath.Rel(mustGetwd(t), filepath.Join(dir, "temporal.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := devserver.Start(devserver.Options{DatabaseFile: rel, Namespace: "default", SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := srv.Syncs()
	if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "synced", TaskQueue: "nobody-polls"}, workflows.WorkflowName); err != nil {
		t.Fatal(err)
	}
	if srv.Syncs() <= before {
		t.Errorf("a start was answered after %d syncs of the log, as many as before it", srv.Syncs())
	}
	st, err := os.Stat(filepath.Join(dir, "temporal.db-wal"))
	if err != nil || st.Size() == 0 {
		t.Errorf("the log the server syncs is not where SQLite writes: %v", err)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
