package vault

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// maxNoteBytes bounds the notes the intake reads: a voice note is small,
// and a larger Markdown file is something else.
const maxNoteBytes = 4 << 20

// hidden are names the intake never reads or watches: the vault's own
// settings and trash (a note moved there is deleted), version control, and
// the temporary files of editors, sync tools and the intake itself.
func hidden(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "~") || strings.HasSuffix(name, "~")
}

// stamp tells a file's version apart without reading it.
type stamp struct {
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

func stampOf(fi fs.FileInfo) stamp { return stamp{Size: fi.Size(), ModTime: fi.ModTime()} }

// cached is a note as the last pass read it.
type cached struct {
	stamp
	note   Note
	embeds []string
	isNote bool
}

// embedRE finds Obsidian embeds and links: ![[path]] and [[path|alias]].
var embedRE = regexp.MustCompile(`!?\[\[([^\]|#]+)`)

// scanned is what a pass knows of the vault's notes.
type scanned struct {
	notes []Note
	// byID are the notes by voice-id; more than one is a person's copy.
	byID map[string][]Note
	// linked are the vault paths of audio files that notes embed.
	linked map[string]bool
}

// scan reads every note of the vault that carries a voice-id, in any
// folder: a note is found by its id, not by where it is. Files unchanged
// since the last scan are not read again.
func (in *Intake) scan() (scanned, error) {
	s := scanned{byID: map[string][]Note{}, linked: map[string]bool{}}
	seen := map[string]bool{}
	err := filepath.WalkDir(in.cfg.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == in.cfg.Dir {
				return err
			}
			// A folder removed or unreadable mid-walk: the next pass sees
			// what is left.
			return nil
		}
		if path != in.cfg.Dir && hidden(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".md") {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Size() > maxNoteBytes {
			return nil
		}
		seen[path] = true
		c, ok := in.cache[path]
		if !ok || c.stamp != stampOf(fi) {
			c = in.readNote(path, fi)
			in.cache[path] = c
		}
		if !c.isNote {
			return nil
		}
		s.notes = append(s.notes, c.note)
		s.byID[c.note.ID] = append(s.byID[c.note.ID], c.note)
		for _, e := range c.embeds {
			s.linked[e] = true
		}
		return nil
	})
	for path := range in.cache {
		if !seen[path] {
			delete(in.cache, path)
		}
	}
	slices.SortFunc(s.notes, func(a, b Note) int { return strings.Compare(a.Path, b.Path) })
	return s, err
}

// readNote parses one Markdown file.
func (in *Intake) readNote(path string, fi fs.FileInfo) cached {
	c := cached{stamp: stampOf(fi)}
	content, err := os.ReadFile(path)
	if err != nil {
		return c
	}
	if !bytes.Contains(content, []byte(KeyID)) {
		return c
	}
	n, err := parseNote(path, content)
	if err != nil {
		if !errors.Is(err, errNoFrontmatter) {
			in.log.Warn("vault: a note cannot be read", "note", in.rel(path), "error", err)
		}
		return c
	}
	c.note, c.isNote = n, true
	for _, m := range embedRE.FindAllSubmatch(content, -1) {
		c.embeds = append(c.embeds, strings.TrimSpace(string(m[1])))
	}
	return c
}

// rel is path as the vault names it, for logs and messages.
func (in *Intake) rel(path string) string {
	if r, err := filepath.Rel(in.cfg.Dir, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}

// audioExts are the recordings the intake takes from the source folder;
// the pipeline decides what it can convert.
var audioExts = map[string]bool{
	".ogg": true, ".oga": true, ".opus": true, ".m4a": true, ".mp3": true, ".wav": true, ".webm": true,
	".flac": true, ".aac": true, ".mp4": true, ".3gp": true, ".amr": true, ".wma": true, ".mka": true,
	".caf": true, ".aiff": true, ".aif": true,
}

// partial are the suffixes of files still being written by a browser, a
// sync tool or a recorder.
var partial = []string{".part", ".tmp", ".crdownload", ".download", ".partial", ".!sync", ".syncthing"}

func isAudioName(name string) bool {
	if hidden(name) {
		return false
	}
	lower := strings.ToLower(name)
	for _, p := range partial {
		if strings.HasSuffix(lower, p) {
			return false
		}
	}
	return audioExts[filepath.Ext(lower)]
}
