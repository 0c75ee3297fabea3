package transcript

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestFromResult(t *testing.T) {
	tests := []struct {
		name     string
		duration time.Duration
		result   engine.Result
		want     Document
	}{
		{
			name:     "segments converted to seconds and trimmed",
			duration: 90 * time.Second,
			result: engine.Result{
				Text:     "  hello world. bye  \n",
				Language: "en",
				Segments: []engine.Segment{
					{Start: 0, End: 1500 * time.Millisecond, Text: " hello world. "},
					{Start: 1500 * time.Millisecond, End: 3250 * time.Millisecond, Text: "\tbye\n"},
				},
			},
			want: Document{
				Engine: "local", Language: "en", Duration: 90 * time.Second, Text: "hello world. bye",
				Segments: []Segment{{Start: 0, End: 1.5, Text: "hello world."}, {Start: 1.5, End: 3.25, Text: "bye"}},
			},
		},
		{
			name:     "empty and blank segments dropped",
			duration: 10 * time.Second,
			result: engine.Result{
				Text: "a b",
				Segments: []engine.Segment{
					{Start: 0, End: time.Second, Text: ""},
					{Start: time.Second, End: 2 * time.Second, Text: "a"},
					{Start: 2 * time.Second, End: 3 * time.Second, Text: " \n\t "},
					{Start: 3 * time.Second, End: 4 * time.Second, Text: "b"},
				},
			},
			want: Document{
				Engine: "local", Duration: 10 * time.Second, Text: "a b",
				Segments: []Segment{{Start: 1, End: 2, Text: "a"}, {Start: 3, End: 4, Text: "b"}},
			},
		},
		{
			name:     "no timings gives one whole-recording segment",
			duration: 2*time.Minute + 500*time.Millisecond,
			result:   engine.Result{Text: " just text "},
			want: Document{
				Engine: "local", Duration: 2*time.Minute + 500*time.Millisecond, Text: "just text",
				Segments: []Segment{{Start: 0, End: 120.5, Text: "just text"}},
			},
		},
		{
			name:     "only blank segments count as no timings",
			duration: 5 * time.Second,
			result:   engine.Result{Text: "words", Segments: []engine.Segment{{Start: 0, End: time.Second, Text: "  "}}},
			want: Document{
				Engine: "local", Duration: 5 * time.Second, Text: "words",
				Segments: []Segment{{Start: 0, End: 5, Text: "words"}},
			},
		},
		{
			name:     "no text and no segments gives no segments",
			duration: 5 * time.Second,
			result:   engine.Result{Text: " \n "},
			want:     Document{Engine: "local", Duration: 5 * time.Second},
		},
		{
			name:     "segments kept even when the text is empty",
			duration: 5 * time.Second,
			result:   engine.Result{Segments: []engine.Segment{{Start: time.Second, End: 2 * time.Second, Text: "x"}}},
			want: Document{
				Engine: "local", Duration: 5 * time.Second,
				Segments: []Segment{{Start: 1, End: 2, Text: "x"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FromResult("local", tc.duration, tc.result)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromResult() = %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestWords(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"   \n\t", 0},
		{"one", 1},
		{"one two  three", 3},
		{" leading and trailing ", 3},
		{"line\nbreaks\tand tabs", 4},
		{"привет мир", 2},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			if got := (Document{Text: tc.text}).WordCount(); got != tc.want {
				t.Errorf("Words(%q) = %d; want %d", tc.text, got, tc.want)
			}
		})
	}
}

func render(t *testing.T, d Document, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, d, format); err != nil {
		t.Fatalf("Render(%q): %v", format, err)
	}
	return b.String()
}

// sample is a small multi-segment document; its last cue crosses the hour
// so the golden files cover every timestamp field.
var sample = Document{
	Engine:   "local",
	Language: "en",
	Duration: time.Hour + 2*time.Minute,
	Text:     "Good morning. This is a test. Goodbye.",
	Segments: []Segment{
		{Start: 0, End: 1.25, Text: "Good morning."},
		{Start: 1.25, End: 4.0005, Text: "This is a test."},
		{Start: 3599.5, End: 3723.042, Text: "Goodbye."},
	},
}

func TestRenderTxt(t *testing.T) {
	tests := []struct {
		name, format, text, want string
	}{
		{name: "txt", format: "txt", text: "hello world", want: "hello world\n"},
		{name: "empty format means txt", format: "", text: "hello", want: "hello\n"},
		{name: "empty text", format: "txt", text: "", want: "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(t, Document{Text: tc.text, Segments: sample.Segments}, tc.format); got != tc.want {
				t.Errorf("Render(%q) = %q; want %q", tc.format, got, tc.want)
			}
		})
	}
}

func TestRenderJSONRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		doc  Document
	}{
		{name: "sample", doc: sample},
		{name: "no segments", doc: Document{Engine: "openai", Duration: time.Second}},
		{name: "awkward text", doc: Document{Engine: "x", Text: "a \"quote\"\n<b>&", Segments: []Segment{{Start: 0.001, End: 0.002, Text: "a\nb"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := render(t, tc.doc, "json")
			if !json.Valid([]byte(out)) {
				t.Fatalf("Render(json) = %q; want valid JSON", out)
			}
			var got JSONDocument
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if want := tc.doc.JSON(); !reflect.DeepEqual(got, want) {
				t.Errorf("Render(json) read back = %+v; want %+v", got, want)
			}
		})
	}
}

// Scenario: Every time and duration in the json transcript is in seconds
func TestRenderJSONFieldsInSeconds(t *testing.T) {
	var raw struct {
		Duration any              `json:"duration"`
		Segments []map[string]any `json:"segments"`
	}
	if err := json.Unmarshal([]byte(render(t, sample, "json")), &raw); err != nil {
		t.Fatal(err)
	}
	if got := raw.Duration; got != 3720.0 {
		t.Errorf("json duration = %v; want 3720 (seconds)", got)
	}
	var short struct {
		Duration any `json:"duration"`
	}
	if err := json.Unmarshal([]byte(render(t, Document{Duration: 2787312500}, "json")), &short); err != nil {
		t.Fatal(err)
	}
	if got := short.Duration; got != 2.7873125 {
		t.Errorf("json duration of 2787312500ns = %v; want 2.7873125", got)
	}
	if len(raw.Segments) != len(sample.Segments) {
		t.Fatalf("json segments = %d; want %d", len(raw.Segments), len(sample.Segments))
	}
	if got := raw.Segments[1]["end"]; got != 4.0005 {
		t.Errorf("json segments[1].end = %v; want 4.0005", got)
	}
}

func TestStamp(t *testing.T) {
	tests := []struct {
		name string
		sec  float64
		want string
	}{
		{name: "zero", sec: 0, want: "00:00:00,000"},
		{name: "millisecond", sec: 0.001, want: "00:00:00,001"},
		{name: "below half rounds down", sec: 0.0004, want: "00:00:00,000"},
		{name: "half rounds up", sec: 0.0005, want: "00:00:00,001"},
		{name: "half of a duration rounds up", sec: (500*time.Millisecond + 500*time.Microsecond).Seconds(), want: "00:00:00,501"},
		{name: "half of another duration rounds up", sec: (7*time.Second + 2500*time.Microsecond).Seconds(), want: "00:00:07,003"},
		{name: "rounds into the next second", sec: 59.9996, want: "00:01:00,000"},
		{name: "minutes and seconds", sec: 61.25, want: "00:01:01,250"},
		{name: "rounds into the next hour", sec: 3599.9995, want: "01:00:00,000"},
		{name: "over one hour", sec: 3723.042, want: "01:02:03,042"},
		{name: "over ten hours", sec: 36000 + 59*60 + 59.999, want: "10:59:59,999"},
		{name: "negative clamps to zero", sec: -1.5, want: "00:00:00,000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stamp(tc.sec, ","); got != tc.want {
				t.Errorf("stamp(%v, \",\") = %q; want %q", tc.sec, got, tc.want)
			}
			want := strings.Replace(tc.want, ",", ".", 1)
			if got := stamp(tc.sec, "."); got != want {
				t.Errorf("stamp(%v, \".\") = %q; want %q", tc.sec, got, want)
			}
		})
	}
}

var (
	srtTiming = regexp.MustCompile(`^\d{2}:\d{2}:\d{2},\d{3} --> \d{2}:\d{2}:\d{2},\d{3}$`)
	vttTiming = regexp.MustCompile(`^\d{2}:\d{2}:\d{2}\.\d{3} --> \d{2}:\d{2}:\d{2}\.\d{3}$`)
)

type cue struct {
	id, timing string
	text       []string
}

// parseCues splits subtitle output the way players do: cues are separated by
// one blank line, so any stray blank line or "-->" in text shows up as a
// malformed or extra cue.
func parseCues(t *testing.T, out, format string) []cue {
	t.Helper()
	if format == "vtt" {
		rest, ok := strings.CutPrefix(out, "WEBVTT\n\n")
		if !ok {
			t.Fatalf("vtt output %q; want it to start with \"WEBVTT\\n\\n\"", out)
		}
		out = rest
	}
	if out == "" {
		return nil
	}
	body, ok := strings.CutSuffix(out, "\n\n")
	if !ok {
		t.Fatalf("%s output %q; want it to end with a blank line", format, out)
	}
	var cues []cue
	for _, block := range strings.Split(body, "\n\n") {
		lines := strings.Split(block, "\n")
		var c cue
		if format == "srt" {
			c.id, lines = lines[0], lines[1:]
		}
		if len(lines) < 2 {
			t.Fatalf("%s cue %q; want a timing line and at least one text line", format, block)
		}
		c.timing, c.text = lines[0], lines[1:]
		timing := srtTiming
		if format == "vtt" {
			timing = vttTiming
		}
		if !timing.MatchString(c.timing) {
			t.Errorf("%s cue %q timing line %q; want HH:MM:SS%sMMM --> HH:MM:SS%sMMM", format, block, c.timing, sepOf(format), sepOf(format))
		}
		for _, l := range c.text {
			if strings.TrimSpace(l) == "" {
				t.Errorf("%s cue %q has a blank text line; want none", format, block)
			}
			if strings.Contains(l, "-->") {
				t.Errorf("%s cue text line %q contains \"-->\"; want none", format, l)
			}
		}
		cues = append(cues, c)
	}
	return cues
}

func sepOf(format string) string {
	if format == "vtt" {
		return "."
	}
	return ","
}

func TestRenderSubtitleStructure(t *testing.T) {
	for _, format := range []string{"srt", "vtt"} {
		t.Run(format, func(t *testing.T) {
			cues := parseCues(t, render(t, sample, format), format)
			if len(cues) != len(sample.Segments) {
				t.Fatalf("%s cues = %d; want %d", format, len(cues), len(sample.Segments))
			}
			wantTimings := []string{
				"00:00:00,000 --> 00:00:01,250",
				"00:00:01,250 --> 00:00:04,001",
				"00:59:59,500 --> 01:02:03,042",
			}
			for i, c := range cues {
				if format == "srt" {
					if want := []string{"1", "2", "3"}[i]; c.id != want {
						t.Errorf("srt cue %d number = %q; want %q", i, c.id, want)
					}
				}
				want := wantTimings[i]
				if format == "vtt" {
					want = strings.ReplaceAll(want, ",", ".")
				}
				if c.timing != want {
					t.Errorf("%s cue %d timing = %q; want %q", format, i, c.timing, want)
				}
				if got := strings.Join(c.text, "\n"); got != sample.Segments[i].Text {
					t.Errorf("%s cue %d text = %q; want %q", format, i, got, sample.Segments[i].Text)
				}
			}
		})
	}
}

func TestRenderNoSegments(t *testing.T) {
	tests := []struct{ format, want string }{
		{"srt", ""},
		{"vtt", "WEBVTT\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			if got := render(t, Document{Text: ""}, tc.format); got != tc.want {
				t.Errorf("Render(%q) of an empty document = %q; want %q", tc.format, got, tc.want)
			}
		})
	}
}

func TestRenderCueTextCannotBreakCues(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{name: "plain", text: "hello", want: "hello"},
		{name: "newline", text: "first line\nsecond line", want: "first line second line"},
		{name: "CRLF", text: "first\r\nsecond", want: "first second"},
		{name: "blank line", text: "before\n\nafter", want: "before after"},
		{name: "blank line with spaces", text: "before\n \t \nafter", want: "before after"},
		{name: "fake cue", text: "x\n\n2\n00:00:01,000 --> 00:00:02,000\ninjected", want: "x 2 00:00:01,000 -> 00:00:02,000 injected"},
		{name: "arrow", text: "a --> b", want: "a -> b"},
		{name: "arrow without spaces", text: "a-->b", want: "a->b"},
		{name: "long arrow", text: "a ---> b", want: "a -> b"},
		{name: "longer arrow", text: "a ----->> b", want: "a ->> b"},
		{name: "single-dash arrow kept", text: "a -> b", want: "a -> b"},
		{name: "unicode line separator", text: "a\u2028b", want: "a b"},
		{name: "surrounding whitespace", text: "\n  padded \n", want: "padded"},
	}
	for _, format := range []string{"srt", "vtt"} {
		for _, tc := range tests {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				d := Document{Segments: []Segment{
					{Start: 0, End: 1, Text: "before"},
					{Start: 1, End: 2, Text: tc.text},
					{Start: 2, End: 3, Text: "after"},
				}}
				cues := parseCues(t, render(t, d, format), format)
				if len(cues) != 3 {
					t.Fatalf("%s cues = %d; want 3", format, len(cues))
				}
				if got := strings.Join(cues[1].text, "\n"); got != tc.want {
					t.Errorf("%s cue text = %q; want %q", format, got, tc.want)
				}
				if format == "srt" && cues[2].id != "3" {
					t.Errorf("srt last cue number = %q; want %q", cues[2].id, "3")
				}
			})
		}
	}
}

func TestRenderSkipsCuesWithoutText(t *testing.T) {
	// Documents are decoded from storage, so they need not come from
	// FromResult, which already drops blank segments.
	d := Document{Segments: []Segment{
		{Start: 0, End: 1, Text: "one"},
		{Start: 1, End: 2, Text: " \n\n "},
		{Start: 2, End: 3, Text: ""},
		{Start: 3, End: 4, Text: "four"},
	}}
	for _, format := range []string{"srt", "vtt"} {
		t.Run(format, func(t *testing.T) {
			cues := parseCues(t, render(t, d, format), format)
			var got []string
			for _, c := range cues {
				got = append(got, c.id+":"+strings.Join(c.text, "|"))
			}
			want := []string{"1:one", "2:four"}
			if format == "vtt" {
				want = []string{":one", ":four"}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s cues = %q; want %q", format, got, want)
			}
		})
	}
}

func TestRenderVTTEscapesMarkup(t *testing.T) {
	// In WebVTT "<" opens a tag and "&" a character reference; SubRip has no
	// escapes, so its text stays as spoken.
	tests := []struct {
		name, text, wantVTT, wantSRT string
	}{
		{name: "less than", text: "I <3 Go", wantVTT: "I &lt;3 Go", wantSRT: "I <3 Go"},
		{name: "tag-like", text: "<b>bold</b>", wantVTT: "&lt;b>bold&lt;/b>", wantSRT: "<b>bold</b>"},
		{name: "ampersand", text: "AT&T &amp;", wantVTT: "AT&amp;T &amp;amp;", wantSRT: "AT&T &amp;"},
		{name: "greater than alone", text: "a > b", wantVTT: "a > b", wantSRT: "a > b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Document{Segments: []Segment{{Start: 0, End: 1, Text: tc.text}}}
			for format, want := range map[string]string{"vtt": tc.wantVTT, "srt": tc.wantSRT} {
				cues := parseCues(t, render(t, d, format), format)
				if len(cues) != 1 {
					t.Fatalf("%s cues = %d; want 1", format, len(cues))
				}
				if got := strings.Join(cues[0].text, "\n"); got != want {
					t.Errorf("%s cue text = %q; want %q", format, got, want)
				}
			}
		})
	}
}

func TestRenderUnknownFormat(t *testing.T) {
	for _, format := range []string{"pdf", "SRT", "text", " srt"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			err := Render(&b, sample, format)
			if err == nil {
				t.Fatalf("Render(%q) error = nil; want an error", format)
			}
			for _, f := range Formats {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("Render(%q) error = %q; want it to name %q", format, err, f)
				}
			}
			if !strings.Contains(err.Error(), format) {
				t.Errorf("Render(%q) error = %q; want it to name the format asked for", format, err)
			}
			if b.Len() != 0 {
				t.Errorf("Render(%q) wrote %q; want nothing", format, b.String())
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	tests := []struct{ name, in string }{
		{name: "empty", in: ""},
		{name: "not JSON", in: "WEBVTT\n\n"},
		{name: "truncated", in: `{"engine":"local","text":"hi`},
		{name: "array", in: `[1,2,3]`},
		{name: "wrong type", in: `{"segments":"none"}`},
		{name: "wrong time type", in: `{"segments":[{"start":"0","end":1,"text":"x"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decode(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("Decode(%q) = %+v, nil; want an error", tc.in, d)
			}
			if !strings.Contains(err.Error(), "decode transcript") {
				t.Errorf("Decode(%q) error = %q; want it to say what failed to decode", tc.in, err)
			}
			if !reflect.DeepEqual(d, Document{}) {
				t.Errorf("Decode(%q) document = %+v; want the zero Document on error", tc.in, d)
			}
		})
	}
}

// goldenDoc has a cue that needs cleaning, so the golden files also pin the
// treatment of multi-line engine text.
var goldenDoc = Document{
	Engine:   "local",
	Language: "en",
	Duration: time.Hour + 5*time.Minute,
	Text:     "Hello there. How are you? --> Fine, thanks & you? See you in an hour.",
	Segments: []Segment{
		{Start: 0.5, End: 2.25, Text: "Hello there."},
		{Start: 2.25, End: 4.1, Text: "How are you?\n\n--> Fine,\nthanks & you?"},
		{Start: 3600.0004, End: 3661.9996, Text: "See you in an hour."},
	},
}

func TestRenderGolden(t *testing.T) {
	for _, format := range []string{"srt", "vtt"} {
		t.Run(format, func(t *testing.T) {
			got := render(t, goldenDoc, format)
			path := filepath.Join("testdata", "sample."+format)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("Render(%q) =\n%s\nwant (%s):\n%s", format, got, path, want)
			}
		})
	}
}
