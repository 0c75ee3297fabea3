package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine/local"
	"github.com/transcriber/transcriber/internal/engine/openai"
	"github.com/transcriber/transcriber/internal/engine/speechkit"
	"github.com/transcriber/transcriber/internal/engine/speechkit/speechkittest"
	"github.com/transcriber/transcriber/internal/testaudio"
)

var (
	_ asIsTaker = (*openai.Engine)(nil)
	_ asIsTaker = (*speechkit.Engine)(nil)
	_ asIsTaker = (*local.Engine)(nil)
)

// openAIUpload is the file part one request to the stand-in carried.
type openAIUpload struct {
	name, contentType string
	data              []byte
}

// openAIRecorder is a transcription endpoint that keeps the file part of
// every request and answers with OpenAI's verbose JSON.
type openAIRecorder struct {
	*httptest.Server
	mu      sync.Mutex
	uploads []openAIUpload
}

func newOpenAIRecorder(t *testing.T) *openAIRecorder {
	t.Helper()
	s := &openAIRecorder{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			b, _ := io.ReadAll(p)
			if p.FormName() == "file" {
				s.mu.Lock()
				s.uploads = append(s.uploads, openAIUpload{name: p.FileName(), contentType: p.Header.Get("Content-Type"), data: b})
				s.mu.Unlock()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"task": "transcribe", "language": "english", "text": testaudio.GoForwardText})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *openAIRecorder) received() []openAIUpload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]openAIUpload(nil), s.uploads...)
}

func (s *openAIRecorder) engine(t *testing.T, cfg openai.Config) *openai.Engine {
	t.Helper()
	cfg.BaseURL, cfg.Model = s.URL+"/v1", "whisper-1"
	e, err := openai.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// convertWith runs Convert of the file at path, stored under key, for eng.
func convertWith(t *testing.T, eng Recognizer, key, path string) (ConvertOutput, *fixture) {
	t.Helper()
	testaudio.Require(t)
	f := newFixture(t, nil)
	f.acts.Engines["engine"] = eng
	f.put(t, key, path)
	v, err := f.env.ExecuteActivity(f.acts.Convert, ConvertInput{Call: schedule, OriginalKey: key, Engine: "engine"})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	var out ConvertOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out, f
}

// storedFiles lists the objects of the test job.
func storedFiles(t *testing.T, f *fixture) []string {
	t.Helper()
	var keys []string
	root := filepath.Join(f.blobs.Root(), "jobs")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(f.blobs.Root(), p)
			keys = append(keys, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func recognizeKey(t *testing.T, f *fixture, key string, d time.Duration) {
	t.Helper()
	if _, err := f.env.ExecuteActivity(f.acts.Recognize, RecognizeInput{Call: schedule, AudioKey: key, Engine: "engine", Duration: d}); err != nil {
		t.Fatalf("Recognize: %v", err)
	}
}

// Scenario: A recording the engine takes as it is reaches it unconverted
func TestVoiceNoteReachesOpenAIAsItIs(t *testing.T) {
	testaudio.Require(t)
	note := testaudio.VoiceNote(t, t.TempDir())
	want, err := os.ReadFile(note)
	if err != nil {
		t.Fatal(err)
	}
	// The intakes name originals by the sender's file name, which may
	// have no extension or the wrong one.
	for _, key := range []string{"jobs/default-test-workflow-id/original.ogg", "jobs/default-test-workflow-id/original", "jobs/default-test-workflow-id/original.mp3"} {
		t.Run(filepath.Base(key), func(t *testing.T) {
			srv := newOpenAIRecorder(t)
			out, f := convertWith(t, srv.engine(t, openai.Config{}), key, note)
			if out.AudioKey != key || len(out.Chunks) != 0 {
				t.Fatalf("audio key %q, %d chunks; want the original %q whole", out.AudioKey, len(out.Chunks), key)
			}
			if out.Duration < 2700*time.Millisecond || out.Duration > 2900*time.Millisecond {
				t.Errorf("duration = %v; want about 2.79s", out.Duration)
			}
			if got := storedFiles(t, f); len(got) != 1 {
				t.Errorf("stored %v; want the original alone, no converted copy", got)
			}
			recognizeKey(t, f, out.AudioKey, out.Duration)
			up := srv.received()
			if len(up) != 1 {
				t.Fatalf("requests = %d; want 1", len(up))
			}
			if !bytes.Equal(up[0].data, want) {
				t.Errorf("the engine got %d bytes that differ from the %d of the voice note", len(up[0].data), len(want))
			}
			if up[0].name != "audio.ogg" || up[0].contentType != "audio/ogg" {
				t.Errorf("file part %q, %q; want audio.ogg, audio/ogg", up[0].name, up[0].contentType)
			}
		})
	}
}

// Scenario: A recording the engine takes as it is reaches it unconverted
func TestWAV16kMonoReachesLocalAsItIs(t *testing.T) {
	testaudio.Require(t)
	eng, err := local.New(local.Config{})
	if err != nil {
		t.Skip(err)
	}
	wav := filepath.Join(t.TempDir(), "go.wav")
	testaudio.FFmpeg(t, "-f", "s16le", "-ar", "16000", "-ac", "1", "-i", testaudio.GoForwardRaw, wav)
	const key = "jobs/default-test-workflow-id/original.wav"
	out, f := convertWith(t, eng, key, wav)
	if out.AudioKey != key {
		t.Fatalf("audio key %q; want the original %q", out.AudioKey, key)
	}
	if got := storedFiles(t, f); len(got) != 1 {
		t.Errorf("stored %v; want the original alone", got)
	}
	// pocketsphinx reads the original where it lies.
	recognizeKey(t, f, out.AudioKey, out.Duration)

	// The same words at CD quality are not what pocketsphinx reads.
	cd := filepath.Join(t.TempDir(), "cd.wav")
	testaudio.FFmpeg(t, "-i", wav, "-ar", "44100", "-ac", "2", cd)
	out, _ = convertWith(t, eng, key, cd)
	if out.AudioKey == key || !strings.HasSuffix(out.AudioKey, "/audio.wav") {
		t.Errorf("audio key of a 44.1 kHz stereo WAV = %q; want a converted audio.wav", out.AudioKey)
	}
}

// Scenario: Audio the engine cannot take is converted once
func TestSpeechKitGetsOtherAudioConverted(t *testing.T) {
	testaudio.Require(t)
	tl, err := audio.NewTools()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	note := testaudio.VoiceNote(t, dir)
	mp3 := filepath.Join(dir, "cd.mp3")
	testaudio.FFmpeg(t, "-i", note, "-ar", "44100", "-ac", "2", "-c:a", "libmp3lame", mp3)
	wma := filepath.Join(dir, "a.wma")
	testaudio.FFmpeg(t, "-i", note, "-c:a", "wmav2", wma)
	for _, path := range []string{mp3, wma} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			sk := speechkittest.New(t, speechkittest.Credentials{APIKey: "k"})
			eng, err := speechkit.New(speechkit.Config{BaseURL: sk.URL(), OperationsURL: sk.OperationsURL(), APIKey: "k"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			key := "jobs/default-test-workflow-id/original" + filepath.Ext(path)
			out, f := convertWith(t, eng, key, path)
			if out.AudioKey == key || !strings.HasSuffix(out.AudioKey, "/audio.ogg") || len(out.Chunks) != 0 {
				t.Fatalf("audio key %q, %d chunks; want one converted audio.ogg", out.AudioKey, len(out.Chunks))
			}
			if got := storedFiles(t, f); len(got) != 2 {
				t.Errorf("stored %v; want the original and one conversion", got)
			}
			stored, err := f.blobs.Path(out.AudioKey)
			if err != nil {
				t.Fatal(err)
			}
			info, err := tl.Probe(context.Background(), stored)
			if err != nil || info.Codec != "opus" || info.Channels != 1 {
				t.Errorf("converted audio %+v, %v; want mono Opus", info, err)
			}
			converted, err := os.ReadFile(stored)
			if err != nil {
				t.Fatal(err)
			}
			recognizeKey(t, f, out.AudioKey, out.Duration)
			if recs := sk.Recognitions(); len(recs) != 1 || !bytes.Equal(recs[0].Content, converted) {
				t.Errorf("SpeechKit got %d recognitions; want one with the converted audio", len(recs))
			}
		})
	}
	t.Run("voice note", func(t *testing.T) {
		sk := speechkittest.New(t, speechkittest.Credentials{APIKey: "k"})
		eng, err := speechkit.New(speechkit.Config{BaseURL: sk.URL(), OperationsURL: sk.OperationsURL(), APIKey: "k"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		const key = "jobs/default-test-workflow-id/original.ogg"
		if out, _ := convertWith(t, eng, key, note); out.AudioKey != key {
			t.Errorf("audio key of an Ogg/Opus voice note = %q; want the original %q", out.AudioKey, key)
		}
	})
}

// cutShortOgg writes a LibriVox chapter as Ogg/Opus and its first half,
// which ends inside a page, into dir.
func cutShortOgg(t *testing.T, dir string) (full, half string) {
	t.Helper()
	full = filepath.Join(dir, "full.ogg")
	testaudio.FFmpeg(t, "-i", testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870"), "-c:a", "libopus", full)
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	half = filepath.Join(dir, "half.ogg")
	if err := os.WriteFile(half, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	return full, half
}

// Scenario: A cut-short recording is converted
func TestCutShortOggIsConverted(t *testing.T) {
	testaudio.Require(t)
	_, half := cutShortOgg(t, t.TempDir())
	srv := newOpenAIRecorder(t)
	const key = "jobs/default-test-workflow-id/original.ogg"
	out, f := convertWith(t, srv.engine(t, openai.Config{}), key, half)
	if out.AudioKey == key || !strings.HasSuffix(out.AudioKey, "/audio.flac") {
		t.Fatalf("audio key of a cut-short Ogg = %q; want a converted audio.flac", out.AudioKey)
	}
	recognizeKey(t, f, out.AudioKey, out.Duration)
	if up := srv.received(); len(up) != 1 || !bytes.HasPrefix(up[0].data, []byte("fLaC")) || up[0].name != "audio.flac" {
		t.Errorf("the engine got %d uploads; want one FLAC named audio.flac", len(up))
	}
}

// Scenario: Audio the engine cannot take is converted once
func TestOriginalOverTheEngineLimitsIsConvertedAndCut(t *testing.T) {
	testaudio.Require(t)
	ogg := filepath.Join(t.TempDir(), "a.ogg")
	testaudio.FFmpeg(t, "-i", testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870"), "-c:a", "libopus", ogg)
	srv := newOpenAIRecorder(t)
	const key = "jobs/default-test-workflow-id/original.ogg"
	out, _ := convertWith(t, srv.engine(t, openai.Config{MaxDuration: 5 * time.Second}), key, ogg)
	if out.AudioKey == key || len(out.Chunks) < 2 {
		t.Errorf("audio key %q, %d chunks; want a conversion cut to the 5 s limit", out.AudioKey, len(out.Chunks))
	}
}

// Scenario: Audio the engine cannot take is converted once
func TestOpenAIAlwaysConvertSendsFLAC(t *testing.T) {
	testaudio.Require(t)
	srv := newOpenAIRecorder(t)
	const key = "jobs/default-test-workflow-id/original.ogg"
	out, f := convertWith(t, srv.engine(t, openai.Config{AlwaysConvert: true}), key, testaudio.VoiceNote(t, t.TempDir()))
	if out.AudioKey == key || !strings.HasSuffix(out.AudioKey, "/audio.flac") {
		t.Fatalf("audio key %q; want a converted audio.flac for a server that reads fewer formats", out.AudioKey)
	}
	recognizeKey(t, f, out.AudioKey, out.Duration)
	if up := srv.received(); len(up) != 1 || up[0].name != "audio.flac" || up[0].contentType != "audio/flac" {
		t.Errorf("uploads %d; want one audio.flac sent as audio/flac", len(up))
	}
}

// Scenario: Inspect passes exactly the recordings that conversion sends as they are
func TestInspectAgreesWithConvert(t *testing.T) {
	testaudio.Require(t)
	dir := t.TempDir()
	note := testaudio.VoiceNote(t, dir)
	wav := filepath.Join(dir, "go.wav")
	testaudio.FFmpeg(t, "-f", "s16le", "-ar", "16000", "-ac", "1", "-i", testaudio.GoForwardRaw, wav)
	cd := filepath.Join(dir, "cd.wav")
	testaudio.FFmpeg(t, "-i", wav, "-ar", "44100", "-ac", "2", cd)
	full, half := cutShortOgg(t, dir)
	text := filepath.Join(dir, "notes.ogg")
	if err := os.WriteFile(text, []byte("these are my notes, not a recording\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newOpenAIRecorder(t)
	pocketsphinx, err := local.New(local.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		eng  Recognizer
		path string
		asIs bool
	}{
		{"voice note to openai", srv.engine(t, openai.Config{}), note, true},
		{"voice note to a server that reads fewer formats", srv.engine(t, openai.Config{AlwaysConvert: true}), note, false},
		{"recording over the engine's limit", srv.engine(t, openai.Config{MaxDuration: 5 * time.Second}), full, false},
		{"cut-short ogg to openai", srv.engine(t, openai.Config{}), half, false},
		{"text named .ogg", srv.engine(t, openai.Config{}), text, false},
		{"16 kHz mono wav to pocketsphinx", pocketsphinx, wav, true},
		{"44.1 kHz stereo wav to pocketsphinx", pocketsphinx, cd, false},
		{"voice note to pocketsphinx", pocketsphinx, note, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "jobs/default-test-workflow-id/original" + filepath.Ext(tc.path)
			f := newFixture(t, nil)
			f.acts.Engines["engine"] = tc.eng
			f.put(t, key, tc.path)
			in := ConvertInput{Call: schedule, OriginalKey: key, Engine: "engine"}
			v, err := f.env.ExecuteActivity(f.acts.Inspect, in)
			if err != nil {
				t.Fatalf("Inspect: %v; want no error, whatever the recording", err)
			}
			var got InspectOutput
			if err := v.Get(&got); err != nil {
				t.Fatal(err)
			}
			if got.AsIs != tc.asIs {
				t.Fatalf("Inspect passes it: %v; want %v", got.AsIs, tc.asIs)
			}
			v, err = f.env.ExecuteActivity(f.acts.Convert, in)
			if tc.path == text {
				if err == nil {
					t.Error("Convert of text succeeded; want its verdict")
				}
				return
			}
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			var conv ConvertOutput
			if err := v.Get(&conv); err != nil {
				t.Fatal(err)
			}
			if sent := conv.AudioKey == key; sent != tc.asIs {
				t.Errorf("Convert sends it as it is: %v; Inspect said %v", sent, tc.asIs)
			}
			if tc.asIs && got.Duration != conv.Duration {
				t.Errorf("Inspect read %v; Convert %v", got.Duration, conv.Duration)
			}
		})
	}
}
