package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
)

// RemoveInput asks for a closed job's stored objects to be removed.
type RemoveInput struct {
	Call
}

// RemoveOutput says how many objects were removed.
type RemoveOutput struct {
	Objects int `json:"objects"`
}

// RemoveRecordings removes the original, the converted audio, the chunks,
// the engine's raw answers and the transcripts of the calling job, once its
// retention has passed. Retried, it removes what is left.
func (a *Activities) RemoveRecordings(ctx context.Context, in RemoveInput) (RemoveOutput, error) {
	jobID := activity.GetInfo(ctx).WorkflowExecution.ID
	n, err := a.Blobs.DeleteJob(ctx, jobID)
	if err != nil {
		return RemoveOutput{}, classify(ctx, in.Call, fmt.Errorf("remove recordings: %w", err))
	}
	activity.GetLogger(ctx).Info("recordings and transcripts removed after retention", "objects", n)
	return RemoveOutput{Objects: n}, nil
}
