// Package transcript is the stored form of a recognised recording and its
// renderings for people and programs: plain text, SubRip, WebVTT and JSON.
package transcript

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// Document is what a job stores as its transcript.
type Document struct {
	Engine   string        `json:"engine"`
	Language string        `json:"language,omitempty"`
	Duration time.Duration `json:"duration"`
	Text     string        `json:"text"`
	Segments []Segment     `json:"segments"`
}

// Segment is a timed stretch of text. Times are seconds in JSON, the unit
// every subtitle tool and speech API uses.
type Segment struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Text  string  `json:"text"`
}

// FromResult builds the document of an engine result. When the engine gave
// no timings the whole text becomes one segment spanning the recording, so
// every format can still be produced.
func FromResult(engineName string, duration time.Duration, r engine.Result) Document {
	d := Document{Engine: engineName, Language: r.Language, Duration: duration, Text: strings.TrimSpace(r.Text)}
	for _, s := range r.Segments {
		if t := strings.TrimSpace(s.Text); t != "" {
			d.Segments = append(d.Segments, Segment{Start: s.Start.Seconds(), End: s.End.Seconds(), Text: t})
		}
	}
	if len(d.Segments) == 0 && d.Text != "" {
		d.Segments = []Segment{{Start: 0, End: duration.Seconds(), Text: d.Text}}
	}
	return d
}

// Words counts the words of the text.
func (d Document) Words() int { return len(strings.Fields(d.Text)) }

// Formats that Render accepts.
var Formats = []string{"txt", "srt", "vtt", "json"}

// Render writes the document in format: txt, srt, vtt or json.
func Render(w io.Writer, d Document, format string) error {
	switch format {
	case "txt", "":
		_, err := io.WriteString(w, d.Text+"\n")
		return err
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	case "srt":
		var b strings.Builder
		for i, s := range d.Segments {
			fmt.Fprintf(&b, "%d\n%s --> %s\n%s\n\n", i+1, stamp(s.Start, ","), stamp(s.End, ","), s.Text)
		}
		_, err := io.WriteString(w, b.String())
		return err
	case "vtt":
		var b strings.Builder
		b.WriteString("WEBVTT\n\n")
		for _, s := range d.Segments {
			fmt.Fprintf(&b, "%s --> %s\n%s\n\n", stamp(s.Start, "."), stamp(s.End, "."), s.Text)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	return fmt.Errorf("unknown transcript format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

func stamp(sec float64, sep string) string {
	ms := int64(sec*1000 + 0.5)
	if ms < 0 {
		ms = 0
	}
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
