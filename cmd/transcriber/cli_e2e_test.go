package main

// End-to-end tests of the command line as people use it: standard input,
// output files, help and version.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// Scenario: A recording piped to standard input is transcribed
func TestTranscribeStdin(t *testing.T) {
	requireSpeechTools(t)
	note, err := os.ReadFile(testaudio.VoiceNote(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	r := runCLIWithStdin(t, env(), bytes.NewReader(note), "transcribe", "-")
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if got := strings.TrimSpace(r.stdout); got != testaudio.GoForwardText {
		t.Errorf("transcript = %q; want %q", got, testaudio.GoForwardText)
	}

	// Scenario: The job of standard input is named stdin
	t.Run("named stdin", func(t *testing.T) {
		u := startUp(t, t.TempDir())
		r := runCLIWithStdin(t, u.client, bytes.NewReader(note), "transcribe", "-")
		if r.code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
		}
		list := runCLI(t, u.client, "jobs", "list")
		id := ""
		for _, line := range strings.Split(list.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "cli-") {
				id = f[0]
			}
		}
		show := runCLI(t, u.client, "jobs", "show", id)
		if !strings.Contains(show.stdout, "stdin") {
			t.Errorf("jobs show %s does not name the original stdin:\n%s", id, show.stdout)
		}
		if got := showField(show.stdout, "owner"); got != job.OwnerCLI {
			t.Errorf("jobs show %s: owner %q; want %q", id, got, job.OwnerCLI)
		}
	})

	// Scenario: An empty standard input is refused and nothing is submitted
	t.Run("empty", func(t *testing.T) {
		r := runCLIWithStdin(t, env(), strings.NewReader(""), "transcribe", "-")
		if r.code == 0 {
			t.Fatalf("exit code 0 for an empty stdin; stdout %q", r.stdout)
		}
		for _, w := range []string{"stdin", "empty_audio", "nothing was submitted"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
			}
		}
	})

	t.Run("given twice", func(t *testing.T) {
		r := runCLIWithStdin(t, env(), bytes.NewReader(note), "transcribe", "-", "-")
		if r.code != 2 || !strings.Contains(r.stderr, "more than once") {
			t.Errorf("- - : code %d; want 2; stderr:\n%s", r.code, r.stderr)
		}
	})
}

// Scenario: Transcripts are written to files in several formats at once
func TestTranscribeOutputDir(t *testing.T) {
	requireSpeechTools(t)
	in := t.TempDir()
	note := testaudio.VoiceNote(t, in)
	wav := filepath.Join(in, "talk.wav")
	testaudio.FFmpeg(t, "-i", note, wav)
	out := filepath.Join(t.TempDir(), "out")
	r := runCLI(t, env(), "transcribe", "--output-dir", out, "--format", "srt,txt", note, wav)
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q; want nothing when writing files", r.stdout)
	}
	for _, name := range []string{"voice.srt", "voice.txt", "talk.srt", "talk.txt"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !strings.Contains(string(b), testaudio.GoForwardText) {
			t.Errorf("%s = %q; want the transcript", name, b)
		}
		if strings.HasSuffix(name, ".srt") && !strings.Contains(string(b), " --> ") {
			t.Errorf("%s is not SubRip:\n%s", name, b)
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 4 {
		t.Errorf("output dir holds %d entries (%v); want the 4 transcripts", len(entries), err)
	}

	// Scenario: An existing transcript file is not overwritten without --force
	t.Run("no overwrite", func(t *testing.T) {
		txt := filepath.Join(out, "voice.txt")
		if err := os.WriteFile(txt, []byte("my own notes\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, env(), "transcribe", "-o", out, note)
		if r.code == 0 || !strings.Contains(r.stderr, txt) || !strings.Contains(r.stderr, "--force") ||
			!strings.Contains(r.stderr, "nothing was submitted") {
			t.Errorf("code %d; want a refusal naming %s and --force; stderr:\n%s", r.code, txt, r.stderr)
		}
		if b, _ := os.ReadFile(txt); string(b) != "my own notes\n" {
			t.Errorf("voice.txt = %q; want it untouched", b)
		}
		r = runCLI(t, env(), "transcribe", "-o", out, "--force", note)
		if r.code != 0 {
			t.Fatalf("--force: exit code %d; stderr:\n%s", r.code, r.stderr)
		}
		if b, _ := os.ReadFile(txt); strings.TrimSpace(string(b)) != testaudio.GoForwardText {
			t.Errorf("voice.txt after --force = %q; want the transcript", b)
		}
	})

	// Scenario: Two inputs with the same name into one directory are refused
	t.Run("same name", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "voice.mp3")
		testaudio.FFmpeg(t, "-i", note, other)
		dir := filepath.Join(t.TempDir(), "clash")
		r := runCLI(t, env(), "transcribe", "-o", dir, note, other)
		if r.code == 0 || !strings.Contains(r.stderr, note) || !strings.Contains(r.stderr, other) {
			t.Errorf("code %d; want a refusal naming both inputs; stderr:\n%s", r.code, r.stderr)
		}
	})

	// Scenario: Several formats go to standard output under headers
	t.Run("several formats to stdout", func(t *testing.T) {
		r := runCLI(t, env(), "transcribe", "--format", "txt,vtt", note)
		if r.code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
		}
		i, j := strings.Index(r.stdout, "==> "+note+" [txt] <=="), strings.Index(r.stdout, "==> "+note+" [vtt] <==")
		if i < 0 || j < i || !strings.Contains(r.stdout[i:j], testaudio.GoForwardText) || !strings.Contains(r.stdout[j:], "WEBVTT") {
			t.Errorf("output:\n%s", r.stdout)
		}
	})
}

// Scenario: The version names the build and the Temporal versions it embeds
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, env(), args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "transcriber ") {
			t.Fatalf("%v: code %d, output:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		// The test binary embeds the versions go.mod pins.
		for _, w := range []string{"go1.", "temporal server     v1.", "temporal sdk        v1.", "temporal ui-server  v2."} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v lacks %q:\n%s", args, w, r.stdout)
			}
		}
	}
	var b strings.Builder
	writeVersion(&b, &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/transcriber/transcriber", Version: "v1.4.0"},
		Deps: []*debug.Module{{Path: "go.temporal.io/server", Version: "v1.32.0"}, {Path: "go.temporal.io/sdk", Version: "v1.50.0"}},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3a5a2b0e"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	})
	for _, w := range []string{"transcriber v1.4.0\n", "commit              3a5a2b0e (with uncommitted changes)", "commit time         2026-12-01T10:00:00Z",
		"temporal server     v1.32.0", "temporal sdk        v1.50.0", "temporal ui-server  unknown"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("version of a stamped build lacks %q:\n%s", w, b.String())
		}
	}
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "3a5a2b0e41c7d9f0"}, {Key: "vcs.modified", Value: "true"}}}
	if got := buildID(stamped); got != "transcriber@v1.4.0+3a5a2b0e41c7-modified" {
		t.Errorf("build id of a stamped build = %q", got)
	}
	if got := buildID(nil); got != "transcriber@devel" {
		t.Errorf("build id without build info = %q", got)
	}
	b.Reset()
	writeVersion(&b, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	if !strings.HasPrefix(b.String(), "transcriber devel\n") || strings.Contains(b.String(), "commit") {
		t.Errorf("version of an unstamped build:\n%s", b.String())
	}
}

// Scenario: transcribe's help shows its own flags and the few settings a person needs
func TestHelpTranscribeIsFocused(t *testing.T) {
	r := runCLI(t, env(), "transcribe", "--help")
	if r.code != 0 {
		t.Fatalf("code %d:\n%s", r.code, r.stderr)
	}
	var flags []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if f, ok := strings.CutPrefix(line, "  -"); ok {
			flags = append(flags, strings.Fields(f)[0])
		}
	}
	if len(flags) > 20 {
		t.Errorf("transcribe --help shows %d flags; want at most 20: %v", len(flags), flags)
	}
	for _, want := range []string{"format", "language", "output-dir", "o", "force", "quiet", "engine", "temporal-address", "temporal-namespace", "data-dir"} {
		if !slices.Contains(flags, want) {
			t.Errorf("transcribe --help lacks -%s: %v", want, flags)
		}
	}
	if slices.Contains(flags, "telegram-api-endpoint") || !strings.Contains(r.stderr, "transcriber help settings") {
		t.Errorf("transcribe --help shows server settings or does not point at help settings:\n%s", r.stderr)
	}

	// Scenario: Every setting is listed once by help settings and parses on every command
	t.Run("settings", func(t *testing.T) {
		r := runCLI(t, env(), "help", "settings")
		for _, want := range []string{"TEMPORAL_ADDRESS, --temporal-address", "TELEGRAM_API_ENDPOINT, --telegram-api-endpoint", "TEMPORAL_API_KEY\n", `(default "default")`} {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("help settings lacks %q: code %d\n%s", want, r.code, r.stdout)
			}
		}
		// A setting transcribe's help leaves out still parses there: the
		// run goes as far as the file, which is missing.
		r = runCLI(t, env(), "transcribe", "--telegram-api-endpoint", "http://127.0.0.1:1", "--max-attempts", "3", "missing.wav")
		if r.code != 1 || !strings.Contains(r.stderr, "missing.wav") || strings.Contains(r.stderr, "not defined") {
			t.Errorf("hidden settings on transcribe: code %d; want 1 for the missing file; stderr:\n%s", r.code, r.stderr)
		}
	})
}

// Scenario: Progress goes to standard error and the transcript alone to standard output
func TestTranscribeProgress(t *testing.T) {
	requireSpeechTools(t)
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, env(), "transcribe", note)
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if got := strings.TrimSpace(r.stdout); got != testaudio.GoForwardText {
		t.Errorf("stdout = %q; want the transcript alone", r.stdout)
	}
	// Standard error is not a terminal here: one plain line per state.
	i, j := strings.Index(r.stderr, note+": transcribing, "), strings.Index(r.stderr, note+": done, ")
	if i < 0 || j < i || strings.Count(r.stderr, note+": transcribing") != 1 || strings.Contains(r.stderr, "\r") {
		t.Errorf("stderr:\n%q\nwant one plain line per state, transcribing before done", r.stderr)
	}
	r = runCLI(t, env(), "transcribe", "--quiet", note)
	if r.code != 0 || r.stderr != "" || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Errorf("--quiet: code %d, stdout %q, stderr %q; want the transcript and nothing on stderr", r.code, r.stdout, r.stderr)
	}
}

// Scenario: A command with no engine settings uses the service's engine and policy
func TestTranscribeToAServiceTakesItsChoices(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	engine.text = "the service engine heard this"
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1",
		"TRANSCRIBER_MAX_ATTEMPTS", "3")
	bare := env("TEMPORAL_ADDRESS", "127.0.0.1:"+u.temporal, "TRANSCRIBER_DATA_DIR", u.dataDir)
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, bare, "transcribe", note)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "the service engine heard this" {
		t.Fatalf("transcribe with no engine settings: code %d, out %q\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "engine: the service's engine") || !strings.Contains(r.stderr, "the service's retry policy") {
		t.Errorf("stderr does not say the service's choices apply:\n%s", r.stderr)
	}
	id := cliJobID(t, note, "")
	show := runCLI(t, bare, "jobs", "show", id)
	if showField(show.stdout, "engine") != "openai" {
		t.Errorf("jobs show of the job that left its engine to the service:\n%s%s", show.stdout, show.stderr)
	}
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := (&jobctl.Service{Client: c, Namespace: "default"}).Status(context.Background(), id)
	if err != nil || st.Policy.MaxAttempts != 3 {
		t.Errorf("policy of the job: %+v, %v; want the service's 3 attempts", st.Policy, err)
	}

	local := func(k string) string {
		if k == "TRANSCRIBER_ENGINE" {
			return "local"
		}
		return bare(k)
	}
	r = runCLI(t, local, "transcribe", note)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText || !strings.Contains(r.stderr, "engine: local (set here)") {
		t.Fatalf("transcribe with TRANSCRIBER_ENGINE=local: code %d, out %q\n%s", r.code, r.stdout, r.stderr)
	}
	if got := showField(runCLI(t, bare, "jobs", "show", cliJobID(t, note, "local")).stdout, "engine"); got != "local" {
		t.Errorf("engine of the job that named local: %q", got)
	}
}
