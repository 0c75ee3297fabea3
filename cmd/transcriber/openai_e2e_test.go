package main

// End-to-end tests of the OpenAI drop-in: the official openai-go SDK,
// unmodified, against up with real ffmpeg and pocketsphinx, the AssemblyAI
// stand-in giving speaker labels and the OpenAI stand-in translating.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/transcriber/transcriber/internal/engine/assemblyai/assemblyaitest"
	"github.com/transcriber/transcriber/internal/testaudio"
)

func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() }) // only read
	return f
}

// postAudio sends a recording to the OpenAI endpoint as a client without
// an SDK would.
func postAudio(ctx context.Context, t *testing.T, u *upInstance, path string, fields map[string]string, headers ...string) *http.Response {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", "note.ogg")
		if err != nil {
			_ = pw.CloseWithError(err)
			return
		}
		b, _ := os.ReadFile(path)
		_, _ = part.Write(b)
		for k, v := range fields {
			_ = mw.WriteField(k, v)
		}
		_ = pw.CloseWithError(mw.Close())
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+u.http+"/v1/audio/transcriptions", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+apiToken)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func sdkFor(u *upInstance, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL("http://" + u.http + "/v1"), option.WithAPIKey(apiToken), option.WithMaxRetries(0)}, opts...)...)
}

// TestOpenAIDropInLocal is the drop-in as a new user tries it with the
// default engine. TRANSCRIBER_API_WAIT is far shorter than any job, so every
// answer with text proves the wait follows the client, not the setting.
func TestOpenAIDropInLocal(t *testing.T) {
	requireSpeechTools(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_API_TOKENS", apiToken, "TRANSCRIBER_API_WAIT", "200ms")
	note := testaudio.VoiceNote(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	// The subtests run in parallel after this function returns.
	t.Cleanup(cancel)

	// Scenario: A streamed transcription gives deltas as chunks finish and then the whole text
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		c := sdkFor(u, option.WithHeader("Idempotency-Key", "e2e-stream"))
		stream := c.Audio.Transcriptions.NewStreaming(ctx, openai.AudioTranscriptionNewParams{File: openFile(t, note), Model: "local"})
		deltas, done := 0, ""
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "transcript.text.delta":
				deltas++
			case "transcript.text.done":
				done = ev.Text
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if deltas == 0 || !strings.Contains(done, testaudio.GoForwardText) {
			t.Errorf("%d deltas, done %q; want at least one delta and done with %q", deltas, done, testaudio.GoForwardText)
		}
	})

	// Scenario: An OpenAI client gets words with their times in verbose_json
	t.Run("words", func(t *testing.T) {
		t.Parallel()
		c := sdkFor(u, option.WithRequestTimeout(2*time.Minute), option.WithHeader("Idempotency-Key", "e2e-words"))
		res, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: openFile(t, note), Model: "whisper-1",
			ResponseFormat: openai.AudioResponseFormatVerboseJSON, TimestampGranularities: []string{"word"}})
		if err != nil {
			t.Fatal(err)
		}
		v := res.AsTranscriptionVerbose()
		if got := strings.Fields(v.Text); len(v.Words) != len(got) || len(got) == 0 {
			t.Fatalf("words %+v for text %q; want one per word", v.Words, v.Text)
		}
		for i := 1; i < len(v.Words); i++ {
			if v.Words[i].Start <= v.Words[i-1].Start {
				t.Errorf("word %d %q starts at %v, not after %v", i, v.Words[i].Word, v.Words[i].Start, v.Words[i-1].Start)
			}
		}
	})

	// Scenario: A job that outlasts TRANSCRIBER_API_WAIT still answers an SDK that announces its timeout
	t.Run("longer than the wait", func(t *testing.T) {
		t.Parallel()
		c := sdkFor(u, option.WithRequestTimeout(2*time.Minute), option.WithHeader("Idempotency-Key", "e2e-slow"))
		res, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: openFile(t, note), Model: "local"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != testaudio.GoForwardText {
			t.Errorf("text = %q; want %q", res.Text, testaudio.GoForwardText)
		}
	})

	// Scenario: Models list the engines and OpenAI's names
	t.Run("models", func(t *testing.T) {
		t.Parallel()
		c := sdkFor(u)
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if !strings.Contains(","+strings.Join(ids, ",")+",", ",local,") || !strings.Contains(strings.Join(ids, ","), "whisper-1") {
			t.Errorf("models = %v; want local and whisper-1", ids)
		}
	})

	// Scenario: Translations go to engines that translate, and others answer 400
	t.Run("translation refused by local", func(t *testing.T) {
		t.Parallel()
		c := sdkFor(u)
		//lint:ignore SA1019 the SDK marks translations deprecated; clients still call them, which is what is tested
		_, err := c.Audio.Translations.New(ctx, openai.AudioTranslationNewParams{File: openFile(t, note), Model: "local"})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "translation_unsupported" {
			t.Errorf("err = %v; want 400 translation_unsupported", err)
		}
	})

	// Scenario: Prefer respond-async answers 202 with the job id, and a client that goes away does not cancel the job
	t.Run("respond-async", func(t *testing.T) {
		t.Parallel()
		resp := postAudio(ctx, t, u, note, map[string]string{"model": "whisper-1"}, "Prefer", "respond-async", "Idempotency-Key", "e2e-async")
		defer resp.Body.Close()
		var body struct{ ID, State string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != http.StatusAccepted || body.ID == "" {
			t.Fatalf("= %d %+v; want 202 with the job id", resp.StatusCode, body)
		}
		// Nobody waits for it, and it finishes all the same.
		waitFor(t, "the async job done", func() bool {
			r := runCLI(t, u.client, "jobs", "show", body.ID)
			return r.code == 0 && strings.Contains(r.stdout, "done")
		})
	})
}

// Scenario: With AssemblyAI's speaker labels, diarized_json has speakers and the vtt voice tags
func TestOpenAIDiarizedAssemblyAI(t *testing.T) {
	requireSpeechTools(t)
	const key = "aai-diarize-key"
	aai := assemblyaitest.New(t, key)
	aai.SetResult("Go forward. Ten meters.", "en_us", []assemblyaitest.Word{
		{Text: "Go", Start: 300, End: 500, Confidence: 0.9, Speaker: "A"}, {Text: "forward.", Start: 520, End: 1000, Confidence: 0.9, Speaker: "A"},
		{Text: "Ten", Start: 1100, End: 1400, Confidence: 0.9, Speaker: "B"}, {Text: "meters.", Start: 1450, End: 2300, Confidence: 0.9, Speaker: "B"},
	})
	aai.SetProcessingPolls(0)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_API_TOKENS", apiToken, "TRANSCRIBER_ENGINE", "assemblyai",
		"ASSEMBLYAI_BASE_URL", aai.URL(), "ASSEMBLYAI_API_KEY", key, "ASSEMBLYAI_POLL_INTERVAL", "1s")
	note := testaudio.VoiceNote(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkFor(u)

	res, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: openFile(t, note),
		Model: "gpt-4o-transcribe-diarize", ResponseFormat: openai.AudioResponseFormatDiarizedJSON})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Text     string
		Segments []struct{ Speaker, Text string }
	}
	if err := json.Unmarshal([]byte(res.RawJSON()), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Segments) != 2 || d.Segments[0].Speaker != "A" || d.Segments[1].Speaker != "B" || d.Segments[1].Text != "Ten meters." {
		t.Errorf("diarized = %s; want two segments with speakers A and B", res.RawJSON())
	}
	if created := aai.Created(); len(created) == 0 || created[0]["speaker_labels"] != true {
		t.Errorf("AssemblyAI was asked %v; want speaker_labels", created)
	}

	// The same job's transcript as vtt names the voices.
	resp := postAudio(ctx, t, u, note, map[string]string{"model": "assemblyai", "response_format": "vtt", "speakers": "true"})
	defer resp.Body.Close()
	vtt, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(vtt), "<v Speaker A>Go forward.") || !strings.Contains(string(vtt), "<v Speaker B>Ten meters.") {
		t.Errorf("vtt = %d %q; want voice tags for A and B", resp.StatusCode, vtt)
	}

	// Scenario: transcribe --speakers labels the speakers in subtitles
	t.Run("transcribe --speakers", func(t *testing.T) {
		r := runCLI(t, u.client, "transcribe", "--speakers=2", "--format", "vtt", note)
		if r.code != 0 || !strings.Contains(r.stdout, "<v Speaker A>Go forward.") {
			t.Fatalf("transcribe --speakers: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
		}
		created := aai.Created()
		if last := created[len(created)-1]; last["speakers_expected"] != float64(2) {
			t.Errorf("AssemblyAI was asked %v; want two speakers expected", last)
		}
		// jobs show tells the same job's speakers one turn a line.
		var id string
		for _, line := range strings.Split(runCLI(t, u.client, "jobs", "list").stdout, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[2] == "cli" {
				id = f[0]
			}
		}
		show := runCLI(t, u.client, "jobs", "show", id)
		for _, want := range []string{"2 expected", "timed words:\t4", "Speaker A: Go forward.\nSpeaker B: Ten meters.\n"} {
			if !strings.Contains(show.stdout, want) {
				t.Errorf("jobs show %s = %q; want it to hold %q", id, show.stdout, want)
			}
		}
	})
}

// Scenario: Translations go to engines that translate, and others answer 400
func TestOpenAITranslationForwarded(t *testing.T) {
	requireSpeechTools(t)
	stand := newOpenAIStandIn(t)
	u := startUp(t, t.TempDir(), "TRANSCRIBER_API_TOKENS", apiToken, "TRANSCRIBER_ENGINE", "openai",
		"OPENAI_BASE_URL", stand.URL+"/v1", "OPENAI_API_KEY", "sk-stand-in")
	note := testaudio.VoiceNote(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkFor(u)
	//lint:ignore SA1019 the SDK marks translations deprecated; clients still call them, which is what is tested
	res, err := c.Audio.Translations.New(ctx, openai.AudioTranslationNewParams{File: openFile(t, note), Model: "whisper-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "In English: "+testaudio.GoForwardText {
		t.Errorf("translation = %q; want the stand-in's translation", res.Text)
	}
	// The same server's words and speakers reach the answers too.
	v, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: openFile(t, note), Model: "openai",
		ResponseFormat: openai.AudioResponseFormatVerboseJSON, TimestampGranularities: []string{"word", "segment"}})
	if err != nil {
		t.Fatal(err)
	}
	if words := v.AsTranscriptionVerbose().Words; len(words) != 4 || words[3].Word != "meters" {
		t.Errorf("words = %+v; want the four words", words)
	}
	d, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: openFile(t, note), Model: "gpt-4o-transcribe-diarize",
		ResponseFormat: openai.AudioResponseFormatDiarizedJSON})
	if err != nil {
		t.Fatal(err)
	}
	if raw := d.RawJSON(); !strings.Contains(raw, `"speaker":"A"`) || !strings.Contains(raw, `"speaker":"B"`) {
		t.Errorf("diarized = %s; want speakers A and B", raw)
	}
	stand.mu.Lock()
	defer stand.mu.Unlock()
	if len(stand.bad) > 0 {
		t.Errorf("the stand-in refused: %v", stand.bad)
	}
}
