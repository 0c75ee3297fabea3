package audio

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/testaudio"
)

const s = time.Second

func checkCover(t *testing.T, spans []Span, total, maxLen time.Duration) {
	t.Helper()
	var at time.Duration
	for i, sp := range spans {
		if sp.Offset != at {
			t.Fatalf("span %d starts at %v; want %v (spans must be contiguous): %v", i, sp.Offset, at, spans)
		}
		if sp.Duration <= 0 || sp.Duration > maxLen {
			t.Fatalf("span %d lasts %v; want (0, %v]: %v", i, sp.Duration, maxLen, spans)
		}
		at += sp.Duration
	}
	if at != total {
		t.Fatalf("spans end at %v; want %v", at, total)
	}
}

func TestPlan(t *testing.T) {
	t.Run("short recording is one span", func(t *testing.T) {
		got := Plan(30*s, 60*s, []Silence{{10 * s, 11 * s}})
		if len(got) != 1 || got[0] != (Span{0, 30 * s}) {
			t.Fatalf("Plan = %v; want one span of 30s", got)
		}
	})
	t.Run("cuts in the middle of the longest late pause", func(t *testing.T) {
		silences := []Silence{
			{10 * s, 12 * s},                      // too early: before 60% of the span
			{40 * s, 40*s + 500*time.Millisecond}, // late, short
			{50 * s, 52 * s},                      // late, longest: the cut
			{58 * s, 59 * s},
			{70 * s, 80 * s}, // belongs to the second span
		}
		got := Plan(100*s, 60*s, silences)
		checkCover(t, got, 100*s, 60*s)
		if got[0].Duration != 51*s {
			t.Errorf("first cut at %v; want 51s, the middle of the longest pause: %v", got[0].Duration, got)
		}
	})
	t.Run("no pause means a cut at the limit", func(t *testing.T) {
		got := Plan(130*s, 60*s, nil)
		checkCover(t, got, 130*s, 60*s)
		if len(got) != 3 || got[0].Duration != 60*s || got[1].Duration != 60*s {
			t.Errorf("Plan = %v; want 60s, 60s, 10s", got)
		}
	})
	t.Run("a pause running to the end", func(t *testing.T) {
		got := Plan(100*s, 80*s, []Silence{{70 * s, -1}})
		checkCover(t, got, 100*s, 80*s)
		if got[0].Duration != 80*s {
			t.Errorf("Plan = %v; the open pause's middle (85s) is beyond the limit, so the cut is at 80s", got)
		}
	})
	t.Run("many spans stay within the limit", func(t *testing.T) {
		var silences []Silence
		for at := 7 * s; at < time.Hour; at += 13 * s {
			silences = append(silences, Silence{at, at + 700*time.Millisecond})
		}
		got := Plan(time.Hour, 45*s, silences)
		checkCover(t, got, time.Hour, 45*s)
		for i, sp := range got[:len(got)-1] {
			if sp.Duration < 27*s {
				t.Errorf("span %d lasts %v; pauses every 13s allow at least 60%% of the limit", i, sp.Duration)
			}
		}
	})
}

// A recording built from speech and known pauses is cut only inside the
// pauses, and the pieces add up to the whole.
func TestSilencesAndCut(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	const pause = 1500 * time.Millisecond
	long, _ := testaudio.Long(t, dir, 50*s, pause)
	ctx := context.Background()
	info, err := tl.Probe(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	silences, err := tl.Silences(ctx, long)
	if err != nil {
		t.Fatalf("Silences: %v", err)
	}
	// Each of the ten recordings is followed by a pause of 1.5 s.
	var inserted int
	for _, sl := range silences {
		if sl.End < 0 || sl.End-sl.Start >= pause-200*time.Millisecond {
			inserted++
		}
	}
	if inserted < 10 {
		t.Fatalf("found %d pauses of about %v; want at least 10: %v", inserted, pause, silences)
	}

	spans := Plan(info.Duration, 15*s, silences)
	checkCover(t, spans, info.Duration, 15*s)
	if len(spans) < 4 {
		t.Fatalf("Plan = %v; want at least 4 spans of 15s", spans)
	}
	var sum time.Duration
	for i, sp := range spans {
		if i > 0 && !inSilence(sp.Offset, silences) {
			t.Errorf("span %d starts at %v, outside every pause", i, sp.Offset)
		}
		out := filepath.Join(dir, "chunk"+strconv.Itoa(i)+FLAC16kMono.Ext)
		if err := tl.Cut(ctx, long, out, sp, FLAC16kMono); err != nil {
			t.Fatalf("Cut %v: %v", sp, err)
		}
		got, err := tl.Probe(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if diff := got.Duration - sp.Duration; diff < -20*time.Millisecond || diff > 20*time.Millisecond {
			t.Errorf("chunk %d lasts %v; want %v", i, got.Duration, sp.Duration)
		}
		sum += got.Duration
	}
	if diff := sum - info.Duration; diff < -50*time.Millisecond || diff > 50*time.Millisecond {
		t.Errorf("chunks add up to %v; the recording lasts %v", sum, info.Duration)
	}
}

func inSilence(at time.Duration, silences []Silence) bool {
	for _, sl := range silences {
		if at >= sl.Start && (sl.End < 0 || at <= sl.End) {
			return true
		}
	}
	return false
}

func TestCutStopsOnCancel(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	long, _ := testaudio.Long(t, dir, 20*s, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tl.Cut(ctx, long, filepath.Join(dir, "x.flac"), Span{0, 5 * s}, FLAC16kMono); err != context.Canceled {
		t.Errorf("Cut with a cancelled context = %v; want context.Canceled", err)
	}
	if _, err := tl.Silences(ctx, long); err != context.Canceled {
		t.Errorf("Silences with a cancelled context = %v; want context.Canceled", err)
	}
}
