package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

// IdempotencyHeader names the request header whose value names the job.
const IdempotencyHeader = "Idempotency-Key"

var idempotencyKeyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`)

// submission is what a request asks for besides the recording.
type submission struct {
	key, engine, language, webhook, prompt string
	recognition                            workflows.Recognition
}

// maxPrompt bounds a prompt: OpenAI reads about 224 tokens of it, a few
// hundred words; more is a mistake, not guidance.
const maxPrompt = 4096

// checkHeader validates what arrives before the body, so that a bad key
// is refused before a large upload is read.
func checkKey(r *http.Request) (string, *apiError) {
	key := r.Header.Get(IdempotencyHeader)
	if key != "" && !idempotencyKeyPattern.MatchString(key) {
		return "", errBadRequest("invalid_idempotency_key",
			"Idempotency-Key must be 1 to 200 letters, digits and . _ : -, starting with a letter or digit")
	}
	return key, nil
}

func (a *API) checkSubmission(s submission) *apiError {
	if err := job.CheckLanguage(s.language); err != nil {
		return errBadRequest("invalid_language", err.Error())
	}
	if len(s.prompt) > maxPrompt {
		return errBadRequest("invalid_prompt", fmt.Sprintf("prompt is %d bytes; at most %d are accepted", len(s.prompt), maxPrompt))
	}
	if s.engine != "" && !slices.Contains(a.opts.Engines, s.engine) {
		return errBadRequest("invalid_engine", fmt.Sprintf("engine %q is not one of %s", s.engine, strings.Join(a.opts.Engines, ", ")))
	}
	if s.webhook != "" {
		// The error codes keep the field's first name: clients match them.
		if !a.opts.Webhooks {
			return errBadRequest("callbacks_disabled", "this server sends no webhooks: its owner must set TRANSCRIBER_WEBHOOK_SECRET")
		}
		if err := activities.CheckWebhookURL(s.webhook, a.opts.WebhookAllowLoopback); err != nil {
			return errBadRequest("invalid_callback_url", err.Error())
		}
	}
	return nil
}

// webhookURL reads where a job's webhook goes: webhook_url, or
// callback_url, the field's first name, which clients written for it keep
// sending. Given both, webhook_url counts.
func webhookURL(field func(name string) string) string {
	if u := field("webhook_url"); u != "" {
		return u
	}
	return field("callback_url")
}

// accept turns a received upload into a job: the same id for the same
// bytes, the recording stored before the job starts. The start itself finds
// a job already under the id, so a new upload costs no look-up first.
func (a *API) accept(ctx context.Context, u *upload, s submission) (id string, existing bool, apiErr *apiError) {
	engine, fallback := a.opts.Engine(s.engine, s.language)
	hash := hex.EncodeToString(u.sha256)
	owner := accountOf(ctx).Name
	policy := jobctl.OnePerID
	if s.key != "" {
		id = workflows.HTTPJobID(owner, s.key)
	} else {
		// Without a key the bytes name the job; a cancelled one may be
		// sent again.
		id, policy = workflows.HTTPContentJobID(owner, u.sha256, engine, s.language, s.recognition.Key()), jobctl.OnePerIDUnlessCancelled
	}
	// The key carries the hash: two requests racing with one id and other
	// bytes never overwrite each other's recording, and bytes already
	// stored under it are these bytes.
	key := blob.JobKey(id, "original-"+hash[:16]+u.ext)
	wrote, apiErr := a.storeOriginal(ctx, key, u.path)
	if apiErr != nil {
		return "", false, apiErr
	}
	in := workflows.Input{
		Source:      job.SourceHTTP,
		Original:    workflows.Original{Key: key, Ext: u.ext, Name: u.name, MIME: u.mime, Size: u.size},
		Engine:      engine,
		Fallback:    fallback,
		Language:    s.language,
		Prompt:      s.prompt,
		Recognition: s.recognition,
		Policy:      a.opts.Policy,
		AcceptedAt:  time.Now(),
		WebhookURL:  s.webhook,
		Owner:       owner,
	}
	existing, err := a.opts.Jobs.Start(ctx, jobctl.StartRequest{ID: id, Input: in, ContentSHA256: hash, Policy: policy})
	switch {
	case errors.Is(err, jobctl.ErrConflict):
		// The job under the id holds other bytes, under another key.
		if wrote {
			a.dropOriginal(ctx, id, key)
		}
		return "", false, conflict(s.key)
	case err != nil:
		// Kept: the client's retry with these bytes uses it.
		return "", false, errUnavailable(err)
	}
	if existing && wrote {
		// The job under the id did not have this key. Closed, its
		// retention removed its recordings and the copy just written
		// belongs to no job. Running, it may be another request's, started
		// with these very bytes at the same moment, which needs them; if it
		// named the bytes otherwise, the copy lies under the job's id and
		// goes with everything else there when the job's retention ends.
		if e, err := a.opts.Jobs.Lookup(ctx, id); err == nil && e.Closed {
			a.dropOriginal(ctx, id, key)
		}
	}
	if !existing {
		a.log.Info("job accepted", "job_id", id, "owner", owner, "bytes", u.size, "engine", engine, "webhook", s.webhook != "")
	}
	return id, existing, nil
}

// storeOriginal stores the upload at key unless the store has it already,
// and says whether it wrote.
func (a *API) storeOriginal(ctx context.Context, key, path string) (wrote bool, apiErr *apiError) {
	_, err := a.opts.Blobs.Size(ctx, key)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, blob.ErrNotFound):
		return false, storageError(err)
	}
	f, err := os.Open(path)
	if err != nil {
		return false, storageError(err)
	}
	_, err = a.opts.Blobs.Put(ctx, key, f)
	_ = f.Close() // only read
	if err != nil {
		return false, storageError(err)
	}
	return true, nil
}

// dropOriginal removes a recording this request stored for no job.
func (a *API) dropOriginal(ctx context.Context, id, key string) {
	if err := a.opts.Blobs.Delete(ctx, key); err != nil {
		a.log.Warn("a recording stored for no job was not removed", "job_id", id, "key", key, "error", err)
	}
}

func conflict(key string) *apiError {
	msg := "a job with this id holds a different recording"
	if key != "" {
		msg = "this Idempotency-Key was used for a different recording; use a new key for a new recording"
	}
	return &apiError{status: http.StatusConflict, code: "idempotency_conflict", message: msg}
}

func storageError(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: "storage_error", message: "the recording could not be stored: " + err.Error()}
}

func links(id string) map[string]string {
	self := "/v1/jobs/" + url.PathEscape(id)
	return map[string]string{"self": self, "transcript": self + "/transcript"}
}

type acceptedBody struct {
	ID string `json:"id"`
	// Existing is true when the request found the job an earlier one
	// started.
	Existing bool              `json:"existing"`
	State    job.State         `json:"state,omitempty"`
	Links    map[string]string `json:"links"`
}

func (a *API) createJob(w http.ResponseWriter, r *http.Request) {
	key, apiErr := checkKey(r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	q := r.URL.Query()
	if apiErr := a.checkSubmission(submission{engine: q.Get("engine"), language: q.Get("language"), webhook: webhookURL(q.Get)}); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	u, apiErr := a.receive(w, r, false)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	defer u.remove()
	s := submission{key: key, engine: u.field(r, "engine"), language: u.field(r, "language"), webhook: webhookURL(func(name string) string { return u.field(r, name) }), prompt: u.field(r, "prompt")}
	if apiErr := a.checkSubmission(s); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	id, existing, apiErr := a.accept(r.Context(), u, s)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	a.writeAccepted(w, id, existing, job.Accepted)
}

func (a *API) writeAccepted(w http.ResponseWriter, id string, existing bool, state job.State) {
	l := links(id)
	w.Header().Set("Location", l["self"])
	body := acceptedBody{ID: id, Existing: existing, Links: l}
	if !existing {
		body.State = state
	} else {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusAccepted, body)
}

// jobView is a job as the API shows it.
type jobView struct {
	ID     string     `json:"id"`
	State  job.State  `json:"state"`
	Source job.Source `json:"source,omitempty"`
	Engine string     `json:"engine,omitempty"`
	// Owner is who sent the job; empty for jobs older than owners.
	Owner string `json:"owner,omitempty"`
	// Step is the step running, or the one that stopped a failed or dead
	// job.
	Step     job.State `json:"step,omitempty"`
	Attempts int       `json:"attempts,omitempty"`
	// LastError and NextAttemptAt show a step that is being retried.
	LastError     string    `json:"last_error,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// Progress runs from 0 to 1 as the job moves through its steps.
	Progress         float64       `json:"progress"`
	Failure          *failureView  `json:"failure,omitempty"`
	Language         string        `json:"language,omitempty"`
	DetectedLanguage string        `json:"detected_language,omitempty"`
	Original         *originalView `json:"original,omitempty"`
	DurationSeconds  float64       `json:"duration_seconds,omitempty"`
	Words            int           `json:"words,omitempty"`
	Chunks           int           `json:"chunks,omitempty"`
	ChunksDone       int           `json:"chunks_done,omitempty"`
	Revivals         int           `json:"revivals,omitempty"`
	// FallbackFrom names the engine that gave up when another produced
	// the text.
	FallbackFrom string `json:"fallback_from,omitempty"`
	// Service and ServiceVersion name the recognition service that did the
	// work; NeedsCheck is its request for a person to review the text.
	Service        string `json:"service,omitempty"`
	ServiceVersion string `json:"service_version,omitempty"`
	NeedsCheck     bool   `json:"needs_check,omitempty"`
	// RemoveAt is until when the recordings are kept after the job closed;
	// RemovedAt when they were removed.
	RemoveAt  time.Time         `json:"remove_at,omitzero"`
	RemovedAt time.Time         `json:"removed_at,omitzero"`
	Timings   timingsView       `json:"timings"`
	Links     map[string]string `json:"links"`
}

type failureView struct {
	Kind     job.Kind  `json:"kind"`
	Step     job.State `json:"step"`
	Message  string    `json:"message"`
	Attempts int       `json:"attempts,omitempty"`
	At       time.Time `json:"at"`
	// Code is the engine's own name for the error; RawKey the blob key of
	// the answer it came in, for an operator with access to the store.
	Code   string `json:"code,omitempty"`
	RawKey string `json:"raw_key,omitempty"`
}

type originalView struct {
	Name string `json:"name,omitempty"`
	MIME string `json:"mime,omitempty"`
	Size int64  `json:"size,omitempty"`
}

type timingsView struct {
	AcceptedAt     time.Time `json:"accepted_at"`
	UpdatedAt      time.Time `json:"updated_at,omitzero"`
	FinishedAt     time.Time `json:"finished_at,omitzero"`
	ElapsedSeconds float64   `json:"elapsed_seconds"`
}

// progressOf places each state on the way from accepted to done.
var progressOf = map[job.State]float64{
	job.Accepted: 0, job.Fetching: 0.05, job.Converting: 0.1, job.Transcribing: 0.3, job.Replying: 0.95, job.Done: 1,
}

func viewOf(st workflows.Status, pending []jobctl.Pending) jobView {
	v := jobView{
		ID: st.JobID, State: st.State, Source: st.Source, Engine: st.Engine, Owner: st.Owner,
		Language: st.Language, DetectedLanguage: st.DetectedLanguage, Words: st.Words,
		DurationSeconds: st.Duration.Seconds(), Chunks: len(st.Chunks), ChunksDone: st.ChunksDone, Revivals: st.Revivals,
		FallbackFrom: st.FallbackFrom, Service: st.Service, ServiceVersion: st.ServiceVersion, NeedsCheck: st.NeedsCheck,
		RemoveAt: st.RemoveAt, RemovedAt: st.RemovedAt,
		Links:   links(st.JobID),
		Timings: timingsView{AcceptedAt: st.AcceptedAt, UpdatedAt: st.UpdatedAt, FinishedAt: st.FinishedAt},
	}
	if st.Original != (workflows.Original{}) {
		v.Original = &originalView{Name: st.Original.Name, MIME: st.Original.MIME, Size: st.Original.Size}
	}
	end := st.FinishedAt
	if end.IsZero() {
		end = time.Now()
	}
	if !st.AcceptedAt.IsZero() {
		v.Timings.ElapsedSeconds = end.Sub(st.AcceptedAt).Round(time.Millisecond).Seconds()
	}
	step := st.State
	if f := st.Failure; f != nil {
		step = f.Step
		v.Attempts = f.Attempts
		v.Failure = &failureView{Kind: f.Kind, Step: f.Step, Message: f.Message, Attempts: f.Attempts, At: f.At, Code: f.Code, RawKey: f.RawKey}
	}
	if !st.State.Settled() || st.Failure != nil {
		v.Step = step
	}
	v.Progress = progressOf[step]
	if step == job.Transcribing && len(st.Chunks) > 0 {
		v.Progress += (progressOf[job.Replying] - progressOf[job.Transcribing]) * float64(st.ChunksDone) / float64(len(st.Chunks))
	}
	for _, p := range pending {
		if p.Attempt > v.Attempts {
			v.Attempts = p.Attempt
		}
		if p.LastError != "" {
			v.LastError, v.NextAttemptAt = p.LastError, p.NextAttempt
		}
	}
	return v
}

func (a *API) jobError(id string, err error) *apiError {
	switch {
	case errors.Is(err, jobctl.ErrNotFound):
		return errNoJob(id)
	case errors.Is(err, context.Canceled):
		return &apiError{status: 499, code: "cancelled", message: "the request was cancelled"}
	}
	return errUnavailable(err)
}

// ownJob is the one way an endpoint reaches a job by its id: the job's
// status and pending steps when the caller may see it, else the very 404
// of a job that does not exist, so that nobody learns another account's
// job ids. Endpoints that act on a job without reading it (revive, cancel)
// ask checkOwner alone, which ownJob goes through too.
func (a *API) ownJob(ctx context.Context, id string) (workflows.Status, []jobctl.Pending, *apiError) {
	if apiErr := a.checkOwner(ctx, id); apiErr != nil {
		return workflows.Status{}, nil, apiErr
	}
	st, pending, err := a.opts.Jobs.Get(ctx, id)
	if err != nil {
		return workflows.Status{}, nil, a.jobError(id, err)
	}
	return st, pending, nil
}

// checkOwner decides whether the caller may reach the job: admins reach
// every job, an account its own; a job without an owner (older than
// owners) only admins. It reads the owner from visibility rather than from
// the job's status, so that a cancel works while no worker answers queries.
func (a *API) checkOwner(ctx context.Context, id string) *apiError {
	e, err := a.opts.Jobs.Lookup(ctx, id)
	if err != nil {
		return a.jobError(id, err)
	}
	if acc := accountOf(ctx); !acc.Admin && (e.Owner == "" || e.Owner != acc.Name) {
		return errNoJob(id)
	}
	return nil
}

func errNoJob(id string) *apiError { return errNotFound("no job " + id) }

func (a *API) getJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, pending, apiErr := a.ownJob(r.Context(), id)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(st, pending))
}

type listBody struct {
	Jobs          []jobctl.Summary `json:"jobs"`
	NextPageToken string           `json:"next_page_token,omitempty"`
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state, err := jobctl.ParseState(q.Get("state"))
	if err != nil {
		writeError(w, errBadRequest("invalid_state", err.Error()))
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			writeError(w, errBadRequest("invalid_limit", "limit must be a number from 1 to 1000"))
			return
		}
	}
	token, err := base64.RawURLEncoding.DecodeString(q.Get("page_token"))
	if err != nil {
		writeError(w, errBadRequest("invalid_page_token", "page_token is not one this server gave"))
		return
	}
	f := jobctl.Filter{State: state, Owner: q.Get("owner")}
	if acc := accountOf(r.Context()); !acc.Admin {
		if f.Owner != "" && f.Owner != acc.Name {
			writeError(w, &apiError{status: http.StatusForbidden, code: "forbidden",
				message: "only admin accounts (TRANSCRIBER_ADMINS) list the jobs of other owners"})
			return
		}
		f.Owner = acc.Name
	}
	list, next, err := a.opts.Jobs.List(r.Context(), f, limit, token)
	if err != nil {
		writeError(w, errUnavailable(err))
		return
	}
	if list == nil {
		list = []jobctl.Summary{}
	}
	writeJSON(w, http.StatusOK, listBody{Jobs: list, NextPageToken: base64.RawURLEncoding.EncodeToString(next)})
}

func (a *API) getTranscript(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "txt"
	}
	mediaType, ok := transcript.MediaType(format)
	if !ok {
		writeError(w, errBadRequest("invalid_format", fmt.Sprintf("format %q is not one of %s", format, strings.Join(transcript.Formats, ", "))))
		return
	}
	st, _, apiErr := a.ownJob(r.Context(), id)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if st.State != job.Done || st.TranscriptKey == "" {
		writeError(w, &apiError{status: http.StatusConflict, code: "not_ready",
			message: fmt.Sprintf("job %s is %s; its transcript is there once it is done", id, st.State)})
		return
	}
	if !st.RemovedAt.IsZero() {
		writeError(w, &apiError{status: http.StatusGone, code: "removed",
			message: fmt.Sprintf("the recordings and transcript of job %s were removed at %s, after the retention period", id, st.RemovedAt.Format(time.RFC3339))})
		return
	}
	doc, err := transcript.Load(r.Context(), a.opts.Blobs, st.TranscriptKey)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, code: "storage_error",
			message: fmt.Sprintf("the transcript of job %s cannot be read from this server's store", id)})
		a.log.Error("transcript unreadable", "job_id", id, "error", err)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	_ = transcript.Render(w, doc, format)
}

type reviveBody struct {
	ID string `json:"id"`
	// Was is the state the job left; ResumesAt the step a failed or dead
	// job runs again, or Retried the steps of a running job that waited
	// out a back-off and run again now.
	Was       job.State         `json:"was"`
	ResumesAt job.State         `json:"resumes_at,omitempty"`
	Retried   []retriedStep     `json:"retried,omitempty"`
	Links     map[string]string `json:"links"`
}

type retriedStep struct {
	Step string `json:"step"`
	// FailedAttempts is how often it had failed before its attempts were
	// counted from one again.
	FailedAttempts int `json:"failed_attempts"`
}

func (a *API) reviveJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if apiErr := a.checkOwner(r.Context(), id); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	rv, err := a.opts.Jobs.Revive(r.Context(), id)
	var refused *jobctl.NotRevivableError
	if errors.As(err, &refused) {
		writeError(w, &apiError{status: http.StatusConflict, code: "not_revivable", message: refused.Error()})
		return
	}
	if err != nil {
		writeError(w, a.jobError(id, err))
		return
	}
	writeJSON(w, http.StatusAccepted, revivedBody(id, rv))
}

func revivedBody(id string, rv jobctl.Revival) reviveBody {
	body := reviveBody{ID: id, Was: rv.Status.State, ResumesAt: rv.ResumesAt, Links: links(id)}
	for _, p := range rv.Retried {
		body.Retried = append(body.Retried, retriedStep{Step: p.Activity, FailedAttempts: p.Attempt - 1})
	}
	return body
}

// retryPending runs every step waiting out a back-off now, as the vault's
// "recognise all pending here" does for its recordings: the caller's jobs,
// an admin's every job. Only jobs that are waiting change; the answer lists
// them.
func (a *API) retryPending(w http.ResponseWriter, r *http.Request) {
	owner := ""
	if acc := accountOf(r.Context()); !acc.Admin {
		owner = acc.Name
	}
	revived, err := a.opts.Jobs.RetryPending(r.Context(), owner)
	if err != nil {
		writeError(w, errUnavailable(err))
		return
	}
	body := struct {
		Jobs []reviveBody `json:"jobs"`
	}{Jobs: []reviveBody{}}
	for _, rv := range revived {
		body.Jobs = append(body.Jobs, revivedBody(rv.Status.JobID, rv))
	}
	writeJSON(w, http.StatusOK, body)
}

type cancelBody struct {
	ID      string            `json:"id"`
	Message string            `json:"message"`
	Links   map[string]string `json:"links"`
}

func (a *API) cancelJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if apiErr := a.checkOwner(r.Context(), id); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	err := a.opts.Jobs.Cancel(r.Context(), id)
	if errors.Is(err, jobctl.ErrClosed) {
		writeError(w, &apiError{status: http.StatusConflict, code: "closed", message: fmt.Sprintf("job %s has closed; there is nothing to cancel", id)})
		return
	}
	if err != nil {
		writeError(w, a.jobError(id, err))
		return
	}
	writeJSON(w, http.StatusAccepted, cancelBody{ID: id, Message: "the job is being cancelled; its recording is kept", Links: links(id)})
}
