// Package transcript is the stored form of a recognised recording and its
// renderings for people and programs: plain text, SubRip, WebVTT and JSON.
package transcript

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// Document is what a job stores as its transcript. Its Duration is stored
// in nanoseconds, as stored transcripts always were; the json rendering is
// JSONDocument, in seconds.
type Document struct {
	Engine   string        `json:"engine"`
	Language string        `json:"language,omitempty"`
	Duration time.Duration `json:"duration"`
	Text     string        `json:"text"`
	Segments []Segment     `json:"segments"`
	// Words are there when the engine timed each word; transcripts stored
	// before words existed have none.
	Words []Word `json:"words,omitempty"`
}

// Segment is a timed stretch of text. Times are seconds in JSON, the unit
// every subtitle tool and speech API uses.
type Segment struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Text  string  `json:"text"`
	// Speaker is the engine's label of who spoke, when it was asked to
	// tell speakers apart and could.
	Speaker string `json:"speaker,omitempty"`
}

// Word is one timed word. Its text is "word", as OpenAI's verbose_json
// names it, so that clients written for either read both.
type Word struct {
	Word    string  `json:"word"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Speaker string  `json:"speaker,omitempty"`
}

// Speakers reports whether any segment or word names its speaker.
func (d Document) Speakers() bool {
	for _, s := range d.Segments {
		if s.Speaker != "" {
			return true
		}
	}
	for _, w := range d.Words {
		if w.Speaker != "" {
			return true
		}
	}
	return false
}

// JSONDocument is the json rendering of a transcript: every time and
// duration in seconds, as OpenAI's verbose_json and subtitle tools have
// them, so that a duration and a segment's end can be compared as they are.
type JSONDocument struct {
	Engine   string    `json:"engine"`
	Language string    `json:"language,omitempty"`
	Duration float64   `json:"duration"`
	Text     string    `json:"text"`
	Segments []Segment `json:"segments"`
	Words    []Word    `json:"words,omitempty"`
}

// JSON returns the json rendering of the document.
func (d Document) JSON() JSONDocument {
	segs := d.Segments
	if segs == nil {
		// A list, never null, for clients that iterate it unchecked.
		segs = []Segment{}
	}
	return JSONDocument{Engine: d.Engine, Language: d.Language, Duration: d.Duration.Seconds(), Text: d.Text, Segments: segs, Words: d.Words}
}

// FromResult builds the document of an engine result. When the engine gave
// no timings the whole text becomes one segment spanning the recording, so
// every format can still be produced.
func FromResult(engineName string, duration time.Duration, r engine.Result) Document {
	d := Document{Engine: engineName, Language: r.Language, Duration: duration, Text: strings.TrimSpace(r.Text)}
	for _, s := range r.Segments {
		if t := strings.TrimSpace(s.Text); t != "" {
			d.Segments = append(d.Segments, Segment{Start: s.Start.Seconds(), End: s.End.Seconds(), Text: t, Speaker: s.Speaker})
		}
	}
	for _, w := range r.Words {
		if t := strings.TrimSpace(w.Text); t != "" {
			d.Words = append(d.Words, Word{Word: t, Start: w.Start.Seconds(), End: w.End.Seconds(), Speaker: w.Speaker})
		}
	}
	if len(d.Segments) == 0 && d.Text != "" {
		d.Segments = []Segment{{Start: 0, End: duration.Seconds(), Text: d.Text}}
	}
	return d
}

// WordCount counts the words of the text.
func (d Document) WordCount() int { return len(strings.Fields(d.Text)) }

// Formats that Render accepts.
var Formats = []string{"txt", "srt", "vtt", "json"}

// mediaTypes are the Content-Types of the formats; text is UTF-8, which
// players and browsers otherwise guess wrong for srt and txt.
var mediaTypes = map[string]string{
	"txt":  "text/plain; charset=utf-8",
	"srt":  "application/x-subrip; charset=utf-8",
	"vtt":  "text/vtt; charset=utf-8",
	"json": "application/json",
}

// MediaType returns the Content-Type of a rendering in format, and false
// for a format Render does not know.
func MediaType(format string) (string, bool) {
	t, ok := mediaTypes[format]
	return t, ok
}

// Opener reads stored objects by key, as blob.Store does.
type Opener interface {
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// Load reads the document stored under key.
func Load(ctx context.Context, store Opener, key string) (Document, error) {
	r, err := store.Open(ctx, key)
	if err != nil {
		return Document{}, err
	}
	defer r.Close()
	d, err := Decode(r)
	if err != nil {
		return Document{}, fmt.Errorf("transcript %s: %w", key, err)
	}
	return d, nil
}

// Render writes the document in format: txt, srt, vtt or json. In srt and
// vtt each segment's text is put on one line (see cueText) and segments with
// no text are left out, so every cue stays well-formed.
func Render(w io.Writer, d Document, format string) error {
	switch format {
	case "txt", "":
		_, err := io.WriteString(w, d.Text+"\n")
		return err
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d.JSON())
	case "srt":
		var b strings.Builder
		n := 0
		for _, s := range d.Segments {
			text := cueText(s.Text)
			if text == "" {
				continue
			}
			n++
			if s.Speaker != "" {
				// SubRip has no voice markup; players show the name as
				// part of the line, as broadcast subtitles do.
				text = cueText(SpeakerName(s.Speaker)) + ": " + text
			}
			fmt.Fprintf(&b, "%d\n%s --> %s\n%s\n\n", n, stamp(s.Start, ","), stamp(s.End, ","), text)
		}
		_, err := io.WriteString(w, b.String())
		return err
	case "vtt":
		var b strings.Builder
		b.WriteString("WEBVTT\n\n")
		for _, s := range d.Segments {
			text := cueText(s.Text)
			if text == "" {
				continue
			}
			text = vttEscaper.Replace(text)
			if s.Speaker != "" {
				text = "<v " + voiceName(s.Speaker) + ">" + text
			}
			fmt.Fprintf(&b, "%s --> %s\n%s\n\n", stamp(s.Start, "."), stamp(s.End, "."), text)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	return fmt.Errorf("unknown transcript format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// cueText puts segment text on one line fit for a subtitle cue. A blank line
// ends a cue and "-->" marks a timing line, so text holding either would be
// read as the start of another cue by players.
func cueText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	// One pass is not enough: "--->" becomes "-->" again.
	for strings.Contains(s, "-->") {
		s = strings.ReplaceAll(s, "-->", "->")
	}
	return s
}

// SpeakerName is how a speaker's label reads to people: providers label
// speakers "A", "B" or "0", "1", which alone read as text, so short labels
// become "Speaker A"; a longer label is already a name.
func SpeakerName(label string) string {
	label = strings.TrimSpace(label)
	if len([]rune(label)) <= 2 {
		return "Speaker " + label
	}
	return label
}

// voiceName is a speaker's name fit for a WebVTT voice span, whose
// annotation ends at ">" and may hold no line break or character
// reference.
func voiceName(label string) string {
	name := strings.Join(strings.Fields(SpeakerName(label)), " ")
	return strings.NewReplacer("&", "&amp;", ">", "&gt;", "<", "&lt;").Replace(name)
}

// vttEscaper keeps WebVTT players from reading "<" as a tag and "&" as a
// character reference.
var vttEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;")

func stamp(sec float64, sep string) string {
	// Rounding through whole nanoseconds undoes the binary error of
	// Duration.Seconds, which would otherwise send some exact half
	// milliseconds down (0.5005 s is 500.4999… ms as a float).
	ns := math.Round(sec * 1e9)
	if !(ns > 0) {
		ns = 0
	}
	ms := (int64(ns) + 500_000) / 1_000_000
	h, ms := ms/3600000, ms%3600000
	m, ms := ms/60000, ms%60000
	s, ms := ms/1000, ms%1000
	return fmt.Sprintf("%02d:%02d:%02d%s%03d", h, m, s, sep, ms)
}

// Decode reads a stored document.
func Decode(r io.Reader) (Document, error) {
	var d Document
	if err := json.NewDecoder(io.LimitReader(r, 256<<20)).Decode(&d); err != nil {
		return Document{}, fmt.Errorf("decode transcript: %w", err)
	}
	return d, nil
}

// Part is the transcript of one chunk and where the chunk starts in the
// whole recording.
type Part struct {
	Offset time.Duration
	Doc    Document
}

// Merge joins the transcripts of consecutive chunks into the transcript of
// the whole recording: texts in order, segments moved by their chunk's
// offset, and so are words. The language is the one most chunks were heard in, the first of
// them on a tie, so that one short chunk in another language does not
// relabel the recording.
func Merge(engineName string, duration time.Duration, parts []Part) Document {
	d := Document{Engine: engineName, Duration: duration, Segments: []Segment{}}
	var texts []string
	votes := map[string]int{}
	best := 0
	for _, p := range parts {
		if t := strings.TrimSpace(p.Doc.Text); t != "" {
			texts = append(texts, t)
		}
		if l := p.Doc.Language; l != "" {
			votes[l]++
			if votes[l] > best {
				best, d.Language = votes[l], l
			}
		}
		off := p.Offset.Seconds()
		for _, s := range p.Doc.Segments {
			s.Start, s.End = s.Start+off, s.End+off
			d.Segments = append(d.Segments, s)
		}
		for _, w := range p.Doc.Words {
			w.Start, w.End = w.Start+off, w.End+off
			d.Words = append(d.Words, w)
		}
	}
	d.Text = strings.Join(texts, " ")
	return d
}
