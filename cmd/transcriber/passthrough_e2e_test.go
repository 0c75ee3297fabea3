package main

import (
	"bytes"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/testaudio"
)

// Scenario: A recording the engine takes as it is reaches it unconverted
func TestVoiceNoteReachesOpenAIUnconverted(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	note := testaudio.VoiceNote(t, dir)
	// A file without an extension is stored as original.bin; the engine
	// must still be told it is Ogg.
	unnamed := filepath.Join(dir, "recording")
	testaudio.FFmpeg(t, "-i", note, "-c:a", "libopus", "-b:a", "16k", "-f", "ogg", unnamed)
	for i, path := range []string{note, unnamed} {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, u.client, "transcribe", path)
		if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
			t.Fatalf("transcribe %s: code %d, out %q\n%s", filepath.Base(path), r.code, r.stdout, r.stderr)
		}
		files := engine.received()
		if len(files) != i+1 {
			t.Fatalf("the engine got %d files; want %d", len(files), i+1)
		}
		got := files[i]
		if !bytes.Equal(got.data, want) || got.name != "audio.ogg" || got.contentType != "audio/ogg" {
			t.Errorf("%s reached the engine as %q (%s), %d bytes, same as the file: %v; want the recording itself as audio.ogg",
				filepath.Base(path), got.name, got.contentType, len(got.data), bytes.Equal(got.data, want))
		}
		if conv := converted(t, u, cliJobID(t, path, "openai")); len(conv) > 0 {
			t.Errorf("the job stored conversions %v of a recording sent as it is", conv)
		}
		// The local Inspect passed it: no conversion step ran at all.
		if steps := completions(t, c, cliJobID(t, path, "openai")); steps["Convert"] != 0 || steps["Recognize"] != 1 {
			t.Errorf("the job's steps = %v; want Recognize alone", steps)
		}
	}
	if len(engine.bad) > 0 {
		t.Errorf("the stand-in refused: %v", engine.bad)
	}
}

// Scenario: Audio the engine cannot take is converted once
func TestWMAReachesOpenAIConvertedOnce(t *testing.T) {
	requireSpeechTools(t)
	engine := newOpenAIStandIn(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", engine.URL+"/v1")
	wma := filepath.Join(t.TempDir(), "memo.wma")
	testaudio.FFmpeg(t, "-i", testaudio.VoiceNote(t, t.TempDir()), "-c:a", "wmav2", wma)
	r := runCLI(t, u.client, "transcribe", wma)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("transcribe: code %d, out %q\n%s", r.code, r.stdout, r.stderr)
	}
	files := engine.received()
	if len(files) != 1 || !bytes.HasPrefix(files[0].data, []byte("fLaC")) || files[0].name != "audio.flac" {
		t.Errorf("the engine got %d files; want one FLAC named audio.flac", len(files))
	}
	if conv := converted(t, u, cliJobID(t, wma, "openai")); len(conv) != 1 {
		t.Errorf("conversions stored: %v; want one", conv)
	}
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + u.temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if steps := completions(t, c, cliJobID(t, wma, "openai")); steps["Convert"] != 1 {
		t.Errorf("the job's steps = %v; want one conversion step", steps)
	}
	if len(engine.bad) > 0 {
		t.Errorf("the stand-in refused: %v", engine.bad)
	}
}

// TestOpenAIStandInRefusesWhatOpenAIRefuses keeps the stand-in honest: a
// file OpenAI cannot take gets OpenAI's 400, not a transcript.
func TestOpenAIStandInRefusesWhatOpenAIRefuses(t *testing.T) {
	engine := newOpenAIStandIn(t)
	for _, tc := range []struct {
		name string
		data []byte
		want int
	}{
		{"audio.ogg", []byte("OggS\x00\x02rest"), http.StatusOK},
		{"audio.wma", []byte("0&\xb2\x75\x8e\x66\xcf\x11"), http.StatusBadRequest},
		{"audio.flac", []byte("OggS\x00\x02rest"), http.StatusBadRequest},
		{"audio", []byte("fLaC"), http.StatusBadRequest},
	} {
		status, body := postFile(t, engine.URL+"/v1/audio/transcriptions", tc.name, tc.data)
		if status != tc.want {
			t.Errorf("%s: status %d; want %d", tc.name, status, tc.want)
		}
		if tc.want == http.StatusBadRequest && !strings.Contains(body, "Invalid file format. Supported formats:") {
			t.Errorf("%s: body %s; want OpenAI's invalid file format error", tc.name, body)
		}
	}
}

// converted lists the audio a job's conversions stored: everything under
// the job's blobs but its original.
func converted(t *testing.T, u *upInstance, id string) []string {
	t.Helper()
	root := filepath.Join(u.dataDir, "blobs", filepath.FromSlash(blob.JobKey(id, "")))
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name := d.Name(); !d.IsDir() && (strings.HasPrefix(name, "audio.") || strings.HasPrefix(name, "chunk-")) {
			out = append(out, name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("blobs of job %s: %v", id, err)
	}
	return out
}

// postFile sends one transcription request with a file part so named.
func postFile(t *testing.T, url, name string, data []byte) (int, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("model", "whisper-1")
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(data)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, mw.FormDataContentType(), &b)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
