package jobctl

import (
	"context"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/workflows"
)

// Scenario: A job that ended outside its own rules is read as dead at the step it was in
func TestClosedJobKeepsItsFailureStep(t *testing.T) {
	state, err := converter.GetDefaultDataConverter().ToPayload(string(job.Transcribing))
	if err != nil {
		t.Fatal(err)
	}
	start, end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	desc := &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "cli-1", RunId: "r"},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
		StartTime: timestamppb.New(start), CloseTime: timestamppb.New(end),
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			workflows.StateKey.GetName(): state,
		}},
	}}
	st, err := (&Service{}).fromHistory(context.Background(), "cli-1", desc)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != job.Dead || st.Failure == nil || st.Failure.Step != job.Transcribing || st.Failure.Kind != job.Internal {
		t.Errorf("status = %s, failure %+v; want dead with an internal failure at transcribing", st.State, st.Failure)
	}
	if !st.FinishedAt.Equal(end) || !st.AcceptedAt.Equal(start) {
		t.Errorf("times = %v .. %v", st.AcceptedAt, st.FinishedAt)
	}
}
