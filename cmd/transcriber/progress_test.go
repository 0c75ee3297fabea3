package main

import (
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/workflows"
)

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

func statusAt(state job.State, done, chunks int) workflows.Status {
	return workflows.Status{State: state, ChunksDone: done, Chunks: make([]workflows.Chunk, chunks)}
}

// Scenario: On a terminal each file's progress is one line rewritten in place
func TestProgressTerminal(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b, tty: true, now: fakeClock(10 * time.Second)}
	p.begin()
	for _, st := range []workflows.Status{
		statusAt(job.Converting, 0, 0),
		statusAt(job.Transcribing, 0, 4),
		statusAt(job.Transcribing, 1, 4),
		statusAt(job.Transcribing, 1, 4),
		statusAt(job.Done, 4, 4),
	} {
		p.show("talk.mp4", st)
	}
	p.end()
	want := "\r\x1b[Ktalk.mp4: converting, 0:10" +
		"\r\x1b[Ktalk.mp4: transcribing, chunks 0/4, 0:20" +
		"\r\x1b[Ktalk.mp4: transcribing, chunks 1/4, 0:30, about 1:30 left" +
		"\r\x1b[Ktalk.mp4: transcribing, chunks 1/4, 0:40, about 2:00 left" +
		"\r\x1b[Ktalk.mp4: done, 0:50\n"
	if got := b.String(); got != want {
		t.Errorf("terminal progress = %q; want %q", got, want)
	}

	// With the chunks' lengths known, the share of the audio recognised
	// is shown and the estimate follows it: a long first chunk done.
	b.Reset()
	p = &progress{w: &b, tty: true, now: fakeClock(10 * time.Second)}
	p.begin()
	st := statusAt(job.Transcribing, 1, 3)
	for i, d := range []time.Duration{4 * time.Minute, 4 * time.Minute, 2 * time.Minute} {
		st.Chunks[i].Duration = d
	}
	st.Chunks[0].TranscriptKey = "jobs/j/chunk-0.json"
	p.show("talk.mp4", st)
	if got, want := b.String(), "\r\x1b[Ktalk.mp4: transcribing, chunks 1/3, 40% of the audio, 0:10, about 0:15 left"; got != want {
		t.Errorf("progress with chunk lengths = %q; want %q", got, want)
	}

	b.Reset()
	p = &progress{w: &b, tty: true, width: 30, now: fakeClock(time.Second)}
	p.begin()
	p.show("/very/long/path/to/recordings/talk.mp4", statusAt(job.Converting, 0, 0))
	if got := strings.TrimPrefix(b.String(), "\r\x1b[K"); len([]rune(got)) > 29 || !strings.HasSuffix(got, "talk.mp4: converting, 0:01") {
		t.Errorf("line on a 30-column terminal = %q; want at most 29 characters ending in the file name", got)
	}
}

// Scenario: Off a terminal progress is a plain line per state, and nothing with --quiet
func TestProgressPlain(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b, now: fakeClock(time.Second)}
	p.begin()
	for _, st := range []workflows.Status{
		statusAt(job.Converting, 0, 0), statusAt(job.Transcribing, 0, 2), statusAt(job.Transcribing, 1, 2), statusAt(job.Done, 2, 2),
	} {
		p.show("a.ogg", st)
	}
	p.end()
	if got, want := b.String(), "a.ogg: converting, 0:01\na.ogg: transcribing, 0:02\na.ogg: done, 0:04\n"; got != want {
		t.Errorf("plain progress = %q; want %q", got, want)
	}
	b.Reset()
	p = &progress{w: &b, tty: true, quiet: true, now: fakeClock(time.Second)}
	p.begin()
	p.show("a.ogg", statusAt(job.Converting, 0, 0))
	p.end()
	if b.Len() != 0 {
		t.Errorf("quiet progress = %q; want nothing", b.String())
	}
}
