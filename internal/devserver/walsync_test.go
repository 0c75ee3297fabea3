package devserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gatedSync is a log sync that the test lets finish one at a time.
type gatedSync struct {
	started chan struct{}
	release chan error
	calls   atomic.Int32
}

func newGatedSync() *gatedSync {
	return &gatedSync{started: make(chan struct{}, 16), release: make(chan error)}
}

func (g *gatedSync) sync() error {
	g.calls.Add(1)
	g.started <- struct{}{}
	return <-g.release
}

func waitAsync(w *walSync) <-chan error {
	done := make(chan error, 1)
	go func() { done <- w.wait(context.Background()) }()
	return done
}

func stillWaiting(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("wait returned (%v) before a sync that began after it", err)
	default:
	}
}

func recv(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return")
		return nil
	}
}

// Scenario: An answer of the all-in-one server waits for a sync of its log that began after the call, shared with the calls answered with it
func TestWALSyncAnswersAfterASyncThatBeganLater(t *testing.T) {
	g := newGatedSync()
	w := startWALSync(g.sync)
	defer w.close()

	first := waitAsync(w)
	<-g.started
	// These two come while the first sync runs: their writes may have
	// missed it, so that sync must not answer them.
	second, third := waitAsync(w), waitAsync(w)
	for len(w.reqs) < 2 {
		time.Sleep(time.Millisecond)
	}
	g.release <- nil
	if err := recv(t, first); err != nil {
		t.Fatalf("first wait: %v", err)
	}
	stillWaiting(t, second)
	stillWaiting(t, third)

	<-g.started
	g.release <- nil
	for _, done := range []<-chan error{second, third} {
		if err := recv(t, done); err != nil {
			t.Fatalf("wait: %v", err)
		}
	}
	if n := g.calls.Load(); n != 2 {
		t.Errorf("three waits took %d syncs; want 2, the second shared by the two that came during the first", n)
	}
}

// Scenario: A log that could not be synced fails every later answer
func TestWALSyncFailureStays(t *testing.T) {
	broken := errors.New("sync temporal.db-wal: input/output error")
	var calls atomic.Int32
	w := startWALSync(func() error {
		if calls.Add(1) == 1 {
			return broken
		}
		return nil
	})
	defer w.close()

	if err := w.wait(context.Background()); !errors.Is(err, broken) {
		t.Fatalf("first wait = %v, want the sync's error", err)
	}
	// The next sync would succeed, but the pages the failed one had may
	// be gone: nothing after it may be called durable.
	if err := w.wait(context.Background()); !errors.Is(err, broken) {
		t.Fatalf("later wait = %v, want the first sync's error", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("syncs after a failed one: %d, want none", n-1)
	}

	var handled atomic.Bool
	_, err := w.interceptor(context.Background(), nil, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) {
		handled.Store(true)
		return "answer", nil
	})
	if !handled.Load() {
		t.Error("the call was not served")
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("answer after a failed sync = %v, want Unavailable", err)
	}
}

func TestWALSyncInterceptorKeepsTheAnswer(t *testing.T) {
	w := startWALSync(func() error { return nil })
	defer w.close()
	resp, err := w.interceptor(context.Background(), nil, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) {
		return "answer", nil
	})
	if resp != "answer" || err != nil {
		t.Errorf("interceptor = %v, %v; want the handler's answer", resp, err)
	}
	refused := status.Error(codes.AlreadyExists, "workflow already started")
	if _, err := w.interceptor(context.Background(), nil, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) {
		return nil, refused
	}); !errors.Is(err, refused) {
		t.Errorf("interceptor error = %v; want the handler's", err)
	}
}

func TestWALSyncStopped(t *testing.T) {
	w := startWALSync(func() error { return nil })
	w.close()
	if err := w.wait(context.Background()); !errors.Is(err, errStopping) {
		t.Errorf("wait after close = %v, want %v", err, errStopping)
	}
}

func TestSyncFile(t *testing.T) {
	dir := t.TempDir()
	if err := syncFile(filepath.Join(dir, "temporal.db-wal")); err != nil {
		t.Errorf("a missing log: %v; SQLite removes it after a checkpoint", err)
	}
	wal := filepath.Join(dir, "present.db-wal")
	if err := os.WriteFile(wal, []byte("frames"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syncFile(wal); err != nil {
		t.Errorf("sync: %v", err)
	}
	if err := syncFile(dir); err == nil {
		t.Error("syncing a directory opened for writing succeeded")
	}
}
