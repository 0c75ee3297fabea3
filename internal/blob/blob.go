// Package blob stores the bytes of a job — the original recording, the
// converted audio, transcripts and raw engine responses — under string keys,
// so that workflows and activities exchange keys and never the bytes.
//
// Two stores implement Store: Local keeps files in a directory of this
// machine, S3 keeps objects in a bucket of any S3-compatible service, so
// that workers on several machines share one store. OpenStore picks one
// from a location such as "/var/lib/transcriber/blobs" or
// "s3://bucket/prefix".
//
// The S3 store speaks through aws-sdk-go-v2 rather than minio-go: the
// embedded Temporal server already links the SDK's S3 client for its
// archiver, so it costs the binary nothing, and it is the reference client
// of the protocol that S3-compatible services are tested against.
package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNotFound is returned for a key that holds nothing.
var ErrNotFound = errors.New("blob not found")

// JobKey names an object that belongs to a job. Job ids come from outside
// (idempotency keys, chat ids), so an id that is not plainly safe as a path
// segment is replaced by its hash.
func JobKey(jobID, name string) string {
	return "jobs/" + safeSegment(jobID) + "/" + name
}

// hashPrefix starts every hashed segment. Ids that start with it are hashed
// too: kept verbatim, an id could copy another id's hash and share its jobs.
const hashPrefix = "h-"

func safeSegment(s string) string {
	if s != "" && len(s) <= 128 && s != "." && s != ".." && !strings.HasPrefix(s, hashPrefix) && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hashPrefix + hex.EncodeToString(sum[:16])
}

// Store keeps bytes under keys. A key is valid when ValidKey says so; every
// method refuses other keys before touching storage.
type Store interface {
	// Put stores everything r yields under key, replacing what was there,
	// and returns the number of bytes stored. The object appears whole or
	// not at all: a failed or cancelled Put leaves the previous object, or
	// none, and returns 0.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Open streams the object at key; a key that holds nothing gives an
	// error that wraps ErrNotFound.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Size is the length of the object at key, or an error wrapping
	// ErrNotFound.
	Size(ctx context.Context, key string) (int64, error)
	// Delete removes the object at key; a key that holds nothing succeeds.
	Delete(ctx context.Context, key string) error
	// DeleteJob removes every object stored under JobKey(jobID, …) and
	// returns how many; removing a job with nothing stored succeeds.
	DeleteJob(ctx context.Context, jobID string) (int, error)
	// String names where the store keeps its objects, for messages; it
	// never holds credentials.
	String() string
}

var (
	_ Store = (*Local)(nil)
	_ Store = (*S3)(nil)
)

// ValidKey reports whether key is a relative slash-separated path without
// empty, "." or ".." segments.
func ValidKey(key string) bool {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		return false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// Local keeps blobs as files under a root directory.
type Local struct {
	root string
}

// NewLocal opens (creating if needed) a store rooted at dir.
func NewLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("blob store %s: %w", dir, err)
	}
	return &Local{root: abs}, nil
}

// Root is the directory the store writes to.
func (s *Local) Root() string { return s.root }

// String is the directory the store writes to.
func (s *Local) String() string { return s.root }

// Path returns the file that holds key. Tools such as ffmpeg read it in
// place instead of from a copy.
func (s *Local) Path(key string) (string, error) {
	if !ValidKey(key) {
		return "", fmt.Errorf("invalid blob key %q", key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put stores everything r yields under key, replacing what was there. The
// object appears whole or not at all: it is written to a temporary file,
// synced, and renamed into place, so a crash never leaves half a recording
// under a valid key.
func (s *Local) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	path, err := s.Path(key)
	if err != nil {
		return 0, err
	}
	dir := filepath.Dir(path)
	if err := s.mkdirSynced(dir); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	f, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		// After the rename the name is free again and may belong to another
		// Put's temporary file by now.
		if !renamed {
			_ = os.Remove(tmp) // cleanup: the Put returns its own error
		}
	}()
	n, err := io.Copy(f, contextReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
		renamed = err == nil
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	return n, nil
}

// Open returns a reader of the object at key.
func (s *Local) Open(_ context.Context, key string) (io.ReadCloser, error) {
	path, err := s.Path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("open %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	// A directory is only the common prefix of other keys; opening it would
	// succeed and then fail on the first read.
	if st, err := f.Stat(); err != nil || st.IsDir() {
		_ = f.Close() // nothing was read
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", key, err)
		}
		return nil, fmt.Errorf("open %s: %w", key, ErrNotFound)
	}
	return f, nil
}

// Size returns the length of the object at key.
func (s *Local) Size(_ context.Context, key string) (int64, error) {
	path, err := s.Path(key)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return 0, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", key, err)
	}
	if st.IsDir() {
		return 0, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	return st.Size(), nil
}

// mkdirSynced creates dir and the directories above it up to the root,
// syncing the parent of each one it creates: a new directory's name is an
// entry in its parent, which a sync of the directory itself does not
// promise to keep across a power cut.
func (s *Local) mkdirSynced(dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if dir == s.root || parent == dir {
		// The root was removed under the store, which made it once.
		return os.MkdirAll(dir, 0o750)
	}
	if err := s.mkdirSynced(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// syncDir is a variable so that a test can see which directories are
// synced, which no test can tell from the files.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	// The directory is opened only to sync it: Sync's error is the one
	// that matters.
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// contextReader stops a long copy when its context ends.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
