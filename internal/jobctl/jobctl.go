// Package jobctl reads and steers transcription jobs through a Temporal
// client: listing them by state, reading one, starting one under an id that
// must stay tied to one recording, reviving and cancelling. The operator
// commands and the HTTP API share it, so both see jobs the same way.
package jobctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
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
	// ErrNotRevivable: only failed and dead jobs can be revived.
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
	Started time.Time  `json:"started_at"`
	Closed  time.Time  `json:"closed_at,omitzero"`
}

// List returns one page of jobs, newest first, in state when it is not
// empty, and the token of the next page (empty after the last).
func (s *Service) List(ctx context.Context, state job.State, pageSize int, token []byte) ([]Summary, []byte, error) {
	state, err := ParseState(string(state))
	if err != nil {
		return nil, nil, err
	}
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName)
	if state != "" {
		q += fmt.Sprintf(" AND %s = '%s'", workflows.StateKey.GetName(), state)
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.Namespace, Query: q, NextPageToken: token, PageSize: int32(pageSize),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make([]Summary, 0, len(resp.GetExecutions()))
	for _, e := range resp.GetExecutions() {
		sa := e.GetSearchAttributes()
		sum := Summary{
			ID:      e.GetExecution().GetWorkflowId(),
			State:   job.State(keyword(sa, workflows.StateKey.GetName())),
			Source:  job.Source(keyword(sa, workflows.SourceKey.GetName())),
			Engine:  keyword(sa, workflows.EngineKey.GetName()),
			Started: e.GetStartTime().AsTime(),
		}
		if ct := e.GetCloseTime(); ct != nil {
			sum.Closed = ct.AsTime()
		}
		out = append(out, sum)
	}
	return out, resp.GetNextPageToken(), nil
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
		p := Pending{Activity: pa.GetActivityType().GetName(), Attempt: int(pa.GetAttempt())}
		if lf := pa.GetLastFailure(); lf != nil {
			p.LastError = lf.GetMessage()
		}
		if t := pa.GetNextAttemptScheduleTime(); t != nil {
			p.NextAttempt = t.AsTime()
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
		// own rules stopped it.
		st.State = job.Dead
		st.Failure = &job.Failure{Kind: job.Internal, Step: st.State,
			Message: "the workflow ended " + info.GetStatus().String(), At: st.FinishedAt}
	}
	return st, nil
}

// Pending is a step a job is running, as the server sees it: a step that
// is retrying shows its attempt and last error here long before the
// workflow learns of them.
type Pending struct {
	Activity    string
	Attempt     int
	LastError   string
	NextAttempt time.Time
}

// Existing is a job found under an id.
type Existing struct {
	// ContentSHA256 is the hex hash of its recording; empty for jobs that
	// did not record one (Telegram and command-line jobs).
	ContentSHA256 string
	// Closed is set once the workflow has closed; Rerunnable when it closed
	// cancelled or terminated, so that the id may start a new job.
	Closed, Rerunnable bool
}

// Lookup finds the job under id; ErrNotFound when there is none.
func (s *Service) Lookup(ctx context.Context, id string) (Existing, error) {
	desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return Existing{}, notFound(id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	var e Existing
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

// StartRequest starts a job under an id tied to one recording.
type StartRequest struct {
	ID    string
	Input workflows.Input
	// ContentSHA256 is the hex hash of the recording's bytes.
	ContentSHA256 string
	// Rerun lets the id start a new job when its previous one was cancelled
	// or terminated; without it the id names one job forever.
	Rerun bool
}

// Start starts the job. When the id is taken, the job under it is the
// answer if it holds the same bytes (existing is true), and ErrConflict if
// it holds others.
func (s *Service) Start(ctx context.Context, req StartRequest) (existing bool, err error) {
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	if req.Rerun {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
	}
	_, err = s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        req.ID,
		TaskQueue: workflows.TaskQueue,
		// Two requests with one id race to here; the loser learns of the
		// winner through the error and compares bytes.
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    reuse,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     map[string]any{MemoContentSHA256: req.ContentSHA256},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.StateKey.ValueSet(string(job.Accepted)),
			workflows.SourceKey.ValueSet(string(req.Input.Source)),
			workflows.EngineKey.ValueSet(req.Input.Engine),
		),
	}, workflows.WorkflowName, req.Input)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err == nil || !errors.As(err, &started) {
		if err != nil {
			return false, fmt.Errorf("start job %s: %w", req.ID, err)
		}
		return false, nil
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

// Revive resumes a failed or dead job at the step that stopped it and
// returns the status it had.
func (s *Service) Revive(ctx context.Context, id string) (workflows.Status, error) {
	st, err := s.query(ctx, id)
	if err != nil {
		return st, err
	}
	if st.State != job.Failed && st.State != job.Dead {
		return st, ErrNotRevivable
	}
	if err := s.Client.SignalWorkflow(ctx, id, "", workflows.SignalRevive, nil); err != nil {
		return st, notFound(id, fmt.Errorf("revive job %s: %w", id, err))
	}
	return st, nil
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

// Await polls the job's status until it settles or ctx ends; a job that
// cannot be asked for a while (workers restarting) is waited for, not
// failed.
func (s *Service) Await(ctx context.Context, id string) (workflows.Status, error) {
	wait := 50 * time.Millisecond
	for {
		qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		st, err := s.Status(qctx, id)
		cancel()
		switch {
		case err == nil && st.State.Settled():
			return st, nil
		case errors.Is(err, ErrNotFound):
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
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
