package audio

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// Silence is a quiet stretch of a recording.
type Silence struct {
	Start time.Duration
	End   time.Duration
}

// Span is a stretch of a recording: where a chunk starts and how long it is.
type Span struct {
	Offset   time.Duration
	Duration time.Duration
}

// What counts as a pause between phrases: quieter than -35 dBFS (speech
// in a normal recording sits far above it, room noise below) for at least
// 0.3 s (shorter pauses fall between words, not phrases).
const (
	silenceNoise  = "-35dB"
	silenceLength = 300 * time.Millisecond
)

var silenceLine = regexp.MustCompile(`silence_(start|end): (-?[0-9.]+)`)

// Silences lists the pauses of the recording at path, in order. ffmpeg
// prints one line per pause edge, so the output is read as it streams and
// memory stays flat however long the recording.
func (t *Tools) Silences(ctx context.Context, path string) ([]Silence, error) {
	cmd := exec.CommandContext(ctx, t.FFmpeg, "-nostdin", "-hide_banner", "-nostats", "-v", "info",
		"-protocol_whitelist", "file", "-i", "file:"+path,
		"-map", "0:a:0", "-af", fmt.Sprintf("silencedetect=noise=%s:d=%g", silenceNoise, silenceLength.Seconds()),
		"-f", "null", "-")
	cmd.WaitDelay = 5 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("ffmpeg pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("start ffmpeg: %w", err)
	}
	var (
		out   []Silence
		open  = false
		start time.Duration
		tail  bytes.Buffer
	)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		m := silenceLine.FindStringSubmatch(line)
		if m == nil {
			tail.Reset()
			tail.WriteString(line)
			continue
		}
		at := max(parseSignedSeconds(m[2]), 0)
		switch {
		case m[1] == "start":
			open, start = true, at
		case open:
			out = append(out, Silence{Start: start, End: at})
			open = false
		}
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ffmpeg silence detection failed: %s", toolMessage(tail.String(), path))
	}
	// A pause that lasts to the end has a start and no end line.
	if open {
		out = append(out, Silence{Start: start, End: -1})
	}
	return out, nil
}

func parseSignedSeconds(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// Cut writes the stretch span of in to out in format f. Seeking happens on
// the decoded audio, so the cut is exact to the sample for the formats the
// engines take.
func (t *Tools) Cut(ctx context.Context, in, out string, span Span, f Format) error {
	args := []string{"-nostdin", "-hide_banner", "-v", "error", "-y",
		"-protocol_whitelist", "file",
		"-ss", seconds(span.Offset), "-t", seconds(span.Duration),
		"-i", "file:" + in,
		"-map", "0:a:0", "-vn", "-sn", "-dn",
		"-ac", strconv.Itoa(f.Channels), "-ar", strconv.Itoa(f.SampleRate),
	}
	args = append(args, f.args...)
	args = append(args, "file:"+out)
	cmd := exec.CommandContext(ctx, t.FFmpeg, args...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{max: 4096, buf: &stderr}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ffmpeg could not cut the audio: %s", toolMessage(stderr.String(), in))
	}
	return nil
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64)
}

// Plan divides a recording of the given length into spans of at most
// maxLen, cutting in the middle of a pause where one falls in the last part
// of a span, so that no word is cut in two. Where a span has no pause it is
// cut at maxLen. A recording no longer than maxLen is one span.
func Plan(total, maxLen time.Duration, silences []Silence) []Span {
	if maxLen <= 0 || total <= maxLen {
		return []Span{{Offset: 0, Duration: total}}
	}
	// A pause in the first part of a span would make short chunks and many
	// requests; only the last 40% is searched.
	earliest := maxLen * 6 / 10
	var spans []Span
	start := time.Duration(0)
	for total-start > maxLen {
		lo, hi := start+earliest, start+maxLen
		cut, best := hi, time.Duration(-1)
		for _, s := range silences {
			end := s.End
			if end < 0 {
				end = total
			}
			mid := s.Start + (end-s.Start)/2
			if mid > hi {
				break
			}
			if mid < lo {
				continue
			}
			// The longest pause is most likely the end of a sentence.
			if length := end - s.Start; length >= best {
				cut, best = mid, length
			}
		}
		spans = append(spans, Span{Offset: start, Duration: cut - start})
		start = cut
	}
	return append(spans, Span{Offset: start, Duration: total - start})
}
