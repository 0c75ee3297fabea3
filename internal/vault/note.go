package vault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The frontmatter keys the intake owns. Every other key of a note, and all
// of its body but the transcript the intake inserts, belong to the person.
const (
	KeyID          = "voice-id"
	KeyStatus      = "voice-status"
	KeyDevice      = "voice-device"
	KeyAttempts    = "voice-attempts"
	KeyNextAttempt = "voice-next-attempt"
	KeySentAt      = "voice-sent-at"
	KeyError       = "voice-error"
)

// ownKeys are written in this order when a note lacks them.
var ownKeys = []string{KeyID, KeyStatus, KeyDevice, KeyAttempts, KeyNextAttempt, KeySentAt, KeyError}

// Status is where a recording is in its life, as its note says. These five
// are the only values ever written; the moments between them (recording,
// a transcript received but not yet written) never reach a note.
type Status string

const (
	// Saved: the audio and the note are kept; nothing was sent yet.
	Saved Status = "saved"
	// Sent: a request for the recording is in flight.
	Sent Status = "sent"
	// Retry: the last attempt failed for a reason that may pass; the next
	// one is due at the note's voice-next-attempt.
	Retry Status = "retry"
	// Failed: the recording needs a person (a verdict, or attempts ran
	// out).
	Failed Status = "failed"
	// Inserted: the transcript is in the note. The end.
	Inserted Status = "inserted"
)

// Statuses are all the values of voice-status.
var Statuses = []Status{Saved, Sent, Retry, Failed, Inserted}

// transitions are the changes of status the intake may make; anything else
// is refused and leaves the note as it is. A status may also stay what it
// is while its other fields change (a new attempt of a sent recording).
var transitions = map[Status][]Status{
	Saved: {Sent, Retry, Failed, Inserted},
	// A recording in flight comes back with a transcript, a failure, or
	// waits out a back-off.
	Sent: {Retry, Failed, Inserted, Saved},
	// A retry is sent again, taken over or retried by a person (saved), or
	// ends the way a sent one does when its job moved on meanwhile.
	Retry: {Sent, Saved, Failed, Inserted},
	// Only a person's retry (saved) or an operator's revive of the job
	// (which sends it again) move a failed recording on.
	Failed: {Saved, Sent, Retry, Inserted},
	// An inserted recording is finished.
	Inserted: {},
}

// ErrTransition is a change of status that the lifecycle does not have.
var ErrTransition = errors.New("the recording's status cannot change that way")

// checkTransition allows from → to when the lifecycle has it.
func checkTransition(from, to Status) error {
	if from == to && from != Inserted {
		return nil
	}
	for _, s := range transitions[from] {
		if s == to {
			return nil
		}
	}
	return fmt.Errorf("%w: %s to %s", ErrTransition, from, to)
}

// Fields are the intake's keys of one note.
type Fields struct {
	ID          string
	Status      Status
	Device      string
	Attempts    int
	NextAttempt time.Time
	SentAt      time.Time
	Error       string
}

// Note is one Markdown file that carries a voice-id.
type Note struct {
	Path string
	Fields
	// content is the file as read, which a write must still find there.
	content []byte
}

// errNoFrontmatter: the file has no frontmatter, so it is no recording's
// note.
var errNoFrontmatter = errors.New("no frontmatter")

// splitFrontmatter finds the YAML between a first line "---" and the next
// line "---" (or "..."). front excludes both fences; bodyStart is where the
// text after the closing fence begins; closeAt where the closing fence
// begins, for appending keys.
func splitFrontmatter(content []byte) (front []byte, closeAt, bodyStart int, err error) {
	rest := bytes.TrimPrefix(content, []byte("\ufeff"))
	offset := len(content) - len(rest)
	first, after, ok := cutLine(rest)
	if !ok || strings.TrimRight(string(first), " \t\r") != "---" {
		return nil, 0, 0, errNoFrontmatter
	}
	pos := offset + after
	for pos <= len(content) {
		line, next, ok := cutLine(content[pos:])
		trimmed := strings.TrimRight(string(line), " \t\r")
		if trimmed == "---" || trimmed == "..." {
			return content[offset+after : pos], pos, pos + next, nil
		}
		if !ok {
			break
		}
		pos += next
	}
	return nil, 0, 0, errNoFrontmatter
}

// cutLine returns the first line of b without its newline and the offset
// of the next one; ok is false when b has no newline (the line is the
// rest).
func cutLine(b []byte) (line []byte, next int, ok bool) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], i + 1, true
	}
	return b, len(b), false
}

// parseNote reads the intake's fields of a note; a file without a
// voice-id is errNoFrontmatter.
func parseNote(path string, content []byte) (Note, error) {
	front, _, _, err := splitFrontmatter(content)
	if err != nil {
		return Note{}, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(front, &m); err != nil {
		return Note{}, fmt.Errorf("note %s: the frontmatter is not valid YAML: %w", path, err)
	}
	id := scalar(m[KeyID])
	if id == "" {
		return Note{}, errNoFrontmatter
	}
	n := Note{Path: path, content: content, Fields: Fields{
		ID:     id,
		Status: Status(scalar(m[KeyStatus])),
		Device: scalar(m[KeyDevice]),
		Error:  scalar(m[KeyError]),
	}}
	n.Attempts, _ = strconv.Atoi(scalar(m[KeyAttempts]))
	n.NextAttempt = timeOf(m[KeyNextAttempt])
	n.SentAt = timeOf(m[KeySentAt])
	return n, nil
}

// scalar is a YAML value as the person would read it; a list or a map,
// which no key of ours holds, is empty.
func scalar(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(v)
	case time.Time:
		return v.Format(time.RFC3339)
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v)
	default:
		return ""
	}
}

func timeOf(v any) time.Time {
	if t, ok := v.(time.Time); ok {
		return t
	}
	t, err := time.Parse(time.RFC3339, scalar(v))
	if err != nil {
		return time.Time{}
	}
	return t
}

// render gives the frontmatter line of an own key. A count and the times
// are written bare, so that Obsidian shows them as a number and a date;
// text is quoted as YAML needs.
func render(key, value string) ([]byte, error) {
	switch key {
	case KeyAttempts, KeyNextAttempt, KeySentAt:
		return []byte(key + ": " + value + "\n"), nil
	}
	out, err := yaml.Marshal(map[string]string{key: value})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// values are the lines a note's fields give, by key; an empty value drops
// the key.
func (f Fields) values() map[string]string {
	v := map[string]string{
		KeyID:       f.ID,
		KeyStatus:   string(f.Status),
		KeyDevice:   f.Device,
		KeyAttempts: strconv.Itoa(f.Attempts),
		KeyError:    f.Error,
	}
	if !f.NextAttempt.IsZero() {
		v[KeyNextAttempt] = f.NextAttempt.UTC().Format(time.RFC3339)
	} else {
		v[KeyNextAttempt] = ""
	}
	if !f.SentAt.IsZero() {
		v[KeySentAt] = f.SentAt.UTC().Format(time.RFC3339)
	} else {
		v[KeySentAt] = ""
	}
	return v
}

// setFields rewrites the own keys of content's frontmatter to f, line by
// line: the person's keys, comments, order and formatting stay byte for
// byte. A key of ours is one line at the top level (and whatever indented
// lines a person may have put under it).
func setFields(content []byte, f Fields) ([]byte, error) {
	front, closeAt, _, err := splitFrontmatter(content)
	if err != nil {
		return nil, err
	}
	frontStart := closeAt - len(front)
	want := f.values()
	var out bytes.Buffer
	out.Write(content[:frontStart])
	done := map[string]bool{}
	lines := bytes.SplitAfter(front, []byte("\n"))
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		key, own := ownKeyOf(line)
		if !own {
			out.Write(line)
			continue
		}
		// Skip what a person nested under the key: an own key holds a
		// scalar.
		for i+1 < len(lines) && len(lines[i+1]) > 0 && (lines[i+1][0] == ' ' || lines[i+1][0] == '\t') {
			i++
		}
		if done[key] || want[key] == "" {
			done[key] = true
			continue
		}
		done[key] = true
		r, err := render(key, want[key])
		if err != nil {
			return nil, err
		}
		out.Write(r)
	}
	if out.Len() > 0 && out.Bytes()[out.Len()-1] != '\n' {
		out.WriteByte('\n')
	}
	for _, key := range ownKeys {
		if done[key] || want[key] == "" {
			continue
		}
		r, err := render(key, want[key])
		if err != nil {
			return nil, err
		}
		out.Write(r)
	}
	out.Write(content[closeAt:])
	updated := out.Bytes()
	// The result must still be YAML and say what we wrote; a frontmatter
	// this line editing does not understand is left alone.
	n, err := parseNote("", updated)
	if err != nil || n.Fields != f.normalised() {
		return nil, fmt.Errorf("the frontmatter could not be updated in place (%v)", err)
	}
	return updated, nil
}

// normalised is f as it reads back from a note: times in whole seconds.
func (f Fields) normalised() Fields {
	f.NextAttempt = roundTime(f.NextAttempt)
	f.SentAt = roundTime(f.SentAt)
	return f
}

func roundTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Second)
}

// ownKeyOf reports whether line sets one of the intake's keys at the top
// level of the frontmatter.
func ownKeyOf(line []byte) (string, bool) {
	for _, k := range ownKeys {
		if bytes.HasPrefix(line, []byte(k)) {
			rest := bytes.TrimLeft(line[len(k):], " \t")
			if len(rest) > 0 && rest[0] == ':' {
				return k, true
			}
		}
	}
	return "", false
}

// newNote is the note made for an audio file that came without one.
func newNote(f Fields, embed string, extra string) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	vals := f.values()
	for _, k := range ownKeys {
		if vals[k] == "" {
			continue
		}
		r, _ := render(k, vals[k]) // a map of strings always marshals
		b.Write(r)
	}
	b.WriteString("---\n")
	b.WriteString(embed + "\n")
	if extra != "" {
		b.WriteString("\n" + extra + "\n")
	}
	return b.Bytes()
}

// insertAfterEmbed puts text on its own lines after the line that embeds
// the recording, or at the end of the note when the person removed it.
func insertAfterEmbed(content []byte, embeds []string, text string) []byte {
	_, _, bodyStart, err := splitFrontmatter(content)
	if err != nil {
		bodyStart = 0
	}
	block := "\n" + strings.TrimSpace(text) + "\n"
	for pos := bodyStart; pos < len(content); {
		line, next, _ := cutLine(content[pos:])
		for _, e := range embeds {
			if bytes.Contains(line, []byte(e)) {
				at := pos + next
				var out bytes.Buffer
				out.Write(content[:at])
				if next == len(line) {
					out.WriteByte('\n')
				}
				out.WriteString(block)
				if at < len(content) && content[at] != '\n' {
					out.WriteByte('\n')
				}
				out.Write(content[at:])
				return out.Bytes()
			}
		}
		pos += next
	}
	out := bytes.TrimRight(content, "\n")
	return append(append(append([]byte(nil), out...), '\n'), block...)
}

// ErrNoteGone is a note that was deleted before the intake could write it.
var ErrNoteGone = errors.New("the note is gone")

// errNoteChanged is a note someone changed while a write was prepared.
var errNoteChanged = errors.New("the note changed meanwhile")

// writeNote replaces the note at path with content, if the file still
// holds was: a synced vault never sees half a note (the content goes to a
// hidden file beside it, then is renamed over it), and an edit the person
// saved meanwhile is never overwritten (the caller reads again and redoes
// its change).
func writeNote(path string, was, content []byte) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoteGone
	}
	if err != nil {
		return err
	}
	tmp, err := writeTemp(path, content, st.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }() // gone after the rename
	cur, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoteGone
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, was) {
		return errNoteChanged
	}
	return os.Rename(tmp, path)
}

// createNote writes a new note at path, never over an existing file.
func createNote(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := writeTemp(path, content, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }()
	// A hard link fails when the name is taken, where a rename would
	// replace what is there.
	return os.Link(tmp, path)
}

// writeTemp writes content, synced, to a hidden file beside path, which
// the vault's sync tools and the intake's own scan skip, and returns its
// name.
func writeTemp(path string, content []byte, mode os.FileMode) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", err
	}
	err = func() error {
		if _, err := tmp.Write(content); err != nil {
			return err
		}
		if err := tmp.Chmod(mode); err != nil {
			return err
		}
		return tmp.Sync()
	}()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}
