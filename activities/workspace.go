package activities

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/blob"
)

// workDir makes a private directory for one step's temporary files.
func (a *Activities) workDir() (string, func(), error) {
	base := a.WorkDir
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o750); err != nil {
		return "", nil, fmt.Errorf("work dir: %w", err)
	}
	dir, err := os.MkdirTemp(base, "step-*")
	if err != nil {
		return "", nil, fmt.Errorf("work dir: %w", err)
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

// localCopy returns a local file with the blob's bytes: the blob itself when
// the store is a local directory, else a copy in dir.
func (a *Activities) localCopy(ctx context.Context, key, dir string) (string, error) {
	if lp, ok := a.Blobs.(localPather); ok {
		p, err := lp.Path(key)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("blob %s: %w", key, err)
		}
		return p, nil
	}
	r, err := a.Blobs.Open(ctx, key)
	if err != nil {
		return "", err
	}
	defer r.Close()
	p := filepath.Join(dir, "blob"+filepath.Ext(key))
	f, err := os.Create(p)
	if err != nil {
		return "", fmt.Errorf("copy blob %s: %w", key, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("copy blob %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("copy blob %s: %w", key, err)
	}
	return p, nil
}

// byType gives the engine the audio under a name whose extension is its
// type, with its media type: the audio may be the original, sent as it is,
// whose key carries whatever extension its intake chose (or none), and
// engines tell servers the type by the name. A file whose bytes tell no
// known type keeps its name.
func byType(path, dir string) (string, string, error) {
	t, ok := audio.Detect(path)
	if !ok {
		return path, "", nil
	}
	if strings.EqualFold(filepath.Ext(path), t.Ext) {
		return path, t.MIME, nil
	}
	target, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("name the audio by its type: %w", err)
	}
	named := filepath.Join(dir, "audio"+t.Ext)
	if err := os.Symlink(target, named); err != nil {
		return "", "", fmt.Errorf("name the audio by its type: %w", err)
	}
	return named, t.MIME, nil
}

func (a *Activities) putFile(ctx context.Context, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	defer func() { _ = f.Close() }() // only read
	if _, err := a.Blobs.Put(ctx, key, f); err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	return nil
}

// attemptKey names an object written by this attempt of this step. An
// attempt that lost its lease but still runs (a frozen worker that wakes up)
// writes beside the attempt that replaced it, never over it; the workflow
// refers only to the keys of the result it accepted, so a late result is
// stored but never applied.
func attemptKey(ctx context.Context, name string) string {
	info := activity.GetInfo(ctx)
	return blob.JobKey(info.WorkflowExecution.ID, fmt.Sprintf("%s-%s-%d/%s",
		info.WorkflowExecution.RunID, info.ActivityID, info.Attempt, name))
}
