// Package local recognises speech offline with pocketsphinx, run as a
// subprocess from the Debian packages pocketsphinx and pocketsphinx-en-us.
// It needs no network and no account, which makes it the default engine.
package local

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
)

// Name is how jobs and configuration refer to this engine.
const Name = "local"

// DefaultModelDir is where pocketsphinx-en-us installs the US English model.
const DefaultModelDir = "/usr/share/pocketsphinx/model/en-us"

// Config locates the recogniser and its model.
type Config struct {
	// Binary is the pocketsphinx_continuous executable; empty looks it up on PATH.
	Binary string
	// ModelDir holds the acoustic model directory "en-us", the language model
	// "en-us.lm.bin" and the dictionary "cmudict-en-us.dict"; empty uses
	// DefaultModelDir.
	ModelDir string
	// ChunkDuration bounds the audio one process recognises; zero takes
	// recordings whole.
	ChunkDuration time.Duration
}

// DefaultChunkDuration keeps one pocketsphinx run to about a minute of
// work on one core: a long recording then uses every core, shows its
// progress chunk by chunk and, after a crash, starts again from the chunks
// not yet done instead of from the beginning. Cuts fall in pauses, so the
// words lost at the seams are few (the chunked-WER benchmark measures it).
const DefaultChunkDuration = 5 * time.Minute

// Engine runs pocketsphinx on one file per call.
type Engine struct {
	binary string
	hmm    string
	lm     string
	dict   string
	chunk  time.Duration
}

// New checks that the recogniser and its model are installed.
func New(cfg Config) (*Engine, error) {
	bin := cfg.Binary
	if bin == "" {
		bin = "pocketsphinx_continuous"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("local engine: %s not found (install the pocketsphinx package): %w", bin, err)
	}
	dir := cfg.ModelDir
	if dir == "" {
		dir = DefaultModelDir
	}
	e := &Engine{
		binary: path,
		hmm:    filepath.Join(dir, "en-us"),
		lm:     filepath.Join(dir, "en-us.lm.bin"),
		dict:   filepath.Join(dir, "cmudict-en-us.dict"),
		chunk:  cfg.ChunkDuration,
	}
	for _, p := range []string{e.hmm, e.lm, e.dict} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("local engine: model file missing (install pocketsphinx-en-us or set POCKETSPHINX_MODEL_DIR): %w", err)
		}
	}
	return e, nil
}

// Name implements the activities' Recognizer.
func (e *Engine) Name() string { return Name }

// Format is what pocketsphinx reads: 16 kHz mono 16-bit PCM.
func (e *Engine) Format() audio.Format { return audio.WAV16kMono }

// TakesAsIs accepts only what conversion would produce: pocketsphinx reads
// 16 kHz mono 16-bit PCM and nothing else.
func (e *Engine) TakesAsIs(info audio.Info) bool { return audio.WAV16kMono.Matches(info) }

// Submit recognises the whole file before it returns; pocketsphinx has no
// notion of a remote operation.
func (e *Engine) Submit(ctx context.Context, req engine.Request) (engine.Submission, error) {
	if !engine.Supports(e, req.Language) {
		return engine.Submission{}, engine.Errorf(engine.Rejected,
			"the local engine recognises English only, not %q; choose another engine for this language", req.Language)
	}
	cmd := exec.CommandContext(ctx, e.binary,
		"-infile", req.AudioPath,
		"-hmm", e.hmm, "-lm", e.lm, "-dict", e.dict,
		"-time", "yes", "-logfn", os.DevNull)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return engine.Submission{}, fmt.Errorf("pocketsphinx: %w", ctx.Err())
		}
		// The input was produced by our own conversion, so a failure here is
		// the recogniser's trouble (a crash, a killed process), worth a retry.
		return engine.Submission{}, &engine.Error{Kind: engine.Unavailable,
			Message: "pocketsphinx failed: " + lastLine(stderr.String()), Err: err}
	}
	res := parse(stdout.Bytes())
	res.Language = "en"
	res.Raw = stdout.Bytes()
	res.RawType = "text/plain; charset=utf-8"
	return engine.Submission{Result: &res}, nil
}

// Check is never called: Submit does not return operations.
func (e *Engine) Check(context.Context, string) (engine.Submission, error) {
	return engine.Submission{}, engine.Errorf(engine.Rejected, "the local engine has no pending operations")
}

// Limits are the chunk length: pocketsphinx takes any length, but a long
// recording in one process runs on one core and restarts from nothing.
func (e *Engine) Limits() engine.Limits { return engine.Limits{MaxDuration: e.chunk} }

// Languages is English alone: Debian's pocketsphinx-en-us is the only
// model the engine is set up for.
func (e *Engine) Languages() []string { return []string{"en"} }

// parse reads the "-time yes" output: for every utterance a hypothesis line,
// then one line per token "word start end confidence" with times in seconds
// from the start of the file. Text is rebuilt from the tokens so that fillers
// and alternate-pronunciation markers such as "was(2)" never reach the user;
// the same tokens are the transcript's timed words.
func parse(out []byte) engine.Result {
	var (
		res  engine.Result
		cur  *engine.Segment
		all  []string
		line []string
	)
	flush := func() {
		if cur != nil && len(line) > 0 {
			cur.Text = strings.Join(line, " ")
			res.Segments = append(res.Segments, *cur)
			all = append(all, line...)
		}
		cur, line = nil, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		start, err1 := strconv.ParseFloat(f[1], 64)
		end, err2 := strconv.ParseFloat(f[2], 64)
		if _, err3 := strconv.ParseFloat(f[3], 64); err1 != nil || err2 != nil || err3 != nil {
			continue // a four-word hypothesis line
		}
		word := f[0]
		switch {
		case word == "<s>":
			flush()
			cur = &engine.Segment{Start: seconds(start)}
			continue
		case word == "</s>":
			flush()
			continue
		case strings.HasPrefix(word, "<") || strings.HasPrefix(word, "[") || strings.HasPrefix(word, "++"):
			continue // silence and noise fillers
		}
		if i := strings.IndexByte(word, '('); i > 0 {
			word = word[:i]
		}
		if cur == nil {
			cur = &engine.Segment{Start: seconds(start)}
		}
		if len(line) == 0 {
			cur.Start = seconds(start)
		}
		cur.End = seconds(end)
		line = append(line, word)
		res.Words = append(res.Words, engine.Word{Start: seconds(start), End: seconds(end), Text: word})
	}
	flush()
	res.Text = strings.Join(all, " ")
	return res
}

func seconds(f float64) time.Duration {
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "no error output"
	}
	return s
}
