package transcript

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

var dialogue = Document{
	Engine:   "assemblyai",
	Language: "en",
	Duration: 4 * time.Second,
	Text:     "Hello there. Hi.",
	Segments: []Segment{
		{Start: 0, End: 1.5, Text: "Hello there.", Speaker: "A"},
		{Start: 2, End: 2.5, Text: "Hi.", Speaker: "B"},
	},
	Words: []Word{
		{Word: "Hello", Start: 0, End: 0.7, Speaker: "A"},
		{Word: "there.", Start: 0.8, End: 1.5, Speaker: "A"},
		{Word: "Hi.", Start: 2, End: 2.5, Speaker: "B"},
	},
}

// Scenario: Words and speakers reach the stored transcript
func TestFromResultWordsAndSpeakers(t *testing.T) {
	r := engine.Result{
		Text:     "Hello there. Hi.",
		Segments: []engine.Segment{{Start: 0, End: 1500 * time.Millisecond, Text: "Hello there.", Speaker: "A"}, {Start: 2 * time.Second, End: 2500 * time.Millisecond, Text: " Hi. ", Speaker: "B"}},
		Words: []engine.Word{
			{Start: 0, End: 700 * time.Millisecond, Text: "Hello", Speaker: "A"},
			{Start: 800 * time.Millisecond, End: 1500 * time.Millisecond, Text: "there.", Speaker: "A"},
			{Start: 1600 * time.Millisecond, End: 1700 * time.Millisecond, Text: " "},
			{Start: 2 * time.Second, End: 2500 * time.Millisecond, Text: "Hi.", Speaker: "B"},
		},
	}
	got := FromResult("assemblyai", 4*time.Second, r)
	got.Language = "en"
	if !reflect.DeepEqual(got, dialogue) {
		t.Errorf("FromResult = %+v; want %+v", got, dialogue)
	}
	if !got.Speakers() {
		t.Error("Speakers() = false; want true")
	}
	if sample.Speakers() {
		t.Error("Speakers() of a transcript without labels = true; want false")
	}
}

// Scenario: A transcript stored before words existed is still read
func TestDecodeWithoutWords(t *testing.T) {
	d, err := Decode(strings.NewReader(`{"engine":"local","duration":2000000000,"text":"go forward","segments":[{"start":0,"end":2,"text":"go forward"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Words != nil || d.Speakers() || len(d.Segments) != 1 || d.Segments[0].Text != "go forward" {
		t.Errorf("Decode = %+v; want one segment, no words, no speakers", d)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(render(t, d, "json")), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["words"]; ok {
		t.Errorf("json of a transcript without words has words: %v", raw["words"])
	}
}

// Scenario: Chunked words move by their chunk's offset
func TestMergeShiftsWords(t *testing.T) {
	part := func(w string) Document {
		return Document{Text: w, Segments: []Segment{{Start: 0.5, End: 1, Text: w, Speaker: "A"}}, Words: []Word{{Word: w, Start: 0.5, End: 1, Speaker: "A"}}}
	}
	got := Merge("local", 20*time.Second, []Part{{Offset: 0, Doc: part("one")}, {Offset: 10 * time.Second, Doc: part("two")}})
	want := []Word{{Word: "one", Start: 0.5, End: 1, Speaker: "A"}, {Word: "two", Start: 10.5, End: 11, Speaker: "A"}}
	if !reflect.DeepEqual(got.Words, want) {
		t.Errorf("merged words = %+v; want %+v", got.Words, want)
	}
	if got.Segments[1].Start != 10.5 || got.Segments[1].Speaker != "A" {
		t.Errorf("second segment = %+v; want start 10.5 with its speaker", got.Segments[1])
	}
}

// Scenario: Subtitles name the speakers
func TestRenderSpeakers(t *testing.T) {
	d := dialogue
	d.Segments = append(append([]Segment(nil), d.Segments...), Segment{Start: 3, End: 4, Text: "x", Speaker: "Dr <Who> & co"})
	vtt := render(t, d, "vtt")
	for _, want := range []string{"00:00:00.000 --> 00:00:01.500\n<v Speaker A>Hello there.\n", "<v Speaker B>Hi.\n", "<v Dr &lt;Who&gt; &amp; co>x\n"} {
		if !strings.Contains(vtt, want) {
			t.Errorf("vtt = %q; want it to hold %q", vtt, want)
		}
	}
	srt := render(t, d, "srt")
	if !strings.Contains(srt, "1\n00:00:00,000 --> 00:00:01,500\nSpeaker A: Hello there.\n") {
		t.Errorf("srt = %q; want the first cue named Speaker A", srt)
	}
	var got JSONDocument
	if err := json.Unmarshal([]byte(render(t, d, "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Words) != 3 || got.Words[2].Speaker != "B" || got.Segments[0].Speaker != "A" {
		t.Errorf("json = %+v; want words and speakers", got)
	}
	if plain := render(t, sample, "vtt"); strings.Contains(plain, "<v") {
		t.Errorf("vtt without speakers has voice tags: %q", plain)
	}
}
