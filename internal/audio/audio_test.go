package audio

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/testaudio"
)

func tools(t *testing.T) *Tools {
	t.Helper()
	testaudio.Require(t)
	tl, err := NewTools()
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProbeAndConvertVoiceNote(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	note := testaudio.VoiceNote(t, dir)

	info, err := tl.Probe(context.Background(), note)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if info.Codec != "opus" {
		t.Errorf("codec = %q; want opus", info.Codec)
	}
	// goforward.raw holds 89160 bytes: 2.786 s at 16 kHz 16-bit.
	if d := info.Duration; d < 2700*time.Millisecond || d > 2900*time.Millisecond {
		t.Errorf("probed duration = %v; want about 2.79s", d)
	}

	for _, f := range []Format{WAV16kMono, FLAC16kMono} {
		t.Run(f.Name, func(t *testing.T) {
			out := filepath.Join(dir, "out"+f.Ext)
			var reports int
			d, err := tl.Convert(context.Background(), note, out, f, func(time.Duration) { reports++ })
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if d < 2700*time.Millisecond || d > 2900*time.Millisecond {
				t.Errorf("converted duration = %v; want about 2.79s", d)
			}
			if reports == 0 {
				t.Error("progress was never reported")
			}
			got, err := tl.Probe(context.Background(), out)
			if err != nil {
				t.Fatalf("Probe output: %v", err)
			}
			if got.Container != f.Name {
				t.Errorf("container = %q; want %q", got.Container, f.Name)
			}
		})
	}
}

func TestBadInputIsAVerdict(t *testing.T) {
	tl := tools(t)
	noAudio := filepath.Join(t.TempDir(), "silent-film.mp4")
	testaudio.FFmpeg(t, "-f", "lavfi", "-i", "testsrc=duration=1:size=64x64:rate=5", "-pix_fmt", "yuv420p", noAudio)
	tests := []struct {
		name string
		path string
		want error
	}{
		{"empty file", write(t, "empty.mp3", nil), ErrEmpty},
		{"text named mp3", write(t, "notes.mp3", []byte("this is a shopping list, not a song\n")), ErrUnsupported},
		{"random bytes", write(t, "noise.ogg", []byte{0x13, 0x37, 0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5}), ErrUnsupported},
		{"video without sound", noAudio, ErrUnsupported},
		{"playlist naming a local file", write(t, "list.m3u8", []byte("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n"+testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0880")+"\n#EXT-X-ENDLIST\n")), ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tl.Probe(context.Background(), tc.path)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Probe error = %v; want %v", err, tc.want)
			}
			var in *InputError
			if !errors.As(err, &in) {
				t.Fatalf("Probe error %T is not an *InputError", err)
			}
			if filepath.IsAbs(in.Detail) || containsPath(in.Error(), tc.path) {
				t.Errorf("message %q leaks the local path", in.Error())
			}
		})
	}
}

func containsPath(msg, path string) bool {
	return path != "" && strings.Contains(msg, path)
}

func TestConvertTruncatedRecording(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	src := testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870")
	full := filepath.Join(dir, "full.ogg")
	testaudio.FFmpeg(t, "-i", src, "-c:a", "libopus", full)
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	cut := write(t, "cut.ogg", data[:len(data)/2])
	d, err := tl.Convert(context.Background(), cut, filepath.Join(dir, "cut.wav"), WAV16kMono, nil)
	// A cut-off recording keeps what can be decoded, as players do.
	if err != nil {
		t.Fatalf("Convert of a truncated file: %v", err)
	}
	if d <= time.Second || d >= 7*time.Second {
		t.Errorf("duration = %v; want part of the 7.1 s original", d)
	}
}

func TestConvertStopsOnCancel(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	long := filepath.Join(dir, "long.wav")
	testaudio.FFmpeg(t, "-f", "lavfi", "-i", "sine=frequency=440:duration=3600:sample_rate=48000", "-ac", "2", long)
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	_, err := tl.Convert(ctx, long, filepath.Join(dir, "out.flac"), FLAC16kMono, func(time.Duration) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v; want context.Canceled", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("cancel took %v", time.Since(start))
	}
}

// Scenario: Voice notes and WAV files are probed without starting ffprobe, with ffprobe's durations
func TestSniffAgreesWithFFprobe(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	note := testaudio.VoiceNote(t, dir)
	wav := testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870")
	longOgg := filepath.Join(dir, "long.ogg")
	testaudio.FFmpeg(t, "-i", wav, "-c:a", "libopus", "-b:a", "24k", longOgg)
	stereo := filepath.Join(dir, "stereo.wav")
	testaudio.FFmpeg(t, "-i", wav, "-ac", "2", "-ar", "44100", stereo)
	for _, path := range []string{note, wav, longOgg, stereo} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			got, ok := sniff(path)
			if !ok {
				t.Fatalf("sniff declined %s", path)
			}
			want, err := tl.probe(context.Background(), path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := got.Duration - want.Duration; d < -30*time.Millisecond || d > 30*time.Millisecond {
				t.Errorf("sniffed duration %v; ffprobe says %v", got.Duration, want.Duration)
			}
		})
	}
	// What sniff does not know goes to ffprobe, whose verdicts stand.
	vorbis := filepath.Join(dir, "vorbis.ogg")
	testaudio.FFmpeg(t, "-i", note, "-c:a", "libvorbis", vorbis)
	mp3 := filepath.Join(dir, "a.mp3")
	testaudio.FFmpeg(t, "-i", note, mp3)
	truncated := write(t, "cut.wav", []byte("RIFF\x00\x00\x00\x00WAVEfmt "))
	for _, path := range []string{vorbis, mp3, truncated, write(t, "notes.ogg", []byte("OggS but nothing else"))} {
		if info, ok := sniff(path); ok {
			t.Errorf("sniff took %s: %+v", filepath.Base(path), info)
		}
	}
}

// Scenario: A recording cut short is taken for what it holds
func TestSniffTellsARecordingCutShort(t *testing.T) {
	testaudio.Require(t)
	dir := t.TempDir()
	src := testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870")
	full := filepath.Join(dir, "full.ogg")
	testaudio.FFmpeg(t, "-i", src, "-c:a", "libopus", full)
	wav := filepath.Join(dir, "full.wav")
	testaudio.FFmpeg(t, "-i", src, wav)
	info, cut, ok := Sniff(full)
	if !ok || cut || info.Duration < 7*time.Second {
		t.Fatalf("Sniff(complete ogg) = %+v, cut %v, ok %v; want a whole 7.1 s", info, cut, ok)
	}
	if _, cut, ok := Sniff(wav); !ok || cut {
		t.Errorf("Sniff(complete wav): cut %v, ok %v", cut, ok)
	}
	for name, src := range map[string]string{"ogg": full, "wav": wav} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		half := write(t, "cut."+name, data[:len(data)/2])
		info, cut, ok := Sniff(half)
		if !ok || !cut || info.Duration <= time.Second || info.Duration >= 5*time.Second {
			t.Errorf("Sniff(half a %s) = %+v, cut %v, ok %v; want cut short at about 3.5 s", name, info, cut, ok)
		}
	}
}
