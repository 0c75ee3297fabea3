package workflows

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// split is a conversion whose audio came out in three chunks.
var split = activities.ConvertOutput{AudioKey: "jobs/j/audio.flac", Duration: 90 * time.Second, Chunks: []activities.Chunk{
	{AudioKey: "jobs/j/chunk-0.flac", Offset: 0, Duration: 31 * time.Second},
	{AudioKey: "jobs/j/chunk-1.flac", Offset: 31 * time.Second, Duration: 29 * time.Second},
	{AudioKey: "jobs/j/chunk-2.flac", Offset: 60 * time.Second, Duration: 30 * time.Second},
}}

func chunkIndex(key string) int {
	for i, c := range split.Chunks {
		if c.AudioKey == key {
			return i
		}
	}
	return -1
}

func chunkDone(i int) activities.Recognition {
	return activities.Recognition{Done: true, TranscriptKey: fmt.Sprintf("jobs/j/t%d.json", i), Language: "en", Words: 3}
}

var merged = activities.Recognition{Done: true, TranscriptKey: "jobs/j/transcript.json", Language: "en", Words: 9}

// mergedInOrder matches the merge of the three chunks, in order, with
// their offsets.
func mergedInOrder(in activities.MergeInput) bool {
	if len(in.Parts) != 3 || in.Duration != split.Duration {
		return false
	}
	for i, p := range in.Parts {
		if p.TranscriptKey != chunkDone(i).TranscriptKey || p.Offset != split.Chunks[i].Offset {
			return false
		}
	}
	return true
}

// Scenario: Chunks are recognised in parallel, retried alone, and merged in order
func (s *workflowSuite) Test_ChunksRecognisedInParallelAndMerged() {
	in := testInput()
	in.Source, in.Recipient, in.Engine = job.SourceCLI, nil, "openai"
	var (
		mu      sync.Mutex
		started = map[int][]time.Time{}
		queues  = map[string]bool{}
	)
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(split, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(in activities.RecognizeInput) bool {
		return in.Chunk && in.Engine == "openai"
	})).Return(func(ctx context.Context, in activities.RecognizeInput) (activities.Recognition, error) {
		mu.Lock()
		defer mu.Unlock()
		i := chunkIndex(in.AudioKey)
		started[i] = append(started[i], s.env.Now())
		queues[activity.GetInfo(ctx).TaskQueue] = true
		if i == 1 && len(started[i]) < 3 {
			return activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))
		}
		if in.Duration != split.Chunks[i].Duration {
			return activities.Recognition{}, fmt.Errorf("chunk %d got duration %v", i, in.Duration)
		}
		return chunkDone(i), nil
	}).After(time.Minute).Times(5)
	s.env.OnActivity(a.MergeTranscripts, mock.Anything, mock.MatchedBy(mergedInOrder)).Return(merged, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	r := s.result()
	s.Equal(job.Done, r.State)
	s.Equal(merged.TranscriptKey, r.TranscriptKey)
	s.Len(started[0], 1, "chunk 1 is recognised once")
	s.Len(started[1], 3, "only the failing chunk is retried")
	s.Len(started[2], 1, "chunk 3 is recognised once")
	s.Equal(started[0][0], started[2][0], "the chunks start together")
	s.Equal(started[0][0], started[1][0], "the chunks start together")
	s.Equal(map[string]bool{EngineTaskQueue("openai"): true}, queues, "engine steps run on the engine's task queue")
	st := s.status()
	s.Equal(3, st.ChunksDone)
	s.Len(st.Chunks, 3)
	s.Equal(9, st.Words)
}

// Scenario: A chunk that runs out of attempts makes the job dead, and revive recognises only that chunk
func (s *workflowSuite) Test_DeadChunkRevivesAlone() {
	in := testInput()
	in.Source, in.Recipient, in.Engine = job.SourceCLI, nil, "openai"
	in.Policy.MaxAttempts = 2
	healthy := false
	var mu sync.Mutex
	calls := map[int]int{}
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(split, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecognizeInput) (activities.Recognition, error) {
			mu.Lock()
			defer mu.Unlock()
			i := chunkIndex(in.AudioKey)
			calls[i]++
			if i == 1 && !healthy {
				return activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))
			}
			return chunkDone(i), nil
		})
	s.env.OnActivity(a.MergeTranscripts, mock.Anything, mock.MatchedBy(mergedInOrder)).Return(merged, nil).Once()
	var parked Status
	s.env.RegisterDelayedCallback(func() {
		parked = s.status()
		mu.Lock()
		healthy = true
		mu.Unlock()
		s.env.SignalWorkflow(SignalRevive, nil)
	}, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Dead, parked.State)
	s.Require().NotNil(parked.Failure)
	s.Equal("chunk 2 of 3: engine answered 503", parked.Failure.Message)
	s.Equal(2, parked.ChunksDone, "the other chunks keep their results")
	s.Equal(job.Done, s.result().State)
	s.Equal(map[int]int{0: 1, 1: 3, 2: 1}, calls, "after revive only the dead chunk runs again")
}

// Scenario: A chunk without speech is an empty part, not a failure
func (s *workflowSuite) Test_SilentChunkIsEmptyPart() {
	in := testInput()
	in.Source, in.Recipient = job.SourceCLI, nil
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(split, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(in activities.RecognizeInput) bool { return in.Chunk })).Return(
		func(_ context.Context, in activities.RecognizeInput) (activities.Recognition, error) {
			i := chunkIndex(in.AudioKey)
			r := chunkDone(i)
			if i == 1 {
				r.Words = 0
			}
			return r, nil
		}).Times(3)
	s.env.OnActivity(a.MergeTranscripts, mock.Anything, mock.MatchedBy(mergedInOrder)).Return(merged, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
}

// Scenario: Chunk operations are polled and carried across continue-as-new
func (s *workflowSuite) Test_ChunkOperationsContinueAsNew() {
	in := testInput()
	in.Source, in.Recipient, in.Engine = job.SourceCLI, nil, "speechkit"
	running := func(i int) activities.Recognition {
		return activities.Recognition{OperationID: fmt.Sprintf("op-%d", i), PollAfter: time.Minute, FirstCheckAfter: 5 * time.Minute}
	}
	var firstCheck []time.Time
	submitted := s.env.Now()
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(split, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecognizeInput) (activities.Recognition, error) {
			i := chunkIndex(in.AudioKey)
			if i == 0 {
				return chunkDone(0), nil
			}
			return running(i), nil
		}).Times(3)
	var mu sync.Mutex
	checks := 0
	s.env.OnActivity(a.CheckRecognition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CheckInput) (activities.Recognition, error) {
			mu.Lock()
			defer mu.Unlock()
			checks++
			if checks <= 2 {
				firstCheck = append(firstCheck, s.env.Now())
			}
			if checks == 3 {
				s.env.SetContinueAsNewSuggested(true)
			}
			return activities.Recognition{OperationID: in.OperationID, PollAfter: time.Minute}, nil
		})

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Require().True(s.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &can)
	for _, at := range firstCheck {
		s.Equal(5*time.Minute, at.Sub(submitted), "the first check waits as long as the engine asked")
	}
	var next Input
	s.Require().NoError(converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	st := *next.Resume
	s.Require().Len(st.Chunks, 3)
	s.Equal(chunkDone(0).TranscriptKey, st.Chunks[0].TranscriptKey)
	s.Equal("op-1", st.Chunks[1].OperationID)
	s.Equal("op-2", st.Chunks[2].OperationID)
	s.Equal(1, st.ChunksDone)

	// The new run checks the chunks' operations; nothing is submitted again.
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.CheckRecognition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CheckInput) (activities.Recognition, error) {
			var i int
			_, _ = fmt.Sscanf(in.OperationID, "op-%d", &i)
			return chunkDone(i), nil
		}).Times(2)
	env.OnActivity(a.MergeTranscripts, mock.Anything, mock.MatchedBy(mergedInOrder)).Return(merged, nil).Once()
	env.ExecuteWorkflow(TranscribeRecording, next)
	s.Require().True(env.IsWorkflowCompleted())
	s.Require().NoError(env.GetWorkflowError())
	env.AssertExpectations(s.T())
}

// Scenario: The fallback engine takes a job its engine gave up on
func (s *workflowSuite) Test_FallbackTakesDeadJob() {
	in := testInput()
	in.Source, in.Recipient, in.Engine, in.Fallback = job.SourceCLI, nil, "openai", "local"
	in.Policy.MaxAttempts = 2
	s.env.OnActivity(a.Convert, mock.Anything, mock.MatchedBy(func(in activities.ConvertInput) bool { return in.Engine == "openai" })).
		Return(activities.ConvertOutput{AudioKey: "jobs/j/audio.flac", Duration: 3 * time.Second}, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(in activities.RecognizeInput) bool { return in.Engine == "openai" })).
		Return(activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))).Times(2)
	s.env.OnActivity(a.Convert, mock.Anything, mock.MatchedBy(func(in activities.ConvertInput) bool { return in.Engine == "local" })).
		Return(converted, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.MatchedBy(func(in activities.RecognizeInput) bool {
		return in.Engine == "local" && in.AudioKey == converted.AudioKey
	})).Return(recognized, nil).Once()

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	st := s.status()
	s.Equal("local", st.Engine, "the job names the engine that produced the text")
	s.Equal("openai", st.FallbackFrom)
	s.Nil(st.Failure)
}

// Scenario: Without a fallback, or after it was used, a dead engine parks the job
func (s *workflowSuite) Test_FallbackIsUsedOnce() {
	in := testInput()
	in.Source, in.Recipient, in.Engine, in.Fallback = job.SourceCLI, nil, "openai", "local"
	in.Policy.MaxAttempts = 1
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Twice()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).
		Return(activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))).Twice()
	var parked Status
	s.env.RegisterDelayedCallback(func() { parked = s.status() }, time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Dead, parked.State)
	s.Equal("local", parked.Engine)
	s.Equal("openai", parked.FallbackFrom)
}

// Scenario: Each chunk keeps its raw answer and the job names the list of them
func (s *workflowSuite) Test_ChunksKeepTheirRawAnswers() {
	in := testInput()
	in.Source, in.Recipient = job.SourceCLI, nil
	// Retention keeps the closed run answering the status query.
	in.Policy.Retain = 48 * time.Hour
	rawOf := func(i int) string { return fmt.Sprintf("jobs/j/raw-%d.json", i) }
	s.env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(split, nil).Once()
	s.env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecognizeInput) (activities.Recognition, error) {
			i := chunkIndex(in.AudioKey)
			rec := chunkDone(i)
			rec.RawKey = rawOf(i)
			return rec, nil
		}).Times(3)
	withRaw := merged
	withRaw.RawKey = "jobs/j/raw-chunks.json"
	s.env.OnActivity(a.MergeTranscripts, mock.Anything, mock.MatchedBy(func(in activities.MergeInput) bool {
		for i, p := range in.Parts {
			if p.RawKey != rawOf(i) {
				return false
			}
		}
		return mergedInOrder(in)
	})).Return(withRaw, nil).Once()
	s.env.OnActivity(a.RemoveRecordings, mock.Anything, mock.Anything).Return(activities.RemoveOutput{}, nil).Once()
	var st Status
	s.env.RegisterDelayedCallback(func() { st = s.status() }, 24*time.Hour)

	s.env.ExecuteWorkflow(TranscribeRecording, in)

	s.Equal(job.Done, s.result().State)
	s.Require().Len(st.Chunks, 3)
	for i, c := range st.Chunks {
		s.Equal(rawOf(i), c.RawKey, "chunk %d", i)
	}
	s.Equal(withRaw.RawKey, st.RawKey)
}
