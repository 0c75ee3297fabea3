package vault

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Vault is a vault as the person's commands see it: no jobs, only notes.
// The intake that runs for the device sends what the commands make ready.
type Vault struct {
	in *Intake
}

// Open opens the vault at dir for commands.
func Open(dir string, logger *slog.Logger) (*Vault, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("vault %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("vault %s is not a directory", dir)
	}
	return &Vault{in: &Intake{cfg: Config{Dir: dir}, log: logger, cache: map[string]cached{}}}, nil
}

// TakeOver gives device every other device's recording that waits to be
// sent (saved, retry, or sent longer than StaleSent ago, when its request
// is surely not running) and makes it due now, whatever its next attempt
// said. Failed, inserted and recently sent recordings stay as they are.
// It returns the notes it changed.
func (v *Vault) TakeOver(device string, now time.Time) ([]string, error) {
	if err := CheckDevice(device); err != nil {
		return nil, err
	}
	s, err := v.in.scan()
	if err != nil {
		return nil, err
	}
	var taken []string
	for _, n := range s.notes {
		if n.Device == device {
			continue
		}
		switch n.Status {
		case Saved, Retry:
		case Sent:
			if now.Sub(n.SentAt) <= StaleSent {
				continue
			}
		default:
			continue
		}
		f := n.Fields
		f.Device, f.Status, f.NextAttempt, f.Error = device, Saved, time.Time{}, ""
		if err := v.in.update(n, f, nil); err != nil {
			return taken, fmt.Errorf("take over %s: %w", v.in.rel(n.Path), err)
		}
		taken = append(taken, v.in.rel(n.Path))
	}
	return taken, nil
}

// ErrNotRetryable is a retry of a recording that is neither failed nor
// waiting for a retry; the note is left as it is.
var ErrNotRetryable = errors.New("only failed recordings and those waiting for a retry can be retried")

// Retry makes a failed recording, or one waiting for its next attempt,
// saved again with its attempts counted from zero, for the device's intake
// to send now. ref is the note's path (absolute, or from the current
// folder, or from the vault) or its voice-id. It returns the note.
func (v *Vault) Retry(ref string) (Note, error) {
	n, err := v.find(ref)
	if err != nil {
		return Note{}, err
	}
	if n.Status != Failed && n.Status != Retry {
		return n, fmt.Errorf("%s is %s: %w; nothing changed", v.in.rel(n.Path), n.Status, ErrNotRetryable)
	}
	f := n.Fields
	f.Status, f.Attempts, f.NextAttempt, f.SentAt, f.Error = Saved, 0, time.Time{}, time.Time{}, ""
	if err := v.in.update(n, f, nil); err != nil {
		return n, fmt.Errorf("retry %s: %w", v.in.rel(n.Path), err)
	}
	n.Fields = f
	return n, nil
}

// find is the note ref names.
func (v *Vault) find(ref string) (Note, error) {
	s, err := v.in.scan()
	if err != nil {
		return Note{}, err
	}
	var paths []string
	if filepath.IsAbs(ref) {
		paths = append(paths, ref)
	} else {
		if abs, err := filepath.Abs(ref); err == nil {
			paths = append(paths, abs)
		}
		paths = append(paths, filepath.Join(v.in.cfg.Dir, ref))
	}
	for _, p := range paths {
		for _, n := range s.notes {
			if same(n.Path, p) {
				return n, nil
			}
		}
	}
	if notes := s.byID[ref]; len(notes) > 0 {
		return notes[0], nil
	}
	return Note{}, fmt.Errorf("no note of the vault is %q: give the note's path or its voice-id", ref)
}

// same reports whether two paths name one file.
func same(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
