package local

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/testaudio"
)

func newEngine(t *testing.T) *Engine {
	t.Helper()
	testaudio.Require(t)
	e, err := New(Config{})
	if err != nil {
		t.Skipf("pocketsphinx is not installed (%v); run make test, which installs it", err)
	}
	return e
}

// Scenario: The local engine reaches the reference accuracy on LibriVox
func TestRecognisesLibriVox(t *testing.T) {
	e := newEngine(t)
	refs := testaudio.References(t)
	for _, id := range []string{"sense_and_sensibility_01_austen_64kb-0870", "sense_and_sensibility_01_austen_64kb-0920"} {
		t.Run(id, func(t *testing.T) {
			sub, err := e.Submit(context.Background(), engine.Request{AudioPath: testaudio.LibriVox(id)})
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if !sub.Done() {
				t.Fatal("the local engine must answer synchronously")
			}
			res := sub.Result
			if w := testaudio.WER(refs[id], res.Text); w > 0.40 {
				t.Errorf("WER = %.2f; want <= 0.40\nref: %s\nhyp: %s", w, refs[id], res.Text)
			}
			if len(res.Segments) == 0 {
				t.Fatal("no segments")
			}
			last := res.Segments[len(res.Segments)-1]
			if last.End <= res.Segments[0].Start || last.End > 8*time.Second {
				t.Errorf("segment times %v..%v do not fit a 7 s recording", res.Segments[0].Start, last.End)
			}
			for _, tok := range []string{"<s>", "</s>", "<sil>", "(2)", "[NOISE]"} {
				if strings.Contains(res.Text, tok) {
					t.Errorf("text %q contains recogniser token %q", res.Text, tok)
				}
			}
			if len(res.Raw) == 0 {
				t.Error("raw output not kept")
			}
			checkWordTimes(t, res, strings.Fields(res.Text))
		})
	}
}

// Scenario: The local engine hears a converted voice note
// Scenario: The local engine times every word
func TestVoiceNoteAfterConversion(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	wav := filepath.Join(dir, "voice.wav")
	testaudio.FFmpeg(t, "-i", testaudio.VoiceNote(t, dir), "-ar", "16000", "-ac", "1", "-c:a", "pcm_s16le", wav)
	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: wav, Language: "en"})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if got := sub.Result.Text; got != testaudio.GoForwardText {
		t.Errorf("text = %q; want %q", got, testaudio.GoForwardText)
	}
	checkWordTimes(t, sub.Result, strings.Fields(testaudio.GoForwardText))
}

// checkWordTimes wants one timed word per word of the text, in order, each
// inside its segment and none starting before the one before it.
func checkWordTimes(t *testing.T, res *engine.Result, want []string) {
	t.Helper()
	if len(res.Words) != len(want) {
		t.Fatalf("%d words %+v; want %d (%q)", len(res.Words), res.Words, len(want), want)
	}
	for i, w := range res.Words {
		if w.Text != want[i] {
			t.Errorf("word %d = %q; want %q", i, w.Text, want[i])
		}
		if w.End <= w.Start || (i > 0 && w.Start < res.Words[i-1].End) {
			t.Errorf("word %d %q at %v..%v; want increasing times after %v", i, w.Text, w.Start, w.End, res.Words[max(i-1, 0)].End)
		}
	}
	if first, last := res.Words[0], res.Words[len(res.Words)-1]; first.Start < res.Segments[0].Start || last.End > res.Segments[len(res.Segments)-1].End {
		t.Errorf("words %v..%v outside the segments", first.Start, last.End)
	}
}

// Scenario: Silence gives no text
func TestSilenceGivesNoText(t *testing.T) {
	e := newEngine(t)
	wav := filepath.Join(t.TempDir(), "silence.wav")
	testaudio.FFmpeg(t, "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", "3", "-c:a", "pcm_s16le", wav)
	sub, err := e.Submit(context.Background(), engine.Request{AudioPath: wav})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if got := sub.Result.Text; got != "" {
		t.Errorf("text of silence = %q; want empty", got)
	}
}

func TestOtherLanguagesAreRejected(t *testing.T) {
	e := newEngine(t)
	_, err := e.Submit(context.Background(), engine.Request{AudioPath: "unused.wav", Language: "ru"})
	ee, ok := engine.AsError(err)
	if !ok || ee.Kind != engine.Rejected {
		t.Fatalf("error = %v; want an engine error of kind %s", err, engine.Rejected)
	}
}

// Scenario: The local engine stops when its call is cancelled
func TestCancelStopsRecogniser(t *testing.T) {
	e := newEngine(t)
	long := filepath.Join(t.TempDir(), "long.wav")
	src := testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870")
	testaudio.FFmpeg(t, "-stream_loop", "40", "-i", src, "-c:a", "pcm_s16le", long)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Submit(ctx, engine.Request{AudioPath: long})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v; want context.DeadlineExceeded", err)
	}
	if _, isEngine := engine.AsError(err); isEngine {
		t.Error("a cancelled call must not look like an engine failure")
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("stopping took %v", time.Since(start))
	}
}

func TestParseSkipsFillersAndAlternates(t *testing.T) {
	out := "he was not\n<s> 0.130 0.220 0.999800\nhe 0.230 0.330 0.99\nwas(2) 0.340 0.560 0.99\n[SPEECH] 0.990 1.120 0.52\nnot 0.570 0.980 0.99\n</s> 2.810 3.100 1.0\n" +
		"go forward ten meters\n<s> 5.0 5.1 1.0\n<sil> 5.1 5.2 1.0\ngo 5.2 5.4 1.0\nforward 5.4 5.9 1.0\nten 5.9 6.1 1.0\nmeters 6.1 6.5 1.0\n</s> 6.5 6.6 1.0\n"
	res := parse([]byte(out))
	if res.Text != "he was not go forward ten meters" {
		t.Errorf("text = %q", res.Text)
	}
	if len(res.Segments) != 2 {
		t.Fatalf("segments = %d; want 2", len(res.Segments))
	}
	if n := len(res.Words); n != 7 || res.Words[3] != (engine.Word{Start: 5200 * time.Millisecond, End: 5400 * time.Millisecond, Text: "go"}) {
		t.Errorf("words = %+v; want 7, the fourth go at 5.2..5.4 s", res.Words)
	}
	if s := res.Segments[1]; s.Text != "go forward ten meters" || s.Start != 5200*time.Millisecond || s.End != 6500*time.Millisecond {
		t.Errorf("second segment = %+v", s)
	}
}

// Scenario: The local engine takes long recordings in chunks of a few minutes by default
func TestLocalEngineChunksLongRecordings(t *testing.T) {
	reg := engine.Registry{Registration}
	settings := reg.NewSettings()
	for _, v := range reg.Vars() {
		if err := v.Set(settings, v.Default); err != nil {
			t.Fatalf("%s default %q: %v", v.Env, v.Default, err)
		}
	}
	if err := reg.Validate(settings, Name); err != nil {
		t.Fatal(err)
	}
	built, err := reg.Build(settings, Name)
	if err != nil {
		t.Skipf("pocketsphinx is not installed: %v", err)
	}
	lim, ok := built[Name].(engine.Limiter)
	if !ok || lim.Limits().MaxDuration != DefaultChunkDuration || DefaultChunkDuration > 10*time.Minute {
		t.Errorf("limits = %+v; want chunks of %s, a few minutes", lim, DefaultChunkDuration)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"0", true}, {"2m", true}, {"10s", false}, {"-1m", false}} {
		s := reg.NewSettings()
		for _, v := range reg.Vars() {
			val := v.Default
			if v.Env == "POCKETSPHINX_CHUNK_DURATION" {
				val = tc.value
			}
			if err := v.Set(s, val); err != nil {
				t.Fatal(err)
			}
		}
		if err := reg.Validate(s, Name); (err == nil) != tc.ok {
			t.Errorf("POCKETSPHINX_CHUNK_DURATION=%s: %v; want ok %v", tc.value, err, tc.ok)
		}
	}
}
