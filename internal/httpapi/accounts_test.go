package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/workflows"
)

// Scenario: Accounts come from name:token pairs and bare tokens, and a mistake in them stops start-up with what to fix
func TestParseAccounts(t *testing.T) {
	accs, err := parseAccounts([]string{" alice:ta ", "bob.b@example.org:tb", "bare-token", ""}, []string{"alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		want  Account
	}{
		{"ta", Account{Name: "alice", Admin: true}},
		{"tb", Account{Name: "bob.b@example.org"}},
		{"bare-token", Account{Name: Fingerprint("bare-token")}},
	} {
		if got, ok := accs.find(tc.token); !ok || got != tc.want {
			t.Errorf("find(%q) = %+v, %v; want %+v", tc.token, got, ok, tc.want)
		}
	}
	for _, tok := range []string{"", "t", "tax", "alice:ta", "alice"} {
		if got, ok := accs.find(tok); ok {
			t.Errorf("find(%q) = %+v; want no account", tok, got)
		}
	}
	if fp := Fingerprint("bare-token"); !strings.HasPrefix(fp, "token-") || len(fp) != len("token-")+8 || strings.Contains(fp, "bare") {
		t.Errorf("Fingerprint = %q; want token-<8 hex> that does not show the token", fp)
	}

	bad := []struct {
		name           string
		tokens, admins []string
		// want is what the message must say to be acted on.
		want string
	}{
		{"empty name", []string{":secret"}, nil, "empty name"},
		{"no token", []string{"alice:"}, nil, "has no token"},
		{"same token twice", []string{"alice:s3cr3t-dup", "bob:s3cr3t-dup"}, nil, "the same token"},
		{"admin that is no account", []string{"alice:ta"}, []string{"carol"}, `"carol"`},
		{"bad characters", []string{"al ice:ta"}, nil, "only letters, digits"},
		{"name cli", []string{"cli:ta"}, nil, "command-line"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseAccounts(tc.tokens, tc.admins)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v; want one saying %q", err, tc.want)
			}
			for _, tok := range tc.tokens {
				if _, secret, ok := strings.Cut(tok, ":"); ok && secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the token", err)
				}
			}
		})
	}
}

// accountsHarness serves alice, bob and the admin root.
func accountsHarness(t *testing.T) *harness {
	return newHarness(t, func(o *APIOptions) {
		o.Tokens = []string{"alice:ta", "bob:tb", "root:tr"}
		o.Admins = []string{"root"}
	})
}

func as(tok string, r *http.Request) *http.Request {
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

func uploadAs(t *testing.T, h *harness, tok, key string, body []byte) acceptedBody {
	t.Helper()
	w := h.do(t, as(tok, raw(body, key)))
	if w.Code != http.StatusAccepted {
		t.Fatalf("upload as %s: %d %s; want 202", tok, w.Code, w.Body)
	}
	return decode[acceptedBody](t, w)
}

// Scenario: Another account's job answers 404 on every job endpoint, exactly as a job that does not exist
func TestAnotherAccountsJobIsNotFound(t *testing.T) {
	h := accountsHarness(t)
	id := uploadAs(t, h, "ta", "", ogg).ID
	if st, _ := h.jobs.status(id); st.Owner != "alice" {
		t.Fatalf("owner = %q; want alice", st.Owner)
	}
	h.jobs.set(id, func(j *fakeJob) { j.status.State = job.Dead })

	const missing = "http-000000000000000000000000"
	endpoints := []struct{ method, path string }{
		{http.MethodGet, "/v1/jobs/%s"},
		{http.MethodGet, "/v1/jobs/%s/transcript"},
		{http.MethodPost, "/v1/jobs/%s/revive"},
		{http.MethodDelete, "/v1/jobs/%s"},
	}
	for _, ep := range endpoints {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			req := func(tok, id string) *httptest.ResponseRecorder {
				return h.do(t, as(tok, httptest.NewRequest(ep.method, strings.Replace(ep.path, "%s", id, 1), nil)))
			}
			got := req("tb", id)
			wantError(t, got, http.StatusNotFound, "not_found")
			none := req("tb", missing)
			if want := strings.ReplaceAll(none.Body.String(), missing, id); got.Body.String() != want {
				t.Errorf("body for another's job = %s; want the one of a missing job: %s", got.Body, want)
			}
			if got.Header().Get("X-Should-Retry") != none.Header().Get("X-Should-Retry") {
				t.Errorf("headers differ from a missing job's")
			}
		})
	}
	if len(h.jobs.revived) != 0 {
		t.Errorf("revived %v; want nothing revived by bob", h.jobs.revived)
	}
	if st, _ := h.jobs.status(id); st.State != job.Dead {
		t.Errorf("state = %s; want dead, not cancelled by bob", st.State)
	}

	// The owner and an admin reach it.
	for _, tok := range []string{"ta", "tr"} {
		w := h.do(t, as(tok, httptest.NewRequest(http.MethodGet, "/v1/jobs/"+id, nil)))
		if w.Code != http.StatusOK || decode[jobView](t, w).Owner != "alice" {
			t.Errorf("GET as %s = %d %s; want 200 with owner alice", tok, w.Code, w.Body)
		}
	}
	if w := h.do(t, as("tr", httptest.NewRequest(http.MethodPost, "/v1/jobs/"+id+"/revive", nil))); w.Code != http.StatusAccepted {
		t.Errorf("revive by the admin = %d %s; want 202", w.Code, w.Body)
	}
	// Whose job it is comes from visibility: with no worker to answer for
	// the job, bob still hears of none and alice still cancels it.
	h.jobs.set(id, func(j *fakeJob) { j.unanswered = true })
	wantError(t, h.do(t, as("tb", httptest.NewRequest(http.MethodDelete, "/v1/jobs/"+id, nil))), http.StatusNotFound, "not_found")
	if w := h.do(t, as("ta", httptest.NewRequest(http.MethodDelete, "/v1/jobs/"+id, nil))); w.Code != http.StatusAccepted {
		t.Errorf("cancel by alice = %d %s; want 202", w.Code, w.Body)
	}
}

// Scenario: A job started before jobs had owners is seen by admins only
func TestOwnerlessJobIsAdminsOnly(t *testing.T) {
	h := accountsHarness(t)
	const id = "http-order-7"
	h.jobs.jobs[id] = &fakeJob{status: workflows.Status{JobID: id, State: job.Done}}
	wantError(t, h.do(t, as("ta", httptest.NewRequest(http.MethodGet, "/v1/jobs/"+id, nil))), http.StatusNotFound, "not_found")
	if w := h.do(t, as("tr", httptest.NewRequest(http.MethodGet, "/v1/jobs/"+id, nil))); w.Code != http.StatusOK {
		t.Errorf("GET as admin = %d %s; want 200", w.Code, w.Body)
	}
}

// Scenario: Lists and retry-pending hold the caller's own jobs, and an admin's hold everyone's
func TestListsAreTheCallersOwn(t *testing.T) {
	h := accountsHarness(t)
	mine := uploadAs(t, h, "ta", "", ogg).ID
	theirs := uploadAs(t, h, "tb", "", ogg).ID
	list := func(tok, query string) []string {
		t.Helper()
		w := h.do(t, as(tok, httptest.NewRequest(http.MethodGet, "/v1/jobs"+query, nil)))
		if w.Code != http.StatusOK {
			t.Fatalf("list as %s%s = %d %s", tok, query, w.Code, w.Body)
		}
		var ids []string
		for _, s := range decode[listBody](t, w).Jobs {
			ids = append(ids, s.ID)
		}
		slices.Sort(ids)
		return ids
	}
	both := []string{mine, theirs}
	slices.Sort(both)
	for _, tc := range []struct {
		tok, query string
		want       []string
	}{
		{"ta", "", []string{mine}},
		{"ta", "?owner=alice", []string{mine}},
		{"tb", "", []string{theirs}},
		{"tr", "", both},
		{"tr", "?owner=bob", []string{theirs}},
	} {
		if got := list(tc.tok, tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("list as %s%s = %v; want %v", tc.tok, tc.query, got, tc.want)
		}
	}
	wantError(t, h.do(t, as("ta", httptest.NewRequest(http.MethodGet, "/v1/jobs?owner=bob", nil))), http.StatusForbidden, "forbidden")

	h.jobs.set(mine, func(j *fakeJob) { j.backingOff = "Convert" })
	h.jobs.set(theirs, func(j *fakeJob) { j.backingOff = "Convert" })
	retried := func(tok string) []string {
		t.Helper()
		w := h.do(t, as(tok, httptest.NewRequest(http.MethodPost, "/v1/jobs/retry-pending", nil)))
		var ids []string
		for _, j := range decode[struct{ Jobs []reviveBody }](t, w).Jobs {
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := retried("tb"); !slices.Equal(got, []string{theirs}) || h.jobs.retriedFor != "bob" {
		t.Errorf("bob's retry-pending = %v (owner %q); want only %s", got, h.jobs.retriedFor, theirs)
	}
	if got := retried("tr"); !slices.Equal(got, both) || h.jobs.retriedFor != "" {
		t.Errorf("admin's retry-pending = %v (owner %q); want %v", got, h.jobs.retriedFor, both)
	}
}

// Scenario: Two accounts sending the same Idempotency-Key get two jobs, and each keeps its own deduplication
func TestIdempotencyKeyIsPerAccount(t *testing.T) {
	h := accountsHarness(t)
	a := uploadAs(t, h, "ta", "order-42", ogg)
	b := uploadAs(t, h, "tb", "order-42", ogg)
	if a.ID == b.ID || a.Existing || b.Existing {
		t.Fatalf("alice %+v, bob %+v; want two new jobs", a, b)
	}
	for _, id := range []string{a.ID, b.ID} {
		if !strings.HasPrefix(id, "http-") || strings.Contains(id, "order-42") {
			t.Errorf("id %q; want http-<digest> that does not show the key", id)
		}
	}
	if again := uploadAs(t, h, "ta", "order-42", ogg); again.ID != a.ID || !again.Existing {
		t.Errorf("alice again = %+v; want her job %s, existing", again, a.ID)
	}
	other := append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{9}, 3000)...)
	wantError(t, h.do(t, as("tb", raw(other, "order-42"))), http.StatusConflict, "idempotency_conflict")

	// Without a key the same bytes name one job per account.
	ca, cb := uploadAs(t, h, "ta", "", ogg), uploadAs(t, h, "tb", "", ogg)
	if ca.ID == cb.ID || ca.Existing || cb.Existing {
		t.Errorf("content ids alice %+v, bob %+v; want two new jobs", ca, cb)
	}
	if again := uploadAs(t, h, "tb", "", ogg); again.ID != cb.ID || !again.Existing {
		t.Errorf("bob again = %+v; want his job %s, existing", again, cb.ID)
	}
	var owners []string
	for _, j := range h.jobs.jobs {
		owners = append(owners, j.in.Owner)
	}
	slices.Sort(owners)
	if want := []string{"alice", "alice", "bob", "bob"}; !slices.Equal(owners, want) {
		t.Errorf("owners = %v; want %v", owners, want)
	}
}
