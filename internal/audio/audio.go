// Package audio inspects and normalises recordings with ffprobe and ffmpeg.
// Files are streamed by the tools from disk, so memory use does not depend
// on the length of a recording.
package audio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Format is what an engine wants to receive.
type Format struct {
	// Name identifies the format in blob keys and logs.
	Name string
	// Ext is the file extension, with the dot.
	Ext string
	// MIME is the media type sent to engines that ask for one.
	MIME       string
	SampleRate int
	Channels   int
	// args are the ffmpeg output options that produce the format.
	args []string
}

var (
	// WAV16kMono is raw 16-bit PCM at 16 kHz: what pocketsphinx reads.
	WAV16kMono = Format{Name: "wav", Ext: ".wav", MIME: "audio/wav", SampleRate: 16000, Channels: 1,
		args: []string{"-c:a", "pcm_s16le", "-f", "wav"}}
	// FLAC16kMono is lossless and about half the size of WAV; every
	// OpenAI-compatible server reads it, and 16 kHz mono is what Whisper
	// models resample to anyway.
	FLAC16kMono = Format{Name: "flac", Ext: ".flac", MIME: "audio/flac", SampleRate: 16000, Channels: 1,
		args: []string{"-c:a", "flac", "-f", "flac"}}
	// OggOpus16kMono is wideband speech at 20 kbit/s (the rate Opus
	// recommends for it), a twelfth of WAV, for engines that take the audio
	// inside a size-limited request (Yandex SpeechKit). Constrained VBR
	// keeps the size near 2.5 kB per second of audio, so a byte limit maps
	// onto a duration.
	OggOpus16kMono = Format{Name: "opus", Ext: ".ogg", MIME: "audio/ogg", SampleRate: 16000, Channels: 1,
		args: []string{"-c:a", "libopus", "-b:a", "20k", "-vbr", "constrained", "-application", "voip", "-f", "ogg"}}
)

// Sentinel errors for input that no retry can fix.
var (
	// ErrEmpty: the file has no bytes, or decodes to no sound at all.
	ErrEmpty = errors.New("the recording is empty")
	// ErrUnsupported: not a recording ffmpeg can read, or no audio in it.
	ErrUnsupported = errors.New("the file is not audio or video in a format that can be decoded")
)

// InputError is a definitive verdict on the input, with ffmpeg's reason.
type InputError struct {
	Err    error // ErrEmpty or ErrUnsupported
	Detail string
}

func (e *InputError) Error() string {
	if e.Detail == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Detail
}

func (e *InputError) Unwrap() error { return e.Err }

// Info describes a probed file.
type Info struct {
	Container string
	Codec     string
	Duration  time.Duration
	Size      int64
	// SampleRate, Channels and Bits (per sample, PCM only) describe the
	// first audio track where the probe read them; zero when it did not.
	SampleRate int
	Channels   int
	Bits       int
	// CutShort: the container ends before its recording does (see Sniff);
	// only the in-process readers can tell, so files that ffprobe reads
	// are never marked.
	CutShort bool
	// Video: the file has a moving picture besides its sound, not only a
	// cover image.
	Video bool
}

// Tools runs ffprobe and ffmpeg.
type Tools struct {
	FFmpeg  string
	FFprobe string
}

// NewTools finds ffmpeg and ffprobe on PATH.
func NewTools() (*Tools, error) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("ffmpeg not found on PATH (install the ffmpeg package): %w", err)
	}
	ffprobe, err := exec.LookPath("ffprobe")
	if err != nil {
		return nil, fmt.Errorf("ffprobe not found on PATH (install the ffmpeg package): %w", err)
	}
	return &Tools{FFmpeg: ffmpeg, FFprobe: ffprobe}, nil
}

// Playlist-like containers make ffmpeg open further files named inside the
// upload. Together with the file-only protocol whitelist this keeps a
// hostile upload from reading local files or reaching the network.
var refusedContainers = map[string]bool{"hls": true, "dash": true, "concat": true, "ffmetadata": true, "tty": true}

// Probe inspects the file at path: Ogg/Opus and PCM WAV from their
// headers, anything else with ffprobe. Input errors are *InputError.
func (t *Tools) Probe(ctx context.Context, path string) (Info, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, fmt.Errorf("probe %s: %w", path, err)
	}
	if st.Size() == 0 {
		return Info{}, &InputError{Err: ErrEmpty, Detail: "the file has no bytes"}
	}
	if info, cut, ok := Sniff(path); ok {
		info.CutShort = cut
		return info, nil
	}
	return t.probe(ctx, path, st.Size())
}

// probe asks ffprobe.
func (t *Tools) probe(ctx context.Context, path string, size int64) (Info, error) {
	cmd := exec.CommandContext(ctx, t.FFprobe, "-v", "error", "-protocol_whitelist", "file",
		"-print_format", "json", "-show_format", "-show_streams", "file:"+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &limitedBuffer{max: 4096, buf: &stderr}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Info{}, ctx.Err()
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return Info{}, &InputError{Err: ErrUnsupported, Detail: toolMessage(stderr.String(), path)}
		}
		return Info{}, fmt.Errorf("run ffprobe: %w", err)
	}
	var out struct {
		Streams []struct {
			CodecType     string `json:"codec_type"`
			CodecName     string `json:"codec_name"`
			Duration      string `json:"duration"`
			SampleRate    string `json:"sample_rate"`
			Channels      int    `json:"channels"`
			BitsPerSample int    `json:"bits_per_sample"`
			Disposition   struct {
				AttachedPic int `json:"attached_pic"`
			} `json:"disposition"`
		} `json:"streams"`
		Format struct {
			FormatName string `json:"format_name"`
			Duration   string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return Info{}, fmt.Errorf("read ffprobe output: %w", err)
	}
	info := Info{Container: out.Format.FormatName, Size: size}
	for _, name := range strings.Split(out.Format.FormatName, ",") {
		if refusedContainers[name] {
			return Info{}, &InputError{Err: ErrUnsupported, Detail: "playlists and file lists are not accepted"}
		}
	}
	found := false
	for _, s := range out.Streams {
		if s.CodecType == "video" && s.Disposition.AttachedPic == 0 {
			info.Video = true
		}
		if s.CodecType != "audio" || found {
			continue
		}
		found = true
		info.Codec = s.CodecName
		info.Duration = parseSeconds(s.Duration)
		info.SampleRate, _ = strconv.Atoi(s.SampleRate)
		info.Channels, info.Bits = s.Channels, s.BitsPerSample
	}
	if !found {
		return Info{}, &InputError{Err: ErrUnsupported, Detail: "the file has no audio track"}
	}
	if info.Duration == 0 {
		info.Duration = parseSeconds(out.Format.Duration)
	}
	return info, nil
}

// Convert decodes the first audio track of in and writes it to out in format
// f. progress, when not nil, is called with the amount of audio written so
// far, at least every few seconds of work, so that a caller can heartbeat.
// It returns the duration of the written audio.
func (t *Tools) Convert(ctx context.Context, in, out string, f Format, progress func(time.Duration)) (time.Duration, error) {
	args := []string{"-nostdin", "-hide_banner", "-v", "error", "-y",
		"-protocol_whitelist", "file,pipe",
		"-i", "file:" + in,
		"-map", "0:a:0", "-vn", "-sn", "-dn",
		"-ac", strconv.Itoa(f.Channels), "-ar", strconv.Itoa(f.SampleRate),
	}
	args = append(args, f.args...)
	args = append(args, "-progress", "pipe:1", "-nostats", "file:"+out)
	cmd := exec.CommandContext(ctx, t.FFmpeg, args...)
	// A cancelled context kills ffmpeg; WaitDelay bounds the wait for pipes.
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{max: 4096, buf: &stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, fmt.Errorf("ffmpeg pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start ffmpeg: %w", err)
	}
	var written time.Duration
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		// ffmpeg reports out_time_us in microseconds despite the similar
		// out_time_ms key, which it also reports in microseconds.
		if v, ok := strings.CutPrefix(sc.Text(), "out_time_us="); ok {
			if us, err := strconv.ParseInt(v, 10, 64); err == nil && us >= 0 {
				written = time.Duration(us) * time.Microsecond
				if progress != nil {
					progress(written)
				}
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		msg := stderr.String()
		if isInputProblem(msg) {
			return 0, &InputError{Err: ErrUnsupported, Detail: toolMessage(msg, in)}
		}
		return 0, fmt.Errorf("ffmpeg failed: %s", toolMessage(msg, in))
	}
	// The progress report rounds to frames; the written file is exact.
	if d, err := pcmDuration(out, f); err == nil {
		written = d
	}
	if written <= 0 {
		return 0, &InputError{Err: ErrEmpty, Detail: "no sound could be decoded from it"}
	}
	return written, nil
}

func pcmDuration(path string, f Format) (time.Duration, error) {
	if f.Name != WAV16kMono.Name {
		return 0, errors.ErrUnsupported
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	const header = 44
	samples := (st.Size() - header) / int64(2*f.Channels)
	if samples < 0 {
		samples = 0
	}
	return time.Duration(samples) * time.Second / time.Duration(f.SampleRate), nil
}

func isInputProblem(stderr string) bool {
	for _, s := range []string{
		"Invalid data found", "could not find codec", "Could not find codec", "Error while decoding",
		"does not contain any stream", "matches no streams", "Invalid argument", "Operation not permitted",
		"Protocol not on whitelist", "Unsupported codec", "decoding for stream", "moov atom not found",
	} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// toolMessage turns ffmpeg's stderr into one short line without the local
// path, which means nothing to the sender.
func toolMessage(stderr, path string) string {
	msg := strings.ReplaceAll(stderr, "file:"+path, "input")
	msg = strings.ReplaceAll(msg, path, "input")
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if len(l) > 200 {
				l = l[:200]
			}
			return l
		}
	}
	return "ffmpeg could not read it"
}

func parseSeconds(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// limitedBuffer keeps the last bytes a tool writes; ffmpeg can print a
// line per damaged frame, and only the end is useful.
type limitedBuffer struct {
	max int
	buf *bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	l.buf.Write(p)
	if over := l.buf.Len() - l.max; over > 0 {
		l.buf.Next(over)
	}
	return n, nil
}
