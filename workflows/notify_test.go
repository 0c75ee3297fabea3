package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

func notifyEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(TranscribeRecording, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&activities.Activities{})
	env.RegisterActivity(&activities.Notifier{})
	t.Cleanup(func() { env.AssertExpectations(t) })
	return env
}

func httpInput(webhook string) Input {
	in := testInput()
	in.Source, in.Recipient, in.WebhookURL = job.SourceHTTP, nil, webhook
	return in
}

// notices records what the notify step was asked to send.
type notices struct {
	mu   sync.Mutex
	sent []activities.NotifyInput
}

func (n *notices) record(_ context.Context, in activities.NotifyInput) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, in)
	return nil
}

func TestDoneJobNotifiesItsWebhook(t *testing.T) {
	env := notifyEnv(t)
	env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	var n notices
	env.OnActivity(notifier.Notify, mock.Anything, mock.Anything).Return(n.record).Once()

	env.ExecuteWorkflow(TranscribeRecording, httpInput("https://example.com/hook"))

	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(n.sent) != 1 {
		t.Fatalf("notices = %+v; want one", n.sent)
	}
	ev := n.sent[0]
	if ev.URL != "https://example.com/hook" || ev.Event.State != job.Done || ev.Event.Type != "job.done" ||
		ev.Event.Source != job.SourceHTTP || ev.Event.Failure != nil || ev.Event.Links["transcript"] == "" {
		t.Errorf("notice = %+v", ev)
	}
}

func TestJobWithoutWebhookSchedulesNoNotice(t *testing.T) {
	env := notifyEnv(t)
	env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(recognized, nil).Once()
	var n notices
	env.OnActivity(notifier.Notify, mock.Anything, mock.Anything).Return(n.record).Maybe()

	env.ExecuteWorkflow(TranscribeRecording, httpInput(""))

	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(n.sent) != 0 {
		t.Errorf("notices = %+v; want none without a webhook URL", n.sent)
	}
}

// A receiver that is down while the job is dead neither fails the job nor
// holds up its revive; the revived job's success is notified too.
func TestUndeliverableNoticeDoesNotHoldUpRevive(t *testing.T) {
	env := notifyEnv(t)
	in := httpInput("https://example.com/hook")
	in.Policy.MaxAttempts = 2
	healthy := false
	env.OnActivity(a.Convert, mock.Anything, mock.Anything).Return(converted, nil).Once()
	env.OnActivity(a.Recognize, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RecognizeInput) (activities.Recognition, error) {
			if healthy {
				return recognized, nil
			}
			return activities.Recognition{}, temporal.NewApplicationError("engine answered 503", string(job.ServiceError))
		}).Times(3)
	var n notices
	deadNotices := 0
	env.OnActivity(notifier.Notify, mock.Anything, mock.MatchedBy(func(in activities.NotifyInput) bool {
		return in.Event.State == job.Dead
	})).Return(func(context.Context, activities.NotifyInput) error {
		deadNotices++
		return temporal.NewApplicationError("webhook answered 503", string(job.ServiceError))
	})
	env.OnActivity(notifier.Notify, mock.Anything, mock.MatchedBy(func(in activities.NotifyInput) bool {
		return in.Event.State == job.Done
	})).Return(n.record).Once()
	env.RegisterDelayedCallback(func() {
		healthy = true
		env.SignalWorkflow(SignalRevive, nil)
	}, time.Minute)

	env.ExecuteWorkflow(TranscribeRecording, in)

	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := env.GetWorkflowResult(&r); err != nil || r.State != job.Done {
		t.Errorf("result = %+v, %v; want done", r, err)
	}
	if deadNotices < 1 || len(n.sent) != 1 {
		t.Errorf("dead notices tried %d times, done notices %d; want at least one and one", deadNotices, len(n.sent))
	}
}

// Input and Status keep the JSON name the webhook URL had first: running
// jobs carry it in their histories and the status query's callers read it.
func TestWebhookURLKeepsItsJSONName(t *testing.T) {
	const recorded = `{"callback_url":"https://example.com/hook"}`
	var in Input
	var st Status
	for _, v := range []any{&in, &st} {
		if err := json.Unmarshal([]byte(recorded), v); err != nil {
			t.Fatal(err)
		}
	}
	if in.WebhookURL != "https://example.com/hook" || st.WebhookURL != in.WebhookURL {
		t.Errorf("decoded %q and %q; want the recorded URL in both", in.WebhookURL, st.WebhookURL)
	}
	if b, _ := json.Marshal(Input{WebhookURL: "u"}); !strings.Contains(string(b), `"callback_url":"u"`) {
		t.Errorf("encoded %s; want callback_url", b)
	}
}
