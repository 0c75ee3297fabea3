package activities

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
)

// ConvertInput names the original recording and the engine that will hear it.
type ConvertInput struct {
	Call
	OriginalKey string `json:"original_key"`
	Engine      string `json:"engine"`
}

// ConvertOutput is the normalised audio.
type ConvertOutput struct {
	AudioKey string        `json:"audio_key"`
	Duration time.Duration `json:"duration"`
}

// Convert probes the original and rewrites it in the format the engine
// wants. Input that cannot be decoded, has no sound, or is longer than
// allowed fails the job at once.
func (a *Activities) Convert(ctx context.Context, in ConvertInput) (ConvertOutput, error) {
	out, err := a.convert(ctx, in)
	return out, classify(ctx, in.Call, err)
}

func (a *Activities) convert(ctx context.Context, in ConvertInput) (ConvertOutput, error) {
	rec, err := a.recognizer(in.Engine)
	if err != nil {
		return ConvertOutput{}, err
	}
	work, cleanup, err := a.workDir()
	if err != nil {
		return ConvertOutput{}, err
	}
	defer cleanup()

	src, err := a.localCopy(ctx, in.OriginalKey, work)
	if err != nil {
		return ConvertOutput{}, err
	}
	info, err := a.Audio.Probe(ctx, src)
	if err != nil {
		return ConvertOutput{}, err
	}
	if a.MaxDuration > 0 && info.Duration > a.MaxDuration {
		return ConvertOutput{}, verdict(job.TooLong, fmt.Sprintf(
			"the recording lasts %s; the longest accepted is %s", info.Duration.Round(time.Second), a.MaxDuration))
	}

	f := rec.Format()
	dst := filepath.Join(work, "audio"+f.Ext)
	duration, err := a.Audio.Convert(ctx, src, dst, f, func(done time.Duration) {
		activity.RecordHeartbeat(ctx, done)
	})
	if err != nil {
		return ConvertOutput{}, err
	}
	if a.MaxDuration > 0 && duration > a.MaxDuration {
		return ConvertOutput{}, verdict(job.TooLong, fmt.Sprintf(
			"the recording lasts %s; the longest accepted is %s", duration.Round(time.Second), a.MaxDuration))
	}
	key := attemptKey(ctx, "audio"+f.Ext)
	if err := a.putFile(ctx, key, dst); err != nil {
		return ConvertOutput{}, err
	}
	return ConvertOutput{AudioKey: key, Duration: duration}, nil
}

func (a *Activities) recognizer(name string) (Recognizer, error) {
	rec, ok := a.Engines[name]
	if !ok {
		return nil, verdict(job.EngineNotConfigured, fmt.Sprintf(
			"engine %q is not configured on this worker", name))
	}
	return rec, nil
}

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

func (a *Activities) putFile(ctx context.Context, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	defer f.Close()
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

// heartbeat reports liveness every interval until stop is called, so that
// a worker that dies in a long call loses its lease quickly while a live
// one keeps it however long the call takes.
func heartbeat(ctx context.Context, interval time.Duration) (stop func()) {
	return heartbeatWith(ctx, interval, nil)
}

// heartbeatWith is heartbeat that also reports progress: details, when not
// nil, gives what a retried attempt needs to resume.
func heartbeatWith(ctx context.Context, interval time.Duration, details func() any) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if details != nil {
					activity.RecordHeartbeat(ctx, details())
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done) }
}
