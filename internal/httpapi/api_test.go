package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

// fakeJobs keeps jobs in memory the way the Temporal-backed service
// answers: ids tied to a content hash, statuses the test sets.
type fakeJobs struct {
	mu      sync.Mutex
	jobs    map[string]*fakeJob
	listed  jobctl.Filter
	revived []string
	// retriedFor is the owner the last RetryPending was asked for.
	retriedFor string
}

type fakeJob struct {
	hash   string
	in     workflows.Input
	status workflows.Status
	closed bool
	// backingOff names a step that waits out a back-off.
	backingOff string
	// unanswered makes Get fail as a status query does while no worker
	// runs.
	unanswered bool
}

var _ Jobs = (*fakeJobs)(nil)

func newFakeJobs() *fakeJobs { return &fakeJobs{jobs: map[string]*fakeJob{}} }

func (f *fakeJobs) Lookup(_ context.Context, id string) (jobctl.Existing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return jobctl.Existing{}, jobctl.ErrNotFound
	}
	return jobctl.Existing{ContentSHA256: j.hash, Closed: j.closed, Rerunnable: j.closed && j.status.State == job.Cancelled, Owner: j.status.Owner}, nil
}

func (f *fakeJobs) Start(_ context.Context, req jobctl.StartRequest) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j, ok := f.jobs[req.ID]; ok && !(req.Policy == jobctl.OnePerIDUnlessCancelled && j.closed && j.status.State == job.Cancelled) {
		if j.hash != req.ContentSHA256 {
			return false, jobctl.ErrConflict
		}
		return true, nil
	}
	f.jobs[req.ID] = &fakeJob{hash: req.ContentSHA256, in: req.Input, status: workflows.Status{
		JobID: req.ID, State: job.Accepted, Source: req.Input.Source, Engine: req.Input.Engine,
		Original: req.Input.Original, AcceptedAt: req.Input.AcceptedAt, Owner: req.Input.Owner,
	}}
	return false, nil
}

func (f *fakeJobs) status(id string) (workflows.Status, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return workflows.Status{}, false
	}
	return j.status, true
}

func (f *fakeJobs) set(id string, change func(*fakeJob)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.jobs[id])
}

func (f *fakeJobs) Get(_ context.Context, id string) (workflows.Status, []jobctl.Pending, error) {
	st, ok := f.status(id)
	if !ok {
		return st, nil, jobctl.ErrNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.jobs[id].unanswered {
		return workflows.Status{}, nil, context.DeadlineExceeded
	}
	return st, nil, nil
}

func (f *fakeJobs) Await(ctx context.Context, id string, _ func(error)) (workflows.Status, error) {
	for {
		st, ok := f.status(id)
		if !ok {
			return st, jobctl.ErrNotFound
		}
		if st.State.Settled() {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *fakeJobs) List(_ context.Context, filter jobctl.Filter, _ int, _ []byte) ([]jobctl.Summary, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed = filter
	var out []jobctl.Summary
	for id, j := range f.jobs {
		if (filter.State == "" || j.status.State == filter.State) && (filter.Owner == "" || j.status.Owner == filter.Owner) {
			out = append(out, jobctl.Summary{ID: id, State: j.status.State, Owner: j.status.Owner})
		}
	}
	return out, nil, nil
}

func (f *fakeJobs) Revive(_ context.Context, id string) (jobctl.Revival, error) {
	st, ok := f.status(id)
	if !ok {
		return jobctl.Revival{}, jobctl.ErrNotFound
	}
	if st.State != job.Failed && st.State != job.Dead {
		return jobctl.Revival{Status: st}, &jobctl.NotRevivableError{ID: id, State: st.State}
	}
	f.mu.Lock()
	f.revived = append(f.revived, id)
	f.mu.Unlock()
	r := jobctl.Revival{Status: st, ResumesAt: st.State}
	if st.Failure != nil {
		r.ResumesAt = st.Failure.Step
	}
	return r, nil
}

func (f *fakeJobs) RetryPending(_ context.Context, owner string) ([]jobctl.Revival, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retriedFor = owner
	var out []jobctl.Revival
	for id, j := range f.jobs {
		if j.backingOff != "" && (owner == "" || j.status.Owner == owner) {
			out = append(out, jobctl.Revival{Status: j.status, Retried: []jobctl.Pending{{ID: "5", Activity: j.backingOff, Attempt: 2}}})
			f.revived = append(f.revived, id)
		}
	}
	return out, nil
}

func (f *fakeJobs) Cancel(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	switch {
	case !ok:
		return jobctl.ErrNotFound
	case j.closed:
		return jobctl.ErrClosed
	}
	j.status.State, j.closed = job.Cancelled, true
	return nil
}

const token = "tok-0123456789abcdef"

type harness struct {
	h     http.Handler
	api   *API
	jobs  *fakeJobs
	blobs *blob.Local
	logs  *bytes.Buffer
}

func newHarness(t *testing.T, modify ...func(*APIOptions)) *harness {
	t.Helper()
	blobs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	opts := APIOptions{
		Tokens:         []string{"other-token", token},
		Jobs:           newFakeJobs(),
		Blobs:          blobs,
		SpoolDir:       t.TempDir(),
		MaxUploadBytes: 1 << 20,
		Wait:           2 * time.Second,
		Engines:        []string{"local", "openai"},
		Engine: func(requested, language string) (string, string) {
			if requested != "" {
				return requested, ""
			}
			return "local", ""
		},
		Policy:   workflows.DefaultPolicy(),
		Webhooks: true,
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range modify {
		m(&opts)
	}
	api, err := NewAPI(opts)
	if err != nil {
		t.Fatal(err)
	}
	fj, _ := opts.Jobs.(*fakeJobs)
	return &harness{h: NewHandler(Options{Gatherer: prometheus.NewRegistry(), API: api}), api: api, jobs: fj, blobs: blobs, logs: logs}
}

// ogg is the start of an OGG stream: enough for the sniffing, not for
// ffprobe, which these tests do not reach.
var ogg = append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{7}, 4000)...)

func (h *harness) do(t *testing.T, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, r)
	return w
}

func authed(r *http.Request) *http.Request {
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

func raw(body []byte, key string) *http.Request {
	r := authed(httptest.NewRequest(http.MethodPost, "/v1/jobs", bytes.NewReader(body)))
	r.Header.Set("Content-Type", "audio/ogg")
	if key != "" {
		r.Header.Set(IdempotencyHeader, key)
	}
	return r
}

type formFile struct {
	name, contentType string
	body              []byte
}

func form(t testing.TB, path string, file *formFile, fields map[string]string) *http.Request {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	if file != nil {
		hdr := textproto.MIMEHeader{}
		hdr.Set("Content-Disposition", `form-data; name="file"; filename="`+file.name+`"`)
		if file.contentType != "" {
			hdr.Set("Content-Type", file.contentType)
		}
		pw, err := mw.CreatePart(hdr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write(file.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	r := authed(httptest.NewRequest(http.MethodPost, path, &b))
	r.Header.Set("Content-Type", mw.FormDataContentType())
	return r
}

func decode[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("body %q: %v; want JSON", w.Body.String(), err)
	}
	return v
}

// wantError checks the status and the {"error":{"code","message"}} body.
func wantError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) errorDetail {
	t.Helper()
	if w.Code != status {
		t.Errorf("status = %d; want %d (body %s)", w.Code, status, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", ct)
	}
	e := decode[errorBody](t, w).Error
	if e.Code != code || e.Message == "" {
		t.Errorf("error = %+v; want code %q and a message", e, code)
	}
	return e
}

// Scenario: Without API tokens the job endpoints are off and say how to turn them on
func TestJobEndpointsOffWithoutTokens(t *testing.T) {
	h := newHarness(t, func(o *APIOptions) { o.Tokens = nil })
	for _, r := range []*http.Request{
		raw(ogg, ""),
		authed(httptest.NewRequest(http.MethodGet, "/v1/jobs/x", nil)),
		form(t, "/v1/audio/transcriptions", &formFile{name: "a.ogg", body: ogg}, map[string]string{"model": "whisper-1"}),
	} {
		e := wantError(t, h.do(t, r), http.StatusServiceUnavailable, "api_disabled")
		if !strings.Contains(e.Message, "TRANSCRIBER_API_TOKENS") {
			t.Errorf("message %q does not say how to enable the API", e.Message)
		}
	}
	if w := h.do(t, httptest.NewRequest(http.MethodGet, "/healthz", nil)); w.Code != http.StatusOK {
		t.Errorf("/healthz = %d; want 200", w.Code)
	}
	if w := h.do(t, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil)); w.Code != http.StatusOK {
		t.Errorf("/v1/openapi.json = %d; want 200", w.Code)
	}
}

func TestAuthentication(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name, header, challenge string
		want                    int
	}{
		{"no header", "", `Bearer realm="transcriber"`, http.StatusUnauthorized},
		{"wrong token", "Bearer nope", `Bearer realm="transcriber", error="invalid_token"`, http.StatusUnauthorized},
		{"token as prefix", "Bearer " + token[:len(token)-1], `Bearer realm="transcriber", error="invalid_token"`, http.StatusUnauthorized},
		{"basic scheme", "Basic " + token, `Bearer realm="transcriber", error="invalid_token"`, http.StatusUnauthorized},
		{"right token", "Bearer " + token, "", http.StatusOK},
		{"scheme in lower case", "bearer " + token, "", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			w := h.do(t, r)
			if tc.want == http.StatusUnauthorized {
				wantError(t, w, http.StatusUnauthorized, "unauthorized")
			} else if w.Code != tc.want {
				t.Errorf("status = %d; want %d", w.Code, tc.want)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate = %q; want %q", got, tc.challenge)
			}
		})
	}
	if strings.Contains(h.logs.String(), token) || strings.Contains(h.logs.String(), "other-token") {
		t.Errorf("the log holds a token:\n%s", h.logs)
	}
}

func TestCreateJobIdempotency(t *testing.T) {
	h := newHarness(t)
	other := append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{9}, 3000)...)

	w := h.do(t, raw(ogg, "order-42"))
	if w.Code != http.StatusAccepted {
		t.Fatalf("status = %d; want 202 (%s)", w.Code, w.Body)
	}
	first := decode[acceptedBody](t, w)
	keyID := workflows.HTTPJobID(Fingerprint(token), "order-42")
	if first.ID != keyID || first.Existing || first.State != job.Accepted ||
		first.Links["self"] != "/v1/jobs/"+keyID || first.Links["transcript"] != "/v1/jobs/"+keyID+"/transcript" {
		t.Errorf("answer = %+v", first)
	}
	if loc := w.Header().Get("Location"); loc != "/v1/jobs/"+keyID {
		t.Errorf("Location = %q", loc)
	}
	fj := h.jobs.jobs[keyID]
	sum := sha256.Sum256(ogg)
	if fj.hash != hex.EncodeToString(sum[:]) || fj.in.Source != job.SourceHTTP || fj.in.Original.Size != int64(len(ogg)) ||
		fj.in.Original.MIME != "audio/ogg" || fj.in.Engine != "local" || fj.in.Policy.MaxAttempts != job.DefaultMaxAttempts || fj.in.Owner != Fingerprint(token) {
		t.Errorf("started job = %+v, hash %s", fj.in, fj.hash)
	}
	stored, err := h.blobs.Open(context.Background(), fj.in.Original.Key)
	if err != nil {
		t.Fatalf("recording not stored before the answer: %v", err)
	}
	got, _ := io.ReadAll(stored)
	stored.Close()
	if !bytes.Equal(got, ogg) {
		t.Errorf("stored %d bytes; want the %d uploaded", len(got), len(ogg))
	}

	again := h.do(t, raw(ogg, "order-42"))
	if again.Code != http.StatusAccepted || decode[acceptedBody](t, again).ID != keyID || !decode[acceptedBody](t, again).Existing {
		t.Errorf("same key, same bytes: %d %s; want 202 with the same id, existing", again.Code, again.Body)
	}
	wantError(t, h.do(t, raw(other, "order-42")), http.StatusConflict, "idempotency_conflict")
	// Scenario: An upload that names a job of other bytes, or one whose recordings are gone, leaves no recording behind
	t.Run("no recording for no job", func(t *testing.T) {
		originals := func() []string {
			t.Helper()
			entries, err := os.ReadDir(filepath.Join(h.blobs.Root(), filepath.FromSlash(blob.JobKey(keyID, ""))))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			return names
		}
		if got := originals(); len(got) != 1 || "jobs/"+keyID+"/"+got[0] != fj.in.Original.Key {
			t.Errorf("recordings after the conflict = %v; want only the job's own %s", got, fj.in.Original.Key)
		}
		// The job closed and its retention removed its recordings: the same
		// key and bytes find it, and store nothing that no job would remove.
		h.jobs.set(keyID, func(j *fakeJob) { j.closed, j.status.State = true, job.Done })
		if err := h.blobs.Delete(context.Background(), fj.in.Original.Key); err != nil {
			t.Fatal(err)
		}
		if again := decode[acceptedBody](t, h.do(t, raw(ogg, "order-42"))); again.ID != keyID || !again.Existing {
			t.Errorf("same key after retention = %+v; want the job, existing", again)
		}
		if got := originals(); len(got) != 0 {
			t.Errorf("recordings after a repeat of a job whose recordings were removed = %v; want none", got)
		}
	})

	// Without a key the bytes, engine and language name the job.
	a := decode[acceptedBody](t, h.do(t, raw(ogg, "")))
	b := decode[acceptedBody](t, h.do(t, raw(ogg, "")))
	c := decode[acceptedBody](t, h.do(t, raw(other, "")))
	if want := workflows.HTTPContentJobID(Fingerprint(token), sum[:], "local", ""); a.ID != want || b.ID != want || !b.Existing {
		t.Errorf("content ids %q, %q (existing %v); want %q twice", a.ID, b.ID, b.Existing, want)
	}
	if c.ID == a.ID {
		t.Errorf("other bytes got the same job %s", c.ID)
	}
	// A cancelled job of the same bytes may be sent again.
	h.jobs.set(a.ID, func(j *fakeJob) { j.closed, j.status.State = true, job.Cancelled })
	if d := decode[acceptedBody](t, h.do(t, raw(ogg, ""))); d.ID != a.ID || d.Existing {
		t.Errorf("after cancel: %+v; want the same id started afresh", d)
	}
}

func TestCreateJobFields(t *testing.T) {
	h := newHarness(t)
	r := form(t, "/v1/jobs?language=de", &formFile{name: "memo.ogg", body: ogg},
		map[string]string{"language": "en", "engine": "openai", "callback_url": "https://example.com/hook?k=1"})
	w := h.do(t, r)
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	in := h.jobs.jobs[decode[acceptedBody](t, w).ID].in
	if in.Language != "en" || in.Engine != "openai" || in.WebhookURL != "https://example.com/hook?k=1" || in.Original.Name != "memo.ogg" {
		t.Errorf("input = %+v; want the form's fields over the query's", in)
	}
	if strings.Contains(h.logs.String(), "example.com") {
		t.Errorf("the log holds the webhook URL:\n%s", h.logs)
	}
	// webhook_url is the field's name now; callback_url, its first one,
	// still works (above) and gives way when both are sent.
	r = form(t, "/v1/jobs", &formFile{name: "other.ogg", body: append([]byte("x"), ogg...)},
		map[string]string{"webhook_url": "https://example.com/new", "callback_url": "https://example.com/old"})
	if in := h.jobs.jobs[decode[acceptedBody](t, h.do(t, r)).ID].in; in.WebhookURL != "https://example.com/new" {
		t.Errorf("webhook URL = %q; want webhook_url's over callback_url's", in.WebhookURL)
	}

	r = raw(ogg, "")
	r.URL.RawQuery = "language=ru&filename=voice.ogg"
	w = h.do(t, r)
	if in := h.jobs.jobs[decode[acceptedBody](t, w).ID].in; in.Language != "ru" || in.Original.Name != "voice.ogg" {
		t.Errorf("raw upload input = %+v; want language and name from the query", in)
	}
}

func TestBadRequests(t *testing.T) {
	noSecret := newHarness(t, func(o *APIOptions) { o.Webhooks = false })
	h := newHarness(t)
	bigRaw := bytes.Repeat([]byte("OggS"), (1<<20)/4+1)
	chunked := raw(bigRaw, "")
	chunked.ContentLength = -1
	tests := []struct {
		name   string
		h      *harness
		r      *http.Request
		status int
		code   string
	}{
		{"empty raw body", h, raw(nil, ""), 400, "empty_audio"},
		{"empty file field", h, form(t, "/v1/jobs", &formFile{name: "a.ogg"}, nil), 400, "empty_audio"},
		{"no file field", h, form(t, "/v1/jobs", nil, map[string]string{"language": "en"}), 400, "missing_file"},
		{"over the limit, announced", h, raw(bigRaw, ""), 413, "too_large"},
		{"over the limit, chunked", h, chunked, 413, "too_large"},
		{"over the limit, multipart", h, form(t, "/v1/jobs", &formFile{name: "a.ogg", body: bigRaw}, nil), 413, "too_large"},
		{"text", h, form(t, "/v1/jobs", &formFile{name: "song.mp3", body: []byte("Dear diary, no audio today.\n")}, nil), 415, "unsupported_format"},
		{"png", h, raw([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), ""), 415, "unsupported_format"},
		{"declared image", h, form(t, "/v1/jobs", &formFile{name: "x", contentType: "image/jpeg", body: []byte{0, 1, 2, 3, 200, 201}}, nil), 415, "unsupported_format"},
		{"bad key", h, raw(ogg, "../../etc"), 400, "invalid_idempotency_key"},
		{"bad language", h, form(t, "/v1/jobs", &formFile{name: "a.ogg", body: ogg}, map[string]string{"language": "english please"}), 400, "invalid_language"},
		{"unknown engine", h, form(t, "/v1/jobs?engine=whisperx", &formFile{name: "a.ogg", body: ogg}, nil), 400, "invalid_engine"},
		{"webhook not http", h, form(t, "/v1/jobs", &formFile{name: "a.ogg", body: ogg}, map[string]string{"webhook_url": "file:///etc/passwd"}), 400, "invalid_callback_url"},
		{"webhook by its first name, not http", h, form(t, "/v1/jobs", &formFile{name: "a.ogg", body: ogg}, map[string]string{"callback_url": "file:///etc/passwd"}), 400, "invalid_callback_url"},
		{"webhook in the query, not http", h, form(t, "/v1/jobs?webhook_url=ftp://x/", &formFile{name: "a.ogg", body: ogg}, nil), 400, "invalid_callback_url"},
		{"webhook without secret", noSecret, form(t, "/v1/jobs", &formFile{name: "a.ogg", body: ogg}, map[string]string{"webhook_url": "https://example.com/"}), 400, "callbacks_disabled"},
		{"two files", h, twoFiles(t), 400, "invalid_request"},
		{"webhook to cloud metadata", h, form(t, "/v1/jobs?callback_url=http://169.254.169.254/latest/meta-data", &formFile{name: "a.ogg", body: ogg}, nil), 400, "invalid_callback_url"},
		{"webhook to this machine", h, form(t, "/v1/jobs", &formFile{name: "a.ogg", body: ogg}, map[string]string{"webhook_url": "http://127.0.0.1:9/x"}), 400, "invalid_callback_url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, tc.h.do(t, tc.r), tc.status, tc.code)
			if n := len(tc.h.jobs.jobs); n != 0 {
				t.Errorf("%d jobs started; want none", n)
			}
		})
	}
	// Scenario: A webhook URL of cloud metadata is refused with a 400 that says why
	t.Run("the refusal says why", func(t *testing.T) {
		w := h.do(t, form(t, "/v1/jobs?callback_url=http://169.254.169.254/latest/meta-data", &formFile{name: "a.ogg", body: ogg}, nil))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "169.254.169.254 is link-local, where clouds serve instance metadata") {
			t.Errorf("answer = %d %s", w.Code, w.Body)
		}
	})
	for _, dir := range []string{h.api.opts.SpoolDir, noSecret.api.opts.SpoolDir} {
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("spool dir keeps %d files; want none", len(left))
		}
	}
}

func twoFiles(t *testing.T) *http.Request {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for range 2 {
		fw, err := mw.CreateFormFile("file", "a.ogg")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(ogg); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	r := authed(httptest.NewRequest(http.MethodPost, "/v1/jobs", &b))
	r.Header.Set("Content-Type", mw.FormDataContentType())
	return r
}

// Scenario: Hostile file names are kept harmless
func TestHostileFileNames(t *testing.T) {
	h := newHarness(t)
	for _, name := range []string{"../../../etc/passwd", `..\..\windows\system32\x.ogg`, "\u202egpj.exe.ogg", "tab\there.ogg", "name; filename=other.ogg", strings.Repeat("é", 400) + ".ogg"} {
		t.Run(name[:min(len(name), 20)], func(t *testing.T) {
			body := append(append([]byte{}, ogg...), name...) // distinct bytes, distinct jobs
			w := h.do(t, form(t, "/v1/jobs", &formFile{name: name, body: body}, nil))
			if w.Code != http.StatusAccepted {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			in := h.jobs.jobs[decode[acceptedBody](t, w).ID].in
			if strings.ContainsAny(in.Original.Name, "/\\\r\n\t\x00\u202e") || len(in.Original.Name) > 255 {
				t.Errorf("kept name %q", in.Original.Name)
			}
			if !blob.ValidKey(in.Original.Key) || !strings.HasPrefix(in.Original.Key, "jobs/http-") || !strings.HasSuffix(in.Original.Key, ".ogg") {
				t.Errorf("stored under %q", in.Original.Key)
			}
		})
	}
}

func TestSniff(t *testing.T) {
	tests := []struct {
		name, declared string
		head           []byte
		wantMIME       string
		refused        bool
	}{
		{"ogg", "", []byte("OggS\x00\x02rest"), "audio/ogg", false},
		{"wav", "", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), "audio/wav", false},
		{"flac", "", []byte("fLaC\x00\x00\x00\x22"), "audio/flac", false},
		{"mp3 id3", "", []byte("ID3\x04\x00\x00"), "audio/mpeg", false},
		{"mp3 frame", "", []byte{0xff, 0xfb, 0x90, 0x64}, "audio/mpeg", false},
		{"aac adts", "", []byte{0xff, 0xf1, 0x50, 0x80}, "audio/aac", false},
		{"m4a", "", []byte("\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00"), "audio/mp4", false},
		{"mp4", "", []byte("\x00\x00\x00\x18ftypisom\x00\x00"), "video/mp4", false},
		{"webm", "", []byte("\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm"), "video/webm", false},
		{"amr", "", []byte("#!AMR\n"), "audio/amr", false},
		{"unknown binary, undeclared", "", []byte{0, 1, 2, 3, 250}, "application/octet-stream", false},
		{"unknown binary, declared audio", "audio/x-custom", []byte{0, 1, 2, 3, 250}, "audio/x-custom", false},
		{"unknown binary, declared json", "application/json", []byte{0, 1, 2, 3, 250}, "", true},
		{"text declared audio", "audio/mpeg", []byte("just words, no sound at all"), "", true},
		{"html", "", []byte("<!DOCTYPE html><html>"), "", true},
		{"pdf", "", []byte("%PDF-1.7\n"), "", true},
		{"zip", "", []byte("PK\x03\x04\x14\x00"), "", true},
		{"gif", "", []byte("GIF89a"), "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := sniff(tc.head, tc.declared)
			if (err != nil) != tc.refused {
				t.Fatalf("sniff refused = %v (%v); want %v", err != nil, err, tc.refused)
			}
			if err != nil {
				if err.status != http.StatusUnsupportedMediaType {
					t.Errorf("status = %d; want 415", err.status)
				}
				return
			}
			if k.mime != tc.wantMIME {
				t.Errorf("mime = %q; want %q", k.mime, tc.wantMIME)
			}
		})
	}
}

// done makes the job done with a stored transcript.
func (h *harness) done(t *testing.T, id string) {
	t.Helper()
	doc := transcript.Document{Engine: "local", Language: "en", Duration: 2790 * time.Millisecond, Text: "go forward ten meters",
		Segments: []transcript.Segment{{Start: 0.3, End: 1.2, Text: "go forward"}, {Start: 1.3, End: 2.5, Text: "ten meters"}}}
	b, _ := json.Marshal(doc)
	key := blob.JobKey(id, "transcript.json")
	if _, err := h.blobs.Put(context.Background(), key, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	h.jobs.set(id, func(j *fakeJob) {
		j.status.State, j.status.TranscriptKey, j.status.FinishedAt = job.Done, key, time.Now()
	})
}

func TestJobAndTranscript(t *testing.T) {
	h := newHarness(t)
	id := decode[acceptedBody](t, h.do(t, raw(ogg, "k1"))).ID
	get := func(path string) *httptest.ResponseRecorder {
		return h.do(t, authed(httptest.NewRequest(http.MethodGet, path, nil)))
	}
	v := decode[jobView](t, get("/v1/jobs/"+id))
	if v.ID != id || v.State != job.Accepted || v.Step != job.Accepted || v.Progress != 0 || v.Source != job.SourceHTTP ||
		v.Original == nil || v.Original.Size != int64(len(ogg)) || v.Links["transcript"] == "" {
		t.Errorf("job = %+v", v)
	}
	wantError(t, get("/v1/jobs/"+id+"/transcript?format=srt"), http.StatusConflict, "not_ready")
	wantError(t, get("/v1/jobs/nope"), http.StatusNotFound, "not_found")
	wantError(t, get("/v1/jobs/"+id+"/transcript?format=doc"), http.StatusBadRequest, "invalid_format")

	h.done(t, id)
	if v := decode[jobView](t, get("/v1/jobs/"+id)); v.State != job.Done || v.Progress != 1 || v.Step != "" || v.Timings.FinishedAt.IsZero() {
		t.Errorf("done job = %+v", v)
	}
	for format, want := range map[string]string{
		"":     "go forward ten meters\n",
		"txt":  "go forward ten meters\n",
		"srt":  "1\n00:00:00,300 --> 00:00:01,200\ngo forward\n\n2\n00:00:01,300 --> 00:00:02,500\nten meters\n\n",
		"vtt":  "WEBVTT\n\n00:00:00.300 --> 00:00:01.200\ngo forward\n\n",
		"json": `"text": "go forward ten meters"`,
	} {
		w := get("/v1/jobs/" + id + "/transcript?format=" + format)
		if w.Code != 200 || !strings.Contains(w.Body.String(), want) {
			t.Errorf("format %q: %d %q; want %q", format, w.Code, w.Body, want)
		}
	}
	// The json rendering has the duration in seconds, as its segments and
	// the OpenAPI document have it.
	if got := decode[map[string]any](t, get("/v1/jobs/"+id+"/transcript?format=json"))["duration"]; got != 2.79 {
		t.Errorf("json duration = %v; want 2.79 (seconds)", got)
	}
}

// Scenario: The job view shows the engine's error code and raw answer key
func TestFailedJobView(t *testing.T) {
	h := newHarness(t)
	id := decode[acceptedBody](t, h.do(t, raw(ogg, "k2"))).ID
	at := time.Now()
	h.jobs.set(id, func(j *fakeJob) {
		j.status.State = job.Dead
		j.status.Failure = &job.Failure{Kind: job.ServiceError, Step: job.Transcribing, Message: "503 from the engine", Attempts: 5, At: at,
			Code: "UNAVAILABLE", RawKey: "jobs/j/raw-error-speechkit.json"}
	})
	v := decode[jobView](t, h.do(t, authed(httptest.NewRequest(http.MethodGet, "/v1/jobs/"+id, nil))))
	if v.State != job.Dead || v.Step != job.Transcribing || v.Attempts != 5 || v.Failure == nil ||
		v.Failure.Kind != job.ServiceError || v.Failure.Message != "503 from the engine" || v.Progress != progressOf[job.Transcribing] {
		t.Errorf("dead job = %+v (failure %+v)", v, v.Failure)
	}
	if v.Failure != nil && (v.Failure.Code != "UNAVAILABLE" || v.Failure.RawKey != "jobs/j/raw-error-speechkit.json") {
		t.Errorf("failure code %q, raw key %q; want the engine's code and the raw answer's key", v.Failure.Code, v.Failure.RawKey)
	}
}

func TestListReviveCancel(t *testing.T) {
	h := newHarness(t)
	id := decode[acceptedBody](t, h.do(t, raw(ogg, "k3"))).ID
	req := func(method, path string) *httptest.ResponseRecorder {
		return h.do(t, authed(httptest.NewRequest(method, path, nil)))
	}
	wantError(t, req(http.MethodGet, "/v1/jobs?state=sleeping"), http.StatusBadRequest, "invalid_state")
	wantError(t, req(http.MethodGet, "/v1/jobs?limit=0"), http.StatusBadRequest, "invalid_limit")
	if l := decode[listBody](t, req(http.MethodGet, "/v1/jobs?state=dead")); len(l.Jobs) != 0 || h.jobs.listed.State != job.Dead {
		t.Errorf("dead list = %+v (asked for %q)", l, h.jobs.listed)
	}

	wantError(t, req(http.MethodPost, "/v1/jobs/"+id+"/revive"), http.StatusConflict, "not_revivable")
	h.jobs.set(id, func(j *fakeJob) {
		j.status.State, j.status.Failure = job.Dead, &job.Failure{Kind: job.ServiceError, Step: job.Transcribing}
	})
	if l := decode[listBody](t, req(http.MethodGet, "/v1/jobs?state=dead")); len(l.Jobs) != 1 || l.Jobs[0].ID != id {
		t.Errorf("dead list = %+v; want %s", l, id)
	}
	w := req(http.MethodPost, "/v1/jobs/"+id+"/revive")
	if rb := decode[reviveBody](t, w); w.Code != http.StatusAccepted || rb.Was != job.Dead || rb.ResumesAt != job.Transcribing || len(h.jobs.revived) != 1 {
		t.Errorf("revive = %d %+v", w.Code, rb)
	}
	wantError(t, req(http.MethodPost, "/v1/jobs/nope/revive"), http.StatusNotFound, "not_found")

	type pendingBody struct {
		Jobs []reviveBody `json:"jobs"`
	}
	if p := decode[pendingBody](t, req(http.MethodPost, "/v1/jobs/retry-pending")); p.Jobs == nil || len(p.Jobs) != 0 {
		t.Errorf("retry-pending with nothing waiting = %+v; want an empty list", p)
	}
	h.jobs.set(id, func(j *fakeJob) { j.status.State, j.backingOff = job.Transcribing, "Recognize" })
	w = req(http.MethodPost, "/v1/jobs/retry-pending")
	if p := decode[pendingBody](t, w); w.Code != http.StatusOK || len(p.Jobs) != 1 || p.Jobs[0].ID != id ||
		len(p.Jobs[0].Retried) != 1 || p.Jobs[0].Retried[0] != (retriedStep{Step: "Recognize", FailedAttempts: 1}) {
		t.Errorf("retry-pending = %d %s", w.Code, w.Body)
	}

	if w := req(http.MethodDelete, "/v1/jobs/"+id); w.Code != http.StatusAccepted {
		t.Errorf("cancel = %d %s", w.Code, w.Body)
	}
	wantError(t, req(http.MethodDelete, "/v1/jobs/"+id), http.StatusConflict, "closed")
	wantError(t, req(http.MethodDelete, "/v1/jobs/nope"), http.StatusNotFound, "not_found")
}

func TestRouterErrorsAreJSON(t *testing.T) {
	h := newHarness(t)
	w := h.do(t, authed(httptest.NewRequest(http.MethodPut, "/v1/jobs", nil)))
	wantError(t, w, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := w.Header().Get("Allow"); !strings.Contains(allow, "POST") || !strings.Contains(allow, "GET") {
		t.Errorf("Allow = %q", allow)
	}
	wantError(t, h.do(t, authed(httptest.NewRequest(http.MethodGet, "/v1/nothing", nil))), http.StatusNotFound, "not_found")
	// Health keeps its plain answers.
	if w := h.do(t, httptest.NewRequest(http.MethodPost, "/healthz", nil)); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d", w.Code)
	}
}

func TestDrainEndsWaits(t *testing.T) {
	h := newHarness(t, func(o *APIOptions) { o.Wait = time.Minute })
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		done <- h.do(t, form(t, "/v1/audio/transcriptions", &formFile{name: "a.ogg", body: ogg}, map[string]string{"model": "whisper-1"}))
	}()
	// Wait until the job exists, then shut down.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h.jobs.mu.Lock()
		n := len(h.jobs.jobs)
		h.jobs.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no job started")
		}
	}
	h.api.Drain()
	select {
	case w := <-done:
		if w.Code != http.StatusAccepted || decode[acceptedBody](t, w).ID == "" {
			t.Errorf("drained wait = %d %s; want 202 with the id", w.Code, w.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end on Drain")
	}
}
