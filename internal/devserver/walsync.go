package devserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// walSync makes what the embedded server has committed to its SQLite
// write-ahead log durable before the frontend answers a call. SQLite runs
// with synchronous=normal: a commit reaches the operating system but is not
// synced, so the one connection all services share is never held through
// an fsync. Each answer of the frontend then waits for an fsync of the log
// that began after the call's own writes, and calls that finish together
// share it, as in a database's group commit. A client is thus never told of
// a start, signal, update or completion that a power cut could take back,
// as with synchronous=full, for a fraction of the fsyncs: under a burst of
// uploads the server spent most of its time waiting on one fsync per
// commit.
//
// SQLite itself syncs the log before each checkpoint and when it begins to
// reuse it, so syncing the log file is all a commit needs.
type walSync struct {
	sync func() error
	reqs chan chan error
	// failed is the first error of sync. It stays: after a failed fsync
	// the kernel may have dropped the dirty pages, and a later fsync that
	// succeeds proves nothing about them.
	failed error
	syncs  atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

// newWALSync syncs the write-ahead log of the SQLite file database. The
// path is made absolute first, as SQLite makes it when it opens the file: a
// log looked for in the wrong place would be taken for one that SQLite had
// removed, and never synced.
func newWALSync(database string) (*walSync, error) {
	abs, err := filepath.Abs(database)
	if err != nil {
		return nil, fmt.Errorf("devserver database %s: %w", database, err)
	}
	return startWALSync(func() error { return syncFile(abs + "-wal") }), nil
}

func startWALSync(sync func() error) *walSync {
	w := &walSync{sync: sync, reqs: make(chan chan error, 256), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *walSync) loop() {
	defer close(w.done)
	var batch []chan error
	for {
		select {
		case r := <-w.reqs:
			batch = append(batch[:0], r)
		case <-w.stop:
			return
		}
		// Every call waiting now has committed its writes, and one fsync
		// covers them all. A call that arrives during the fsync waits for
		// the next one: its writes may have missed this one.
	drain:
		for {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if w.failed == nil {
			w.failed = w.sync()
			w.syncs.Add(1)
		}
		for _, r := range batch {
			r <- w.failed
		}
	}
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		// No log: SQLite has checkpointed it into the database, synced,
		// and removed it.
		return nil
	}
	if err == nil {
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

var errStopping = errors.New("the embedded server is stopping")

// wait returns once everything committed before it was called is on disk.
func (w *walSync) wait(ctx context.Context) error {
	r := make(chan error, 1)
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		return errStopping
	}
	select {
	case err := <-r:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		// A request taken just before the stop is answered; one still
		// queued is not.
		select {
		case err := <-r:
			return err
		default:
			return errStopping
		}
	}
}

func (w *walSync) close() {
	close(w.stop)
	<-w.done
}

// interceptor holds every answer of the frontend, reads included, until
// what the server had written by then is durable; a call that failed may
// have written too, so it waits as well. When the log cannot be synced the
// call fails as unavailable, which Temporal's clients retry.
func (w *walSync) interceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if serr := w.wait(ctx); serr != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Error(codes.Unavailable, "the embedded server cannot make its writes durable: "+serr.Error())
	}
	return resp, err
}
