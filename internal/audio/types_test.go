package audio

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/transcriber/transcriber/internal/testaudio"
)

func TestTypeOfAndDetectAgree(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	note := testaudio.VoiceNote(t, dir)
	tests := []struct {
		name string
		args []string
		want Type // zero: neither knows it
	}{
		{"a.flac", []string{"-c:a", "flac"}, FLAC},
		{"a.mp3", []string{"-c:a", "libmp3lame"}, MP3},
		{"a.m4a", []string{"-c:a", "aac"}, M4A},
		{"opus.ogg", []string{"-c:a", "libopus"}, Ogg},
		{"vorbis.ogg", []string{"-c:a", "libvorbis"}, Ogg},
		{"a.wav", []string{"-c:a", "pcm_s16le"}, WAV},
		{"a.webm", []string{"-c:a", "libopus"}, WebM},
		{"a.mka", []string{"-c:a", "libopus"}, Type{}},
		{"a.wma", []string{"-c:a", "wmav2"}, Type{}},
		{"video.mp4", []string{"-f", "lavfi", "-i", "color=c=black:s=64x64:d=3", "-c:v", "mpeg4", "-c:a", "aac", "-shortest"}, Type{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name)
			testaudio.FFmpeg(t, append(append([]string{"-i", note}, tc.args...), out)...)
			info, err := tl.Probe(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := TypeOf(info)
			det, detOK := Detect(out)
			if tc.want == (Type{}) {
				if ok && detOK && got == det {
					t.Errorf("TypeOf(%+v) = %v and Detect agrees; want a file no engine takes as it is", info, got)
				}
				return
			}
			if !ok || got != tc.want {
				t.Errorf("TypeOf(%+v) = %v, %v; want %v", info, got, ok, tc.want)
			}
			if !detOK || det != tc.want {
				t.Errorf("Detect = %v, %v; want %v", det, detOK, tc.want)
			}
		})
	}
}

func TestMatchesOnlyTheExactFormat(t *testing.T) {
	tl := tools(t)
	dir := t.TempDir()
	src := testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870")
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"16k.wav", []string{"-ar", "16000", "-ac", "1", "-c:a", "pcm_s16le"}, true},
		{"stereo.wav", []string{"-ar", "16000", "-ac", "2", "-c:a", "pcm_s16le"}, false},
		{"44k.wav", []string{"-ar", "44100", "-ac", "1", "-c:a", "pcm_s16le"}, false},
		{"24bit.wav", []string{"-ar", "16000", "-ac", "1", "-c:a", "pcm_s24le"}, false},
		{"16k.flac", []string{"-ar", "16000", "-ac", "1", "-c:a", "flac"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name)
			testaudio.FFmpeg(t, append(append([]string{"-i", src}, tc.args...), out)...)
			info, err := tl.Probe(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			if got := WAV16kMono.Matches(info); got != tc.want {
				t.Errorf("WAV16kMono.Matches(%+v) = %v; want %v", info, got, tc.want)
			}
		})
	}
}
