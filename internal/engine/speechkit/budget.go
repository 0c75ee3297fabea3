package speechkit

import (
	"sync"
	"time"
)

// ChecksPerHour is the share of SpeechKit's quota of 2,500 operation status
// checks an hour per folder that this process spends on checks; the rest
// is room for the result fetches and for a clock that runs a little apart
// from Yandex Cloud's.
const ChecksPerHour = 2400

// budget spreads one folder's hourly quota of operation checks over the
// operations this process has running there. Each operation is checked
// every max(poll interval, operations × hour / ChecksPerHour), so that the
// sum of the rates of all of them stays under the quota however many jobs
// or chunks are in recognition at once; a 429 pauses every check of the
// folder until its Retry-After has passed.
//
// The budget is shared by every Engine of the process that uses the same
// operation service, folder and credentials (the several workers of `up`,
// an engine built again on a configuration reload), because the quota is
// the folder's, not the engine value's. It does not cover several
// processes against one folder: each counts only its own operations, so
// with k of them the operator must raise the poll interval to k times
// what one process needs, or give each process its own folder.
type budget struct {
	mu sync.Mutex
	// ops maps the operations in recognition to when they stop counting
	// unless they are checked again: an operation whose job was cancelled
	// or moved to another worker is never told done here, and must not
	// slow the others' checks forever.
	ops map[string]time.Time
	// pausedUntil is the end of the wait the last 429 asked for.
	pausedUntil time.Time
}

var budgets = struct {
	mu sync.Mutex
	m  map[string]*budget
}{m: map[string]*budget{}}

// sharedBudget returns the process's budget for the folder that key names.
func sharedBudget(key string) *budget {
	budgets.mu.Lock()
	defer budgets.mu.Unlock()
	b, ok := budgets.m[key]
	if !ok {
		b = &budget{ops: map[string]time.Time{}}
		budgets.m[key] = b
	}
	return b
}

// interval is the wait between two checks of one operation now.
func (b *budget) interval(now time.Time, base time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.intervalLocked(now, base)
}

func (b *budget) intervalLocked(now time.Time, base time.Duration) time.Duration {
	for id, until := range b.ops {
		if now.After(until) {
			delete(b.ops, id)
		}
	}
	iv := max(base, time.Duration(len(b.ops))*time.Hour/ChecksPerHour)
	return max(iv, b.pausedUntil.Sub(now))
}

// running counts the operation as in recognition until it has had time
// for its next check, which comes after wait or the shared interval,
// whichever is longer; it returns that wait.
func (b *budget) running(id string, now time.Time, base, wait time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Counted first, so that the interval it gets already includes it.
	b.ops[id] = now.Add(time.Hour)
	wait = max(wait, b.intervalLocked(now, base))
	// Twice the wait and a minute: a check delayed by a busy worker or a
	// retried attempt still finds the operation counted.
	b.ops[id] = now.Add(2*wait + time.Minute)
	return wait
}

// finished stops counting an operation that is done, failed or gone.
func (b *budget) finished(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.ops, id)
}

// pause holds every check of the folder back for d.
func (b *budget) pause(now time.Time, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until := now.Add(d); until.After(b.pausedUntil) {
		b.pausedUntil = until
	}
}

// paused is what is left of the wait the last 429 asked for.
func (b *budget) paused(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.pausedUntil.Sub(now), 0)
}
