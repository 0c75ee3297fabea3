package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

// Scenario: Over the API bob can neither see, revive, cancel nor read alice's job, their equal Idempotency-Keys make two jobs, and jobs list --owner alice lists only hers
func TestAccountsOwnTheirJobs(t *testing.T) {
	requireSpeechTools(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_API_TOKENS", "alice:ta,bob:tb,root:tr", "TRANSCRIBER_ADMINS", "root")
	base := "http://" + u.http
	note, err := os.ReadFile(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	post := func(token string) accepted {
		t.Helper()
		c := apiDo(t, http.MethodPost, base+"/v1/jobs?language=en", token, bytes.NewReader(note),
			"Content-Type", "audio/ogg", "Idempotency-Key", "meeting-1")
		if c.status != http.StatusAccepted {
			t.Fatalf("POST /v1/jobs as %s = %d %s; want 202", token, c.status, c.body)
		}
		var a accepted
		c.json(t, &a)
		return a
	}
	hers := post("ta")
	var done jobAnswer
	waitFor(t, "alice's job done", func() bool {
		c := apiDo(t, http.MethodGet, base+"/v1/jobs/"+hers.ID, "ta", nil)
		c.json(t, &done)
		return c.status == http.StatusOK && done.State == "done"
	})

	// Each of these would answer alice otherwise (200, or 409 for a done
	// job that cannot be revived or cancelled); bob hears of no job.
	const missing = "http-000000000000000000000000"
	for _, ep := range []struct{ method, path string }{
		{http.MethodGet, ""},
		{http.MethodGet, "/transcript?format=srt"},
		{http.MethodPost, "/revive"},
		{http.MethodDelete, ""},
	} {
		got := apiDo(t, ep.method, base+"/v1/jobs/"+hers.ID+ep.path, "tb", nil)
		none := apiDo(t, ep.method, base+"/v1/jobs/"+missing+ep.path, "tb", nil)
		if got.status != http.StatusNotFound || got.errorCode(t) != "not_found" ||
			got.body != strings.ReplaceAll(none.body, missing, hers.ID) {
			t.Errorf("bob's %s %s = %d %s; want the 404 of a missing job: %s", ep.method, ep.path, got.status, got.body, none.body)
		}
	}
	if c := apiDo(t, http.MethodGet, base+"/v1/jobs/"+hers.ID+"/transcript", "ta", nil); c.status != http.StatusOK ||
		strings.TrimSpace(c.body) != testaudio.GoForwardText {
		t.Errorf("alice's transcript after bob's tries = %d %q; want %q", c.status, c.body, testaudio.GoForwardText)
	}

	his := post("tb")
	if his.ID == hers.ID || his.Existing {
		t.Fatalf("bob with alice's Idempotency-Key got %+v; want a new job of his own, not %s", his, hers.ID)
	}
	if again := post("ta"); again.ID != hers.ID || !again.Existing {
		t.Errorf("alice again = %+v; want her job %s, existing", again, hers.ID)
	}

	listed := func(token string) []string {
		t.Helper()
		c := apiDo(t, http.MethodGet, base+"/v1/jobs", token, nil)
		var l struct{ Jobs []struct{ ID, Owner string } }
		c.json(t, &l)
		var ids []string
		for _, j := range l.Jobs {
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		return ids
	}
	both := []string{hers.ID, his.ID}
	slices.Sort(both)
	if got := listed("ta"); !slices.Equal(got, []string{hers.ID}) {
		t.Errorf("alice lists %v; want only %s", got, hers.ID)
	}
	if got := listed("tb"); !slices.Equal(got, []string{his.ID}) {
		t.Errorf("bob lists %v; want only %s", got, his.ID)
	}
	if got := listed("tr"); !slices.Equal(got, both) {
		t.Errorf("the admin lists %v; want %v", got, both)
	}
	if c := apiDo(t, http.MethodGet, base+"/v1/jobs/"+his.ID, "tr", nil); c.status != http.StatusOK {
		t.Errorf("the admin's GET of bob's job = %d %s; want 200", c.status, c.body)
	}

	// Scenario: jobs list --owner lists only that owner's jobs, and jobs show names the owner
	t.Run("jobs list --owner", func(t *testing.T) {
		r := runCLI(t, u.client, "jobs", "list", "--owner", "alice")
		if r.code != 0 || !strings.Contains(r.stdout, hers.ID) || strings.Contains(r.stdout, his.ID) {
			t.Errorf("jobs list --owner alice = %d %q; want %s and not %s", r.code, r.stdout, hers.ID, his.ID)
		}
		r = runCLI(t, u.client, "jobs", "list", "--owner", "alice", "--state", "done")
		if r.code != 0 || !strings.Contains(r.stdout, hers.ID) {
			t.Errorf("jobs list --owner alice --state done = %d %q; want %s", r.code, r.stdout, hers.ID)
		}
		// A quote in an owner is a value, not a way out of the query.
		r = runCLI(t, u.client, "jobs", "list", "--owner", "x' OR TranscriptionOwner = 'alice")
		if r.code != 0 || strings.Contains(r.stdout, hers.ID) {
			t.Errorf("jobs list with a quoted owner = %d %q %s; want no job", r.code, r.stdout, r.stderr)
		}
		if got := showField(runCLI(t, u.client, "jobs", "show", hers.ID).stdout, "owner"); got != "alice" {
			t.Errorf("jobs show says owner %q; want alice", got)
		}
	})
}

// Scenario: A data dir made before owners gains the owner attribute and takes owned jobs as soon as it is ready
func TestDataDirBeforeOwnersTakesOwnedJobs(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	dataDir := t.TempDir()
	old := workflows.SearchAttributes()
	delete(old, workflows.OwnerKey.GetName())
	srv, err := devserver.Start(devserver.Options{Namespace: "default", SearchAttributes: old,
		DatabaseFile: filepath.Join(dataDir, "temporal.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	u := startUp(t, dataDir, "TRANSCRIBER_API_TOKENS", "alice:ta")
	note, err := os.ReadFile(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	c := apiDo(t, http.MethodPost, "http://"+u.http+"/v1/jobs?language=en", "ta", bytes.NewReader(note), "Content-Type", "audio/ogg")
	if c.status != http.StatusAccepted {
		t.Fatalf("the first upload once ready = %d %s; want 202", c.status, c.body)
	}
	var a accepted
	c.json(t, &a)
	waitFor(t, "the job done", func() bool {
		var j jobAnswer
		c := apiDo(t, http.MethodGet, "http://"+u.http+"/v1/jobs/"+a.ID, "ta", nil)
		c.json(t, &j)
		return c.status == http.StatusOK && j.State == "done"
	})
	if r := runCLI(t, u.client, "jobs", "list", "--owner", "alice"); r.code != 0 || !strings.Contains(r.stdout, a.ID) {
		t.Errorf("jobs list --owner alice = %d %q %s; want %s", r.code, r.stdout, r.stderr, a.ID)
	}
}
