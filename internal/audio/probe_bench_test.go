package audio

import (
	"context"
	"testing"

	"github.com/transcriber/transcriber/internal/testaudio"
)

func BenchmarkProbeVoiceNote(b *testing.B) {
	testaudio.Require(b)
	tl, _ := NewTools()
	note := testaudio.VoiceNote(b, b.TempDir())
	b.Run("sniff", func(b *testing.B) {
		for b.Loop() {
			if _, err := tl.Probe(context.Background(), note); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ffprobe", func(b *testing.B) {
		for b.Loop() {
			if _, err := tl.probe(context.Background(), note, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
