package vault

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// ledger remembers, outside the vault, every recording of the source
// folder that had a note: a note the person deleted cancels its job but
// keeps the audio, and the audio must not then get a new note. A file of
// the same name that is not the same file (another size or time) is a new
// recording.
type ledger struct {
	path  string
	files map[string]stamp
	dirty bool
}

// openLedger loads the ledger of the vault at dir from dataDir.
func openLedger(dataDir, dir string) (*ledger, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(abs))
	l := &ledger{path: filepath.Join(dataDir, "vault-"+hex.EncodeToString(sum[:6])+".json"), files: map[string]stamp{}}
	b, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &l.files); err != nil {
		return nil, errors.New(l.path + " is damaged; remove it to start it again: " + err.Error())
	}
	return l, nil
}

// noted records that the audio file name, in this version, has a note.
func (l *ledger) noted(name string, s stamp) {
	if have, ok := l.files[name]; ok && have.Size == s.Size && have.ModTime.Equal(s.ModTime) {
		return
	}
	l.files[name] = s
	l.dirty = true
}

// hadNote reports whether this very file had a note once.
func (l *ledger) hadNote(name string, s stamp) bool {
	have, ok := l.files[name]
	return ok && have.Size == s.Size && have.ModTime.Equal(s.ModTime)
}

// save writes the ledger when it changed, whole or not at all.
func (l *ledger) save() error {
	if !l.dirty {
		return nil
	}
	b, err := json.Marshal(l.files)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return err
	}
	l.dirty = false
	return nil
}
