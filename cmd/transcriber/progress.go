package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/workflows"
)

// progress shows on standard error how each file's job moves, from the
// statuses the wait reads. On a terminal each file has one line that is
// rewritten in place; elsewhere (a log, a pipe) a line is added only when
// the job enters another state, so that a log is not flooded.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool
	// width is the terminal's, when known: a longer line would wrap, and
	// rewriting it would then leave its first part behind.
	width int
	now   func() time.Time
	start time.Time
	// open is set while a terminal line is not yet ended.
	open bool
	// last is what was last shown of the current file: its line on a
	// terminal, its state elsewhere.
	last string
}

func newProgress(w io.Writer, quiet bool) *progress {
	p := &progress{w: w, quiet: quiet, now: time.Now}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
		if width, _, err := term.GetSize(int(f.Fd())); err == nil {
			p.width = width
		}
	}
	return p
}

// begin starts the line of a file whose job is awaited next.
func (p *progress) begin() {
	p.start, p.last = p.now(), ""
}

// show reports one status of the job of the file named label.
func (p *progress) show(label string, st workflows.Status) {
	if p.quiet {
		return
	}
	elapsed := p.now().Sub(p.start)
	if !p.tty {
		if string(st.State) == p.last {
			return
		}
		p.last = string(st.State)
		fmt.Fprintf(p.w, "%s: %s, %s\n", label, st.State, clock(elapsed))
		return
	}
	line := fmt.Sprintf(": %s", st.State)
	done, total := audioDone(st)
	if n := len(st.Chunks); n > 1 && st.State == job.Transcribing {
		line += fmt.Sprintf(", chunks %d/%d", st.ChunksDone, n)
		if total > 0 {
			line += fmt.Sprintf(", %d%% of the audio", int(100*done/total))
		}
	}
	line += ", " + clock(elapsed)
	if n := len(st.Chunks); n > 1 && st.State == job.Transcribing && st.ChunksDone > 0 && st.ChunksDone < n {
		// The time so far per share of the audio recognised is the best
		// guess of the time to come; without lengths, per chunk, which are
		// alike in length but for the last.
		left := elapsed / time.Duration(st.ChunksDone) * time.Duration(n-st.ChunksDone)
		if done > 0 && total > done {
			left = time.Duration(float64(elapsed) * float64(total-done) / float64(done))
		}
		line += ", about " + clock(left) + " left"
	}
	line = fitLabel(label, len(line), p.width) + line
	if line == p.last {
		return
	}
	p.last = line
	// \r and erase-line rewrite the line in place; a shorter line leaves
	// nothing of the longer one before it.
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	p.open = true
	if st.State.Settled() {
		p.end()
	}
}

// audioDone is how much of a split recording's audio is recognised, and
// its whole length, from the chunks' lengths; zero total when unknown.
func audioDone(st workflows.Status) (done, total time.Duration) {
	for _, c := range st.Chunks {
		total += c.Duration
		if c.TranscriptKey != "" {
			done += c.Duration
		}
	}
	return done, total
}

// end finishes an open terminal line, so that what is printed next, the
// next file or a message, starts on a line of its own.
func (p *progress) end() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}

// fitLabel shortens label from the left, where paths differ least, so
// that it and rest more characters fit in width; width 0 is unknown.
func fitLabel(label string, rest, width int) string {
	room := width - 1 - rest
	r := []rune(label)
	if width <= 0 || len(r) <= room {
		return label
	}
	if room < 2 {
		return ""
	}
	return "…" + string(r[len(r)-room+1:])
}

// clock formats d as m:ss, or h:mm:ss from an hour on.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
