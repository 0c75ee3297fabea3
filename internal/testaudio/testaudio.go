// Package testaudio gives tests real speech: the recordings of Debian's
// pocketsphinx-testdata package, their reference transcripts, and the same
// speech re-encoded the way people send it (an OGG/Opus voice note).
package testaudio

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Dir is where pocketsphinx-testdata installs its files.
const Dir = "/usr/share/pocketsphinx/test/data"

// GoForwardRaw is 16 kHz 16-bit mono PCM saying "go forward ten meters".
const GoForwardRaw = Dir + "/goforward.raw"

// GoForwardText is what GoForwardRaw says.
const GoForwardText = "go forward ten meters"

// LibriVox returns the path of a LibriVox recording by its id, such as
// "sense_and_sensibility_01_austen_64kb-0870".
func LibriVox(id string) string { return filepath.Join(Dir, "librivox", id+".wav") }

// Require skips the test when the speech data or ffmpeg is missing, which
// only happens when someone runs "go test" without "make test" first.
func Require(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(GoForwardRaw); err != nil {
		t.Skip("pocketsphinx-testdata is not installed; run make test, which installs it")
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed; run make test, which installs it")
	}
}

// References reads the LibriVox reference transcripts, by recording id.
func References(t testing.TB) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(Dir, "librivox", "transcription"))
	if err != nil {
		t.Fatalf("open references: %v", err)
	}
	defer func() { _ = f.Close() }() // only read
	line := regexp.MustCompile(`^<s> (.*) </s> \((.*)\)$`)
	refs := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := line.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			refs[m[2]] = m[1]
		}
	}
	if len(refs) == 0 {
		t.Fatal("no references read")
	}
	return refs
}

// VoiceNote encodes GoForwardRaw as OGG/Opus, what Telegram voice notes
// are, into dir and returns its path.
func VoiceNote(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "voice.ogg")
	FFmpeg(t, "-f", "s16le", "-ar", "16000", "-ac", "1", "-i", GoForwardRaw, "-c:a", "libopus", "-b:a", "24k", out)
	return out
}

// LibriVoxIDs are the recordings of pocketsphinx-testdata, in order.
var LibriVoxIDs = []string{
	"sense_and_sensibility_01_austen_64kb-0870",
	"sense_and_sensibility_01_austen_64kb-0880",
	"sense_and_sensibility_01_austen_64kb-0890",
	"sense_and_sensibility_01_austen_64kb-0920",
	"sense_and_sensibility_01_austen_64kb-0930",
}

// Long builds a WAV recording of at least length into dir from the
// LibriVox recordings, repeated in order with a pause of pause after each,
// and returns its path and the reference text of what it says. The pauses
// are digital silence, where a recording may be cut without losing a word.
func Long(t testing.TB, dir string, length, pause time.Duration) (path, text string) {
	t.Helper()
	refs := References(t)
	gap := filepath.Join(dir, "pause.wav")
	FFmpeg(t, "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", strconv.FormatFloat(pause.Seconds(), 'f', 3, 64),
		"-c:a", "pcm_s16le", gap)
	var list, said strings.Builder
	var total time.Duration
	for total < length {
		for _, id := range LibriVoxIDs {
			fmt.Fprintf(&list, "file '%s'\nfile '%s'\n", LibriVox(id), gap)
			said.WriteString(refs[id])
			said.WriteByte(' ')
			total += wavDuration(t, LibriVox(id)) + pause
		}
	}
	listPath := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(listPath, []byte(list.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "long.wav")
	FFmpeg(t, "-f", "concat", "-safe", "0", "-i", listPath, "-c", "copy", path)
	return path, strings.TrimSpace(said.String())
}

// wavDuration reads the length of a 16 kHz mono 16-bit WAV from its size.
func wavDuration(t testing.TB, path string) time.Duration {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(st.Size()-44) * time.Second / (2 * 16000)
}

// FFmpeg runs ffmpeg quietly with args and fails the test if it fails.
func FFmpeg(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
	}
}

// WER is the word error rate of hyp against ref: word substitutions,
// deletions and insertions over the reference's length. Both are
// lower-cased, stripped of punctuation, and abbreviations that the
// recogniser's dictionary spells differently from the reference are
// expanded.
func WER(ref, hyp string) float64 {
	r, h := words(ref), words(hyp)
	if len(r) == 0 {
		if len(h) == 0 {
			return 0
		}
		return 1
	}
	prev := make([]int, len(h)+1)
	cur := make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur[0] = i
		for j := 1; j <= len(h); j++ {
			sub := prev[j-1]
			if r[i-1] != h[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return float64(prev[len(h)]) / float64(len(r))
}

var expansions = map[string]string{"mr": "mister", "mrs": "missus", "dr": "doctor"}

func words(s string) []string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '\'' || r == ' ' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return ' '
	}, s)
	f := strings.Fields(s)
	for i, w := range f {
		if e, ok := expansions[w]; ok {
			f[i] = e
		}
	}
	return f
}
