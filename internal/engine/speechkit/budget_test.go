package speechkit

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/speechkit/speechkittest"
)

// quota is the documented hourly limit of operation checks per folder.
const quota = 2500

// fakeClock is shared by the engines under test, so that hours of checks
// run in a moment.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// defaultEngine is an engine with the default poll interval on clock.
func defaultEngine(t *testing.T, srv *speechkittest.Server, clock *fakeClock) *Engine {
	t.Helper()
	e, err := New(Config{BaseURL: srv.URL(), OperationsURL: srv.OperationsURL(), APIKey: testKey}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.now = clock.now
	return e
}

// Scenario: Concurrent operations share SpeechKit's hourly quota of checks
func TestChecksShareTheQuota(t *testing.T) {
	for _, n := range []int{1, 10, 40, 100} {
		t.Run(fmt.Sprintf("%d operations", n), func(t *testing.T) {
			srv := newStandIn(t)
			srv.NeverFinish()
			clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			// Two engines of one process, as two workers build them: the
			// quota is the folder's, so they must share it.
			engines := []*Engine{defaultEngine(t, srv, clock), defaultEngine(t, srv, clock)}
			path, _ := writeAudio(t, 1024)
			ids := make([]string, n)
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					sub, err := engines[i%2].Submit(context.Background(), engine.Request{AudioPath: path, Language: "ru", Duration: time.Minute})
					if err != nil {
						errs <- err
						return
					}
					ids[i] = sub.OperationID
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("Submit: %v", err)
			}
			// Each operation is checked as the workflow does it: first after
			// FirstCheck, then after what each check answers.
			start := clock.now()
			next := make([]time.Time, n)
			for i := range next {
				next[i] = start.Add(engines[i%2].FirstCheck(time.Minute))
			}
			var checks []time.Time
			end := start.Add(3 * time.Hour)
			for {
				i := 0
				for k := range next {
					if next[k].Before(next[i]) {
						i = k
					}
				}
				if next[i].After(end) {
					break
				}
				clock.set(next[i])
				e := engines[i%2]
				sub, err := e.Check(context.Background(), ids[i])
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				checks = append(checks, next[i])
				next[i] = next[i].Add(max(e.PollInterval(), sub.CheckAfter))
			}
			if got := srv.Checks(); got != len(checks) {
				t.Fatalf("stand-in counted %d checks; want %d", got, len(checks))
			}
			sort.Slice(checks, func(a, b int) bool { return checks[a].Before(checks[b]) })
			worst, j := 0, 0
			for i := range checks {
				for checks[i].Sub(checks[j]) >= time.Hour {
					j++
				}
				worst = max(worst, i-j+1)
			}
			if worst > quota {
				t.Errorf("%d operations made %d checks in one hour; want at most %d", n, worst, quota)
			}
			// The share must not starve a lone operation either: it is
			// checked at the configured interval.
			if n == 1 && worst < int(time.Hour/DefaultPollInterval) {
				t.Errorf("one operation was checked %d times an hour; want %d", worst, time.Hour/DefaultPollInterval)
			}
		})
	}
}

// Scenario: Operations that finish stop counting against the quota
func TestFinishedOperationsFreeTheQuota(t *testing.T) {
	srv := newStandIn(t)
	srv.SetRunningChecks(0)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := defaultEngine(t, srv, clock)
	path, _ := writeAudio(t, 1024)
	var ids []string
	for range 30 {
		sub, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "ru"})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		ids = append(ids, sub.OperationID)
	}
	if got, want := e.PollInterval(), 30*time.Hour/ChecksPerHour; got != want {
		t.Errorf("interval with 30 operations = %v; want %v", got, want)
	}
	for _, id := range ids {
		if sub, err := e.Check(context.Background(), id); err != nil || !sub.Done() {
			t.Fatalf("Check = %+v, %v; want done", sub, err)
		}
	}
	if got := e.PollInterval(); got != DefaultPollInterval {
		t.Errorf("interval once all are done = %v; want %v", got, DefaultPollInterval)
	}
	// An operation abandoned without a last check (its job cancelled)
	// stops counting once it has missed its checks.
	if _, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "ru"}); err != nil {
		t.Fatal(err)
	}
	clock.set(clock.now().Add(time.Hour + time.Minute))
	if got := e.PollInterval(); got != DefaultPollInterval {
		t.Errorf("interval after an operation was abandoned = %v; want %v", got, DefaultPollInterval)
	}
}

// Scenario: A 429 on a check is a wait, not a failure
func TestCheckRefusedForNowIsAWait(t *testing.T) {
	for _, tc := range []struct {
		name, path, retryAfter string
		runningChecks          int
		want                   time.Duration
	}{
		{name: "operation check with Retry-After", path: "/operations/", retryAfter: "40", runningChecks: 5, want: 40 * time.Second},
		{name: "operation check without a hint", path: "/operations/", runningChecks: 5, want: DefaultPollInterval},
		{name: "results request", path: "/stt/v3/getRecognition", retryAfter: "90", want: 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newStandIn(t)
			srv.SetRunningChecks(tc.runningChecks)
			clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			e := defaultEngine(t, srv, clock)
			path, _ := writeAudio(t, 1024)
			first, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "ru"})
			if err != nil {
				t.Fatal(err)
			}
			other, err := e.Submit(context.Background(), engine.Request{AudioPath: path, Language: "ru"})
			if err != nil {
				t.Fatal(err)
			}
			srv.FailNext(tc.path, 1, 429, `{"code":8,"message":"Quota exceeded for status checks"}`, tc.retryAfter)
			sub, err := e.Check(context.Background(), first.OperationID)
			if err != nil {
				t.Fatalf("Check: %v; want a running operation", err)
			}
			if sub.Done() || sub.OperationID != first.OperationID {
				t.Fatalf("Check = %+v; want operation %s still running", sub, first.OperationID)
			}
			if sub.CheckAfter < tc.want {
				t.Errorf("CheckAfter = %v; want at least %v", sub.CheckAfter, tc.want)
			}
			// The quota is the folder's: the other operation waits as long,
			// and so does the first check of a new one.
			if got := e.PollInterval(); got < tc.want {
				t.Errorf("interval of the other operations = %v; want at least %v", got, tc.want)
			}
			if got := e.FirstCheck(time.Second); got < tc.want {
				t.Errorf("first check of a new operation after %v; want at least %v", got, tc.want)
			}
			clock.set(clock.now().Add(sub.CheckAfter))
			if got := e.PollInterval(); got != DefaultPollInterval {
				t.Errorf("interval once the wait is over = %v; want %v", got, DefaultPollInterval)
			}
			if _, err := e.Check(context.Background(), other.OperationID); err != nil {
				t.Errorf("check after the wait: %v", err)
			}
		})
	}
}
