package audio

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// Type is a kind of recording file that engines may take as it is, without
// a conversion: what to name it and what media type to send it as.
type Type struct {
	// Name is the container: "flac", "mp3", "m4a", "ogg", "wav", "webm".
	Name string
	// Ext is the file extension, with the dot.
	Ext string
	// MIME is the media type.
	MIME string
}

// The types TypeOf and Detect know: the common audio files that speech
// services document as their input.
var (
	FLAC = Type{Name: "flac", Ext: ".flac", MIME: "audio/flac"}
	MP3  = Type{Name: "mp3", Ext: ".mp3", MIME: "audio/mpeg"}
	M4A  = Type{Name: "m4a", Ext: ".m4a", MIME: "audio/mp4"}
	Ogg  = Type{Name: "ogg", Ext: ".ogg", MIME: "audio/ogg"}
	WAV  = Type{Name: "wav", Ext: ".wav", MIME: "audio/wav"}
	WebM = Type{Name: "webm", Ext: ".webm", MIME: "audio/webm"}
)

// TypeOf says which of the known types a probed file is, judged by its
// container and the codec of its sound, as the probe names them (the
// in-process readers and ffprobe name them alike). A file with a moving
// picture is none of them: an engine would receive the picture too.
func TypeOf(info Info) (Type, bool) {
	if info.Video {
		return Type{}, false
	}
	containers := strings.Split(info.Container, ",")
	has := func(name string) bool {
		for _, c := range containers {
			if c == name {
				return true
			}
		}
		return false
	}
	switch c := info.Codec; {
	case info.Container == "flac" && c == "flac":
		return FLAC, true
	case info.Container == "mp3" && c == "mp3":
		return MP3, true
	case has("mp4") && c == "aac":
		return M4A, true
	case info.Container == "ogg" && (c == "opus" || c == "vorbis"):
		return Ogg, true
	case info.Container == "wav" && linearPCM[c]:
		return WAV, true
	case has("webm") && (c == "opus" || c == "vorbis"):
		// ffprobe names Matroska and WebM together; Detect tells them
		// apart by the file's own doctype.
		return WebM, true
	}
	return Type{}, false
}

// linearPCM are the codecs of plain PCM WAV files as the probes name them
// ("pcm" is the in-process reader's); companded and ADPCM WAVs are not
// among them.
var linearPCM = map[string]bool{"pcm": true, "pcm_u8": true, "pcm_s16le": true, "pcm_s24le": true, "pcm_s32le": true, "pcm_f32le": true}

// Matches reports whether a probed file already is in format f, so that a
// conversion into f would rewrite it into itself. Only WAV16kMono is
// checked so far; for any other format the answer is no.
func (f Format) Matches(info Info) bool {
	if f.Name != WAV16kMono.Name {
		return false
	}
	// Only the in-process reader vouches for a plain header: pocketsphinx
	// skips a WAV header by its usual size, and an extensible format's
	// longer one would reach it as sound.
	t, ok := TypeOf(info)
	plain16 := info.Codec == "pcm" && info.Bits == 16
	return ok && t == WAV && plain16 && info.SampleRate == f.SampleRate && info.Channels == f.Channels
}

// Detect tells a file's type from its first bytes, without a probe and
// whatever the file is named: a step that receives only a blob key can
// still name the file by what it is. ok is false for anything else.
func Detect(path string) (Type, bool) {
	f, err := os.Open(path)
	if err != nil {
		return Type{}, false
	}
	defer func() { _ = f.Close() }() // only read
	head := make([]byte, 64)
	n, _ := io.ReadFull(f, head)
	return detect(head[:n])
}

func detect(b []byte) (Type, bool) {
	switch {
	case bytes.HasPrefix(b, []byte("fLaC")):
		return FLAC, true
	case bytes.HasPrefix(b, []byte("OggS")):
		return Ogg, true
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return WAV, true
	case len(b) >= 8 && string(b[4:8]) == "ftyp":
		return M4A, true
	case bytes.HasPrefix(b, []byte{0x1A, 0x45, 0xDF, 0xA3}) && bytes.Contains(b, []byte("webm")):
		return WebM, true
	case bytes.HasPrefix(b, []byte("ID3")):
		return MP3, true
	case len(b) >= 2 && b[0] == 0xFF && b[1]&0xE0 == 0xE0 && b[1]&0x06 != 0:
		// An MPEG audio frame; layer bits of zero are ADTS AAC instead.
		return MP3, true
	}
	return Type{}, false
}
