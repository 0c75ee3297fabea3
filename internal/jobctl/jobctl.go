// Package jobctl is the one door to the Temporal client for jobs: it
// starts them under the id policy an intake needs, looks them up, asks for
// their status, revives, cancels, awaits and lists them, and passes on an
// engine's callback. Intakes and commands call it through small interfaces
// of their own, so every caller sees and steers jobs the same way, and the
// start options and search attributes of a job are built here only.
package jobctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/workflows"
)

var (
	// ErrNotFound: no job has the id.
	ErrNotFound = errors.New("no such job")
	// ErrConflict: the id belongs to a job of other bytes.
	ErrConflict = errors.New("the job id belongs to another recording")
	// ErrNotRevivable: only failed and dead jobs can be revived. The
	// error that wraps it names the job and its state.
	ErrNotRevivable = errors.New("only failed or dead jobs can be revived")
	// ErrClosed: the job has closed and can no longer be changed.
	ErrClosed = errors.New("the job has closed")
)

// MemoContentSHA256 is the memo that holds the hex SHA-256 of a job's
// recording, set when the job starts, so that a later start under the same
// id can tell the same recording from another one.
const MemoContentSHA256 = "content_sha256"

// States are the values of the TranscriptionState search attribute.
var States = []job.State{job.Accepted, job.Fetching, job.Converting, job.Transcribing, job.Replying,
	job.Done, job.Failed, job.Dead, job.Cancelled}

// ParseState checks a state given by a person or a program; empty is any.
func ParseState(s string) (job.State, error) {
	if s == "" || slices.Contains(States, job.State(s)) {
		return job.State(s), nil
	}
	return "", fmt.Errorf("%q is not a job state; states are %v", s, States)
}

// Service reaches the jobs of one namespace.
type Service struct {
	Client    client.Client
	Namespace string
}

// Summary is a job as visibility lists it.
type Summary struct {
	ID      string     `json:"id"`
	State   job.State  `json:"state"`
	Source  job.Source `json:"source"`
	Engine  string     `json:"engine"`
	Owner   string     `json:"owner,omitempty"`
	Started time.Time  `json:"started_at"`
	Closed  time.Time  `json:"closed_at,omitzero"`
}

// Filter picks the jobs List returns; an empty field picks any.
type Filter struct {
	State job.State
	// Owner picks one owner's jobs (TranscriptionOwner).
	Owner string
}

// List returns one page of jobs, newest first, those f picks, and the token
// of the next page (empty after the last).
func (s *Service) List(ctx context.Context, f Filter, pageSize int, token []byte) ([]Summary, []byte, error) {
	state, err := ParseState(string(f.State))
	if err != nil {
		return nil, nil, err
	}
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName)
	if state != "" {
		q += fmt.Sprintf(" AND %s = %s", workflows.StateKey.GetName(), quote(string(state)))
	}
	if f.Owner != "" {
		q += ownerClause(f.Owner)
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.Namespace, Query: q, NextPageToken: token, PageSize: int32(pageSize),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make([]Summary, 0, len(resp.GetExecutions()))
	for _, e := range resp.GetExecutions() {
		out = append(out, summaryOf(e))
	}
	return out, resp.GetNextPageToken(), nil
}

// ownerClause narrows a visibility query to one owner's jobs.
func ownerClause(owner string) string {
	return fmt.Sprintf(" AND %s = %s", workflows.OwnerKey.GetName(), quote(owner))
}

// quote makes s a string literal of a visibility query. Owners come from
// configuration and intakes (a vault's device id, an account name), so
// they are quoted, never trusted to be plain.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func summaryOf(e *workflowpb.WorkflowExecutionInfo) Summary {
	sa := e.GetSearchAttributes()
	sum := Summary{
		ID:      e.GetExecution().GetWorkflowId(),
		State:   job.State(keyword(sa, workflows.StateKey.GetName())),
		Source:  job.Source(keyword(sa, workflows.SourceKey.GetName())),
		Engine:  keyword(sa, workflows.EngineKey.GetName()),
		Owner:   keyword(sa, workflows.OwnerKey.GetName()),
		Started: e.GetStartTime().AsTime(),
	}
	if ct := e.GetCloseTime(); ct != nil {
		sum.Closed = ct.AsTime()
	}
	return sum
}

// ListOpen returns every job that has not closed whose id starts with
// prefix: the jobs an intake that names its jobs by prefix still has under
// way, parked ones included, in one question per page instead of one per
// job.
func (s *Service) ListOpen(ctx context.Context, prefix string) ([]Summary, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND WorkflowId STARTS_WITH %s",
		workflows.WorkflowName, quote(prefix))
	var out []Summary
	var token []byte
	for {
		resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.Namespace, Query: q, NextPageToken: token, PageSize: 1000,
		})
		if err != nil {
			return nil, fmt.Errorf("list open jobs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, summaryOf(e))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

func keyword(sa *commonpb.SearchAttributes, name string) string {
	p := sa.GetIndexedFields()[name]
	var s string
	if p == nil || json.Unmarshal(p.GetData(), &s) != nil {
		return ""
	}
	return s
}

// closedQueryTimeout bounds asking a closed job for its status: a worker
// answers by replaying its history, and without one the question would
// wait for nothing.
const closedQueryTimeout = 3 * time.Second

// Status asks the job for its status. The workflow answers while a worker
// runs; a closed job that no worker answers for is read from visibility and
// its result instead, which know less (no original, no timings) but the
// outcome.
func (s *Service) Status(ctx context.Context, id string) (workflows.Status, error) {
	st, _, err := s.Get(ctx, id)
	return st, err
}

// Get returns the job's status and the steps it is running.
func (s *Service) Get(ctx context.Context, id string) (workflows.Status, []Pending, error) {
	desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return workflows.Status{}, nil, notFound(id, err)
	}
	var pending []Pending
	for _, pa := range desc.GetPendingActivities() {
		p := Pending{ID: pa.GetActivityId(), Activity: pa.GetActivityType().GetName(), Attempt: int(pa.GetAttempt()),
			Running: pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED}
		if lf := pa.GetLastFailure(); lf != nil {
			p.LastError = lf.GetMessage()
		}
		if t := pa.GetNextAttemptScheduleTime(); t != nil {
			p.NextAttempt = t.AsTime()
		}
		if t := pa.GetLastStartedTime(); t != nil {
			p.LastStarted = t.AsTime()
		}
		pending = append(pending, p)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		st, err := s.query(ctx, id)
		return st, pending, err
	}
	qctx, cancel := context.WithTimeout(ctx, closedQueryTimeout)
	defer cancel()
	if st, err := s.query(qctx, id); err == nil {
		return st, pending, nil
	}
	st, err := s.fromHistory(ctx, id, desc)
	return st, pending, err
}

func (s *Service) query(ctx context.Context, id string) (workflows.Status, error) {
	var st workflows.Status
	v, err := s.Client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, notFound(id, err)
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("status of job %s: %w", id, err)
	}
	return st, nil
}

// fromHistory rebuilds what it can of a closed job's status from
// visibility and the workflow's result.
func (s *Service) fromHistory(ctx context.Context, id string, desc *workflowservice.DescribeWorkflowExecutionResponse) (workflows.Status, error) {
	info := desc.GetWorkflowExecutionInfo()
	sa := info.GetSearchAttributes()
	st := workflows.Status{
		JobID:      id,
		State:      job.State(keyword(sa, workflows.StateKey.GetName())),
		Source:     job.Source(keyword(sa, workflows.SourceKey.GetName())),
		Engine:     keyword(sa, workflows.EngineKey.GetName()),
		Owner:      keyword(sa, workflows.OwnerKey.GetName()),
		AcceptedAt: info.GetStartTime().AsTime(),
		UpdatedAt:  info.GetCloseTime().AsTime(),
		FinishedAt: info.GetCloseTime().AsTime(),
	}
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var res workflows.Result
		if err := s.Client.GetWorkflow(ctx, id, info.GetExecution().GetRunId()).Get(ctx, &res); err != nil {
			return st, fmt.Errorf("result of job %s: %w", id, err)
		}
		st.State, st.TranscriptKey, st.Failure = res.State, res.TranscriptKey, res.Failure
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		st.State = job.Cancelled
	default:
		// Failed or timed out as a workflow: something outside the job's
		// own rules stopped it, in the state it had last published.
		step := st.State
		st.State = job.Dead
		st.Failure = &job.Failure{Kind: job.Internal, Step: step,
			Message: "the workflow ended " + info.GetStatus().String(), At: st.FinishedAt}
	}
	return st, nil
}

// Pending is a step a job is running, as the server sees it: a step that
// is retrying shows its attempt and last error here long before the
// workflow learns of them.
type Pending struct {
	// ID is the step's activity id within the job.
	ID          string
	Activity    string
	Attempt     int
	LastError   string
	NextAttempt time.Time
	// LastStarted is when the step's latest attempt began.
	LastStarted time.Time
	// Running is set while an attempt runs; otherwise the step waits for
	// a worker or, after a failed attempt, out its back-off.
	Running bool
}

// BackingOff reports whether the step failed and waits for its next
// attempt.
func (p Pending) BackingOff() bool { return !p.Running && p.Attempt > 1 }

// Existing is a job found under an id.
type Existing struct {
	// ContentSHA256 is the hex hash of its recording; empty for jobs that
	// did not record one (Telegram and command-line jobs).
	ContentSHA256 string
	// Closed is set once the workflow has closed; Rerunnable when it closed
	// cancelled or terminated, so that the id may start a new job.
	Closed, Rerunnable bool
	// Owner is the job's TranscriptionOwner, empty for jobs older than
	// owners. It comes from visibility, so no worker needs to answer.
	Owner string
}

// Lookup finds the job under id; ErrNotFound when there is none.
func (s *Service) Lookup(ctx context.Context, id string) (Existing, error) {
	desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return Existing{}, notFound(id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	e := Existing{Owner: keyword(info.GetSearchAttributes(), workflows.OwnerKey.GetName())}
	if p := info.GetMemo().GetFields()[MemoContentSHA256]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &e.ContentSHA256); err != nil {
			return Existing{}, fmt.Errorf("memo of job %s: %w", id, err)
		}
	}
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		e.Closed, e.Rerunnable = true, true
	default:
		e.Closed = true
	}
	return e, nil
}

// IDPolicy says what a start does when the job id is taken.
type IDPolicy int

const (
	// OnePerID: the id names one job forever. A second start finds that
	// job, running or closed, so a redelivered message or a repeated
	// request never starts a second one (Telegram messages, idempotency
	// keys).
	OnePerID IDPolicy = iota
	// OnePerIDUnlessCancelled is OnePerID, except that an id whose job was
	// cancelled or terminated may start a new job.
	OnePerIDUnlessCancelled
	// JoinRunning: a start while a job with the id runs joins it; once it
	// has closed, the id starts anew (content-named command-line jobs).
	JoinRunning
)

// StartRequest starts a job.
type StartRequest struct {
	ID     string
	Input  workflows.Input
	Policy IDPolicy
	// ContentSHA256 is the hex hash of the recording's bytes, when the
	// caller has them; a taken id whose job holds other bytes is then
	// ErrConflict instead of that job.
	ContentSHA256 string
}

// Start starts the job. When the id is taken the job under it is the answer
// (existing is true), unless its recording differs (ErrConflict). A start
// that joins a running job under JoinRunning reports it as new: the
// server does not say which it was, and the caller treats both alike.
func (s *Service) Start(ctx context.Context, req StartRequest) (existing bool, err error) {
	_, err = s.Client.ExecuteWorkflow(ctx, startOptions(req), workflows.WorkflowName, req.Input)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err == nil || !errors.As(err, &started) {
		if err != nil {
			return false, fmt.Errorf("start job %s: %w", req.ID, err)
		}
		return false, nil
	}
	if req.ContentSHA256 == "" {
		return true, nil
	}
	e, err := s.Lookup(ctx, req.ID)
	if err != nil {
		return false, err
	}
	if e.ContentSHA256 != req.ContentSHA256 {
		return false, ErrConflict
	}
	return true, nil
}

// startOptions are the one place a job's start options and first search
// attributes are made.
func startOptions(req StartRequest) client.StartWorkflowOptions {
	attrs := []temporal.SearchAttributeUpdate{
		workflows.StateKey.ValueSet(string(job.Accepted)),
		workflows.SourceKey.ValueSet(string(req.Input.Source)),
		workflows.EngineKey.ValueSet(req.Input.Engine),
	}
	if req.Input.Owner != "" {
		// Set at the start, never upserted by the workflow: an upsert would
		// be a command that the recorded histories do not have.
		attrs = append(attrs, workflows.OwnerKey.ValueSet(req.Input.Owner))
	}
	o := client.StartWorkflowOptions{
		ID:        req.ID,
		TaskQueue: workflows.TaskQueue,
		// Two starts with one id race to here; the loser learns of the
		// winner through the error. Without the flag the SDK hides "already
		// started" behind the old run.
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(attrs...),
	}
	if req.ContentSHA256 != "" {
		o.Memo = map[string]any{MemoContentSHA256: req.ContentSHA256}
	}
	switch req.Policy {
	case OnePerIDUnlessCancelled:
		o.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
	case JoinRunning:
		o.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
		o.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		o.WorkflowExecutionErrorWhenAlreadyStarted = false
	}
	return o
}

// NotRevivableError is a revive that changed nothing, because the job is
// neither failed nor dead nor waiting out a back-off; it wraps
// ErrNotRevivable.
type NotRevivableError struct {
	ID    string
	State job.State
	// Running names the steps running right now, whose attempts a revive
	// leaves alone.
	Running []string
}

func (e *NotRevivableError) Error() string {
	if len(e.Running) > 0 {
		return fmt.Sprintf("job %s is %s and its step %s is running right now; a revive changes nothing",
			e.ID, e.State, strings.Join(e.Running, ", "))
	}
	return fmt.Sprintf("job %s is %s; only failed or dead jobs, or jobs waiting out a back-off, can be revived", e.ID, e.State)
}

func (e *NotRevivableError) Unwrap() error { return ErrNotRevivable }

// reviveTimeout bounds the wait for a worker to run the revive update.
const reviveTimeout = 30 * time.Second

// Revival is what a revive did.
type Revival struct {
	// Status is the job's status before the revive.
	Status workflows.Status
	// ResumesAt is the step a failed or dead job runs again; empty when
	// the job was not parked.
	ResumesAt job.State
	// Retried are the steps that were waiting out a back-off and run again
	// now, their attempts counted from one again.
	Retried []Pending
}

// Revive resumes a failed or dead job at the step that stopped it, or runs
// the steps of a job that wait out a back-off now, with fresh attempts.
// The parked job decides itself, in the revive update's validator, so there
// is no window between a check and the act; steps waiting out a back-off
// are retried through Temporal's own activity reset. A job with neither
// answers with a NotRevivableError.
func (s *Service) Revive(ctx context.Context, id string) (Revival, error) {
	var st workflows.Status
	// The job answers through a worker; without one the update would wait
	// for as long as the caller does.
	uctx, cancel := context.WithTimeout(ctx, reviveTimeout)
	defer cancel()
	h, err := s.Client.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdateRevive, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(uctx, &st)
	}
	if err != nil && uctx.Err() != nil && ctx.Err() == nil {
		return Revival{}, fmt.Errorf("revive job %s: no worker answered within %s; is a worker running (transcriber up or transcriber worker)?", id, reviveTimeout)
	}
	if err == nil {
		r := Revival{Status: st, ResumesAt: st.State}
		if st.Failure != nil {
			r.ResumesAt = st.Failure.Step
		}
		return r, nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == workflows.ErrTypeNotRevivable {
		var state job.State
		if derr := appErr.Details(&state); derr != nil {
			return Revival{}, fmt.Errorf("revive job %s: %w", id, err)
		}
		if state.Settled() {
			return Revival{Status: workflows.Status{JobID: id, State: state}}, &NotRevivableError{ID: id, State: state}
		}
		return s.retryNow(ctx, id)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// Closed jobs take no updates; say what they closed as.
		closed, serr := s.Status(ctx, id)
		if serr != nil {
			return Revival{}, serr
		}
		return Revival{Status: closed}, &NotRevivableError{ID: id, State: closed.State}
	}
	return Revival{}, fmt.Errorf("revive job %s: %w", id, err)
}

// retryNow resets the steps of a running job that wait out a back-off:
// each runs again at once with its attempts counted from one, as seed 002's
// "retry now" asks. A step that runs right now is left alone (its attempt
// may be about to succeed), and so is the job's own copy: Temporal retries
// the same step, it does not start a second one.
func (s *Service) retryNow(ctx context.Context, id string) (Revival, error) {
	st, pending, err := s.Get(ctx, id)
	if err != nil {
		return Revival{}, err
	}
	r := Revival{Status: st}
	var running []string
	for _, p := range pending {
		switch {
		case p.Running:
			running = append(running, p.Activity)
		case p.BackingOff():
			_, err := s.Client.WorkflowService().ResetActivity(ctx, &workflowservice.ResetActivityRequest{
				Namespace: s.Namespace,
				Execution: &commonpb.WorkflowExecution{WorkflowId: id},
				Identity:  "transcriber revive",
				Activity:  &workflowservice.ResetActivityRequest_Id{Id: p.ID},
			})
			if err != nil {
				return r, fmt.Errorf("retry step %s of job %s now: %w", p.Activity, id, err)
			}
			r.Retried = append(r.Retried, p)
		}
	}
	if len(r.Retried) == 0 {
		return r, &NotRevivableError{ID: id, State: st.State, Running: running}
	}
	return r, nil
}

// RetryPending runs every step that waits out a back-off now, in every open
// job of owner (of the namespace when owner is empty), as revive does for
// one job; it returns the jobs it retried. Jobs whose steps run or wait for
// a worker are left alone.
func (s *Service) RetryPending(ctx context.Context, owner string) ([]Revival, error) {
	var out []Revival
	var token []byte
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.WorkflowName)
	if owner != "" {
		q += ownerClause(owner)
	}
	for {
		resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.Namespace, Query: q, NextPageToken: token, PageSize: 500,
		})
		if err != nil {
			return out, fmt.Errorf("list running jobs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if job.State(keyword(e.GetSearchAttributes(), workflows.StateKey.GetName())).Settled() {
				continue
			}
			r, err := s.retryNow(ctx, id)
			switch {
			case errors.Is(err, ErrNotRevivable), errors.Is(err, ErrNotFound):
			case err != nil:
				return out, err
			default:
				out = append(out, r)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// Cancel cancels the job. Its recording stays in the store.
func (s *Service) Cancel(ctx context.Context, id string) error {
	e, err := s.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if e.Closed {
		return ErrClosed
	}
	return notFound(id, s.Client.CancelWorkflow(ctx, id, ""))
}

// unansweredAfter is how long a job may go without answering before Await
// tells its caller once.
const unansweredAfter = 10 * time.Second

// Await polls the job's status until it settles or ctx ends. Failed and
// dead jobs stay open for revive, so waiting for the workflow's result
// would hang; the status says when they settle. A job that cannot be asked
// for a while (workers restarting, a frozen one holding it) is waited for,
// not failed: unanswered, when not nil, hears of it once.
func (s *Service) Await(ctx context.Context, id string, unanswered func(error)) (workflows.Status, error) {
	return s.AwaitReporting(ctx, id, unanswered, nil)
}

// AwaitReporting is Await that also hands seen, when not nil, every status
// it reads on the way, settled or not, so that a waiting person can be
// shown the job's progress from the same status the job reports.
func (s *Service) AwaitReporting(ctx context.Context, id string, unanswered func(error), seen func(workflows.Status)) (workflows.Status, error) {
	// Between polls, which back off to a second, the server's long poll
	// for the end of the job's run wakes the loop the moment a job that
	// ends with its outcome closes, so that nobody waits out the rest of a
	// second for a transcript that is there.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = s.Client.GetWorkflow(wctx, id, "").Get(wctx, nil) // its outcome is read from the status
	}()
	wait := 50 * time.Millisecond
	var failingSince time.Time
	told := false
	for {
		qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		st, err := s.Status(qctx, id)
		cancel()
		switch {
		case err == nil:
			failingSince, told = time.Time{}, false
			if seen != nil {
				seen(st)
			}
			if st.State.Settled() {
				return st, nil
			}
		case errors.Is(err, ErrNotFound):
			return st, err
		case ctx.Err() != nil:
		case failingSince.IsZero():
			failingSince = time.Now()
		case !told && unanswered != nil && time.Since(failingSince) > unansweredAfter:
			unanswered(err)
			told = true
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(wait):
		case <-closed:
			// Once: a closed run's status answers the next poll.
			closed = nil
		}
		wait = min(wait*2, time.Second)
	}
}

// ErrNotRunning: the job an engine called back about has closed or never
// existed, so nothing waits for the callback.
var ErrNotRunning = errors.New("the job is not running")

// NotifyEngineCallback tells a job that its engine called back about an
// operation, so the job checks it at once.
func (s *Service) NotifyEngineCallback(ctx context.Context, id string, cb workflows.EngineCallback) error {
	err := s.Client.SignalWorkflow(ctx, id, "", workflows.SignalEngineCallback, cb)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("job %s: %w", id, ErrNotRunning)
	}
	if err != nil {
		return fmt.Errorf("job %s: pass on engine callback: %w", id, err)
	}
	return nil
}

// notFound turns the server's "not found" into ErrNotFound.
func notFound(id string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	return nil
}
