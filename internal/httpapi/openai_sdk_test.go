package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

// spoken is what the stand-in worker recognises: two speakers' segments
// and their words, the speakers only when the job asked for them.
func spoken(in workflows.Input) transcript.Document {
	d := transcript.Document{Engine: in.Engine, Language: "en", Duration: 2790 * time.Millisecond, Text: "go forward ten meters",
		Segments: []transcript.Segment{{Start: 0.3, End: 1.2, Text: "go forward", Speaker: "A"}, {Start: 1.3, End: 2.5, Text: "ten meters", Speaker: "B"}},
		Words: []transcript.Word{{Word: "go", Start: 0.3, End: 0.6, Speaker: "A"}, {Word: "forward", Start: 0.6, End: 1.2, Speaker: "A"},
			{Word: "ten", Start: 1.3, End: 1.7, Speaker: "B"}, {Word: "meters", Start: 1.7, End: 2.5, Speaker: "B"}}}
	if in.Recognition.Translate {
		d.Text, d.Segments[0].Text, d.Segments[1].Text = "in English", "in", "English"
	}
	if !in.Recognition.Speakers {
		for i := range d.Segments {
			d.Segments[i].Speaker = ""
		}
		for i := range d.Words {
			d.Words[i].Speaker = ""
		}
	}
	return d
}

// finish stores the transcript of a job and marks it done.
func (h *harness) finish(t *testing.T, id string, doc transcript.Document) {
	t.Helper()
	b, _ := json.Marshal(doc)
	key := blob.JobKey(id, "transcript.json")
	if _, err := h.blobs.Put(context.Background(), key, bytes.NewReader(b)); err != nil {
		t.Error(err)
		return
	}
	h.jobs.set(id, func(j *fakeJob) { j.status.State, j.status.TranscriptKey = job.Done, key })
}

// work finishes every accepted job after delay, until the test ends.
func (h *harness) work(t *testing.T, delay time.Duration) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		seen := map[string]time.Time{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			h.jobs.mu.Lock()
			due := map[string]workflows.Input{}
			for id, j := range h.jobs.jobs {
				if j.status.State != job.Accepted {
					continue
				}
				if _, ok := seen[id]; !ok {
					seen[id] = time.Now()
				}
				if time.Since(seen[id]) >= delay {
					due[id] = j.in
				}
			}
			h.jobs.mu.Unlock()
			for id, in := range due {
				h.finish(t, id, spoken(in))
			}
		}
	}()
}

func sdkClient(t *testing.T, h *harness, opts ...option.RequestOption) openai.Client {
	srv := httptest.NewServer(h.h)
	t.Cleanup(srv.Close)
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(srv.URL + "/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0)}, opts...)...)
}

// recording is a distinct upload per call, so each request is its own job.
func recording(tag string) io.Reader {
	return openai.File(bytes.NewReader(append(append([]byte{}, ogg...), tag...)), "voice.ogg", "audio/ogg")
}

// Scenario: An OpenAI client gets words with their times in verbose_json
func TestSDKVerboseWords(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.work(t, 0)
	c := sdkClient(t, h)
	res, err := c.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: recording("words"), Model: "whisper-1", ResponseFormat: openai.AudioResponseFormatVerboseJSON,
		TimestampGranularities: []string{"word"}, Language: openai.String("en"), Temperature: openai.Float(0.2),
	})
	if err != nil {
		t.Fatal(err)
	}
	v := res.AsTranscriptionVerbose()
	if v.Text != "go forward ten meters" || v.Language != "english" || v.Duration != 2.79 {
		t.Errorf("verbose = %+v", v)
	}
	if len(v.Words) != 4 || v.Words[3].Word != "meters" {
		t.Fatalf("words = %+v; want the four words", v.Words)
	}
	for i := 1; i < len(v.Words); i++ {
		if v.Words[i].Start <= v.Words[i-1].Start {
			t.Errorf("word %d starts at %v, not after %v", i, v.Words[i].Start, v.Words[i-1].Start)
		}
	}
	if len(v.Segments) != 0 {
		t.Errorf("segments = %+v; want none when only words are asked for, as OpenAI answers", v.Segments)
	}
	for _, j := range h.jobs.jobs {
		if j.in.Original.Size == int64(len(ogg)+len("words")) && j.in.Recognition.Temperature != 0.2 {
			t.Errorf("recognition = %+v; want the temperature passed on", j.in.Recognition)
		}
	}

	res, err = c.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: recording("both"), Model: "whisper-1", ResponseFormat: openai.AudioResponseFormatVerboseJSON,
		TimestampGranularities: []string{"word", "segment"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := res.AsTranscriptionVerbose(); len(v.Words) != 4 || len(v.Segments) != 2 || v.Segments[1].Start != 1.3 {
		t.Errorf("verbose with both = %+v; want words and segments", v)
	}
}

// Scenario: Speakers are asked for and answered in diarized_json
func TestSDKDiarized(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.work(t, 0)
	c := sdkClient(t, h)
	res, err := c.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: recording("diarized"), Model: "gpt-4o-transcribe-diarize", ResponseFormat: openai.AudioResponseFormatDiarizedJSON,
		KnownSpeakerNames: []string{"ann", "bob"}, ChunkingStrategy: openai.AudioTranscriptionNewParamsChunkingStrategyUnion{OfAuto: "auto"},
		Include: []openai.TranscriptionInclude{"logprobs"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var d openAIDiarized
	if err := json.Unmarshal([]byte(res.RawJSON()), &d); err != nil {
		t.Fatal(err)
	}
	if d.Text != "go forward ten meters" || len(d.Segments) != 2 || d.Segments[0].Speaker != "A" || d.Segments[1].Speaker != "B" ||
		d.Segments[0].Type != "transcript.text.segment" || d.Segments[0].ID != "seg_0" {
		t.Errorf("diarized = %+v; want two segments with speakers A and B", d)
	}
	// speakers=N on any format asks for them too, with the count.
	params := openai.AudioTranscriptionNewParams{File: recording("count"), Model: "local"}
	params.SetExtraFields(map[string]any{"speakers": "2"})
	if _, err := c.Audio.Transcriptions.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	for _, j := range h.jobs.jobs {
		if j.in.Original.Size == int64(len(ogg)+len("count")) && j.in.Recognition != (workflows.Recognition{Speakers: true, SpeakersExpected: 2}) {
			t.Errorf("recognition = %+v; want two speakers expected", j.in.Recognition)
		}
	}
}

// Scenario: A streamed transcription gives deltas as chunks finish and then the whole text
func TestSDKStream(t *testing.T) {
	t.Parallel()
	t.Run("whole", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.work(t, 50*time.Millisecond)
		c := sdkClient(t, h)
		stream := c.Audio.Transcriptions.NewStreaming(context.Background(), openai.AudioTranscriptionNewParams{
			File: recording("stream"), Model: "gpt-4o-mini-transcribe"})
		var deltas []string
		var done string
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "transcript.text.delta":
				deltas = append(deltas, ev.Delta)
			case "transcript.text.done":
				done = ev.Text
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(deltas, "") != "go forward ten meters" || len(deltas) != 2 || done != "go forward ten meters" {
			t.Errorf("deltas %q, done %q; want one delta per segment adding up to the text", deltas, done)
		}
	})
	t.Run("chunks stream as they finish", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		c := sdkClient(t, h)
		stream := c.Audio.Transcriptions.NewStreaming(context.Background(), openai.AudioTranscriptionNewParams{
			File: recording("chunks"), Model: "local"})
		var id string
		for id == "" {
			h.jobs.mu.Lock()
			for k := range h.jobs.jobs {
				id = k
			}
			h.jobs.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
		chunk := func(i int, text string) {
			b, _ := json.Marshal(transcript.Document{Text: text, Segments: []transcript.Segment{{Start: 0, End: 1, Text: text}}})
			key := blob.JobKey(id, "chunk"+text)
			if _, err := h.blobs.Put(context.Background(), key, bytes.NewReader(b)); err != nil {
				t.Error(err)
			}
			h.jobs.set(id, func(j *fakeJob) {
				j.status.State = job.Transcribing
				// A new list: statuses handed out share the old one.
				chunks := make([]workflows.Chunk, 2)
				copy(chunks, j.status.Chunks)
				chunks[i].TranscriptKey = key
				j.status.Chunks = chunks
			})
		}
		chunk(0, "first")
		if !stream.Next() || stream.Current().Type != "transcript.text.delta" || stream.Current().Delta != "first" {
			t.Fatalf("first event = %+v, %v; want the first chunk's delta before the job is done", stream.Current(), stream.Err())
		}
		chunk(1, "second")
		if !stream.Next() || stream.Current().Delta != " second" {
			t.Fatalf("second event = %+v, %v; want the second chunk's delta", stream.Current(), stream.Err())
		}
		h.finish(t, id, transcript.Document{Text: "first second"})
		if !stream.Next() || stream.Current().Type != "transcript.text.done" || stream.Current().Text != "first second" {
			t.Fatalf("last event = %+v, %v; want done with the whole text", stream.Current(), stream.Err())
		}
		if stream.Next() {
			t.Errorf("event after done: %+v", stream.Current())
		}
	})
	t.Run("failure is an error event", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		c := sdkClient(t, h)
		go func() {
			for {
				h.jobs.mu.Lock()
				for _, j := range h.jobs.jobs {
					j.status.State, j.status.Failure = job.Failed, &job.Failure{Kind: job.NoSpeech, Step: job.Transcribing, Message: "no speech"}
				}
				n := len(h.jobs.jobs)
				h.jobs.mu.Unlock()
				if n > 0 {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		stream := c.Audio.Transcriptions.NewStreaming(context.Background(), openai.AudioTranscriptionNewParams{
			File: recording("fails"), Model: "local"})
		for stream.Next() {
			t.Errorf("event %+v; want an error", stream.Current())
		}
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "no speech") {
			t.Errorf("stream error = %v; want the failure", err)
		}
	})
}

// Scenario: A job that outlasts TRANSCRIBER_API_WAIT still answers an SDK that announces its timeout
func TestSDKWaitsAsLongAsTheClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *APIOptions) { o.Wait = 100 * time.Millisecond })
	h.work(t, 400*time.Millisecond)
	c := sdkClient(t, h, option.WithRequestTimeout(30*time.Second))
	res, err := c.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{File: recording("slow"), Model: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "go forward ten meters" {
		t.Errorf("text = %q", res.Text)
	}
}

// Scenario: A long wait keeps the connection alive and still answers the SDK
func TestSDKKeepAlive(t *testing.T) {
	// Not parallel: it shortens the package's keep-alive timing.
	after, every := keepAliveAfter, keepAliveEvery
	keepAliveAfter, keepAliveEvery = 50*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { keepAliveAfter, keepAliveEvery = after, every })
	h := newHarness(t)
	h.work(t, 300*time.Millisecond)
	srv := httptest.NewServer(h.h)
	defer srv.Close()
	var body bytes.Buffer
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				body.Write(b)
				resp.Body = io.NopCloser(bytes.NewReader(b))
			}
			return resp, err
		}))
	res, err := c.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{File: recording("kept"), Model: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "go forward ten meters" || !strings.HasPrefix(body.String(), "\n\n") {
		t.Errorf("text %q after body %q; want the text after keep-alive newlines", res.Text, body.String())
	}
}

// Scenario: Prefer respond-async answers 202 with the job id, and a client that goes away does not cancel the job
func TestRespondAsync(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := form(t, "/v1/audio/transcriptions", &formFile{name: "a.ogg", body: ogg}, map[string]string{"model": "whisper-1"})
	r.Header.Set("Prefer", "respond-async")
	w := h.do(t, r)
	if w.Code != http.StatusAccepted || w.Header().Get("Preference-Applied") != "respond-async" {
		t.Fatalf("= %d %s; want 202 with Preference-Applied", w.Code, w.Body)
	}
	id := decode[acceptedBody](t, w).ID

	c := sdkClient(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: recording("gone"), Model: "local"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the client's own deadline", err)
	}
	time.Sleep(50 * time.Millisecond) // the handler notices the client left
	h.jobs.mu.Lock()
	defer h.jobs.mu.Unlock()
	if len(h.jobs.jobs) != 2 {
		t.Fatalf("%d jobs; want 2", len(h.jobs.jobs))
	}
	for jid, j := range h.jobs.jobs {
		if j.status.State != job.Accepted || j.closed {
			t.Errorf("job %s (%s) = %s; want it still running after its client left", jid, id, j.status.State)
		}
	}
}

// Scenario: Models list the engines and OpenAI's names
func TestSDKModels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := sdkClient(t, h)
	var ids []string
	iter := c.Models.ListAutoPaging(context.Background())
	for iter.Next() {
		m := iter.Current()
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy != "transcriber" || m.Created == 0 {
			t.Errorf("model = %+v", m)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "local,openai,whisper-1,gpt-4o-transcribe,gpt-4o-mini-transcribe,gpt-4o-transcribe-diarize" {
		t.Errorf("models = %v", ids)
	}
	if m, err := c.Models.Get(context.Background(), "local"); err != nil || m.ID != "local" {
		t.Errorf("Get(local) = %+v, %v", m, err)
	}
	_, err := c.Models.Get(context.Background(), "gpt-5")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Errorf("Get(gpt-5) error = %v; want 404 model_not_found", err)
	}
}

// Scenario: Translations go to engines that translate, and others answer 400
func TestSDKTranslations(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *APIOptions) { o.Translators = []string{"openai"} })
	h.work(t, 0)
	c := sdkClient(t, h)
	//lint:ignore SA1019 the SDK marks translations deprecated; clients still call them, which is what is tested
	_, err := c.Audio.Translations.New(context.Background(), openai.AudioTranslationNewParams{File: recording("local"), Model: "local"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "translation_unsupported" ||
		!strings.Contains(apiErr.Message, "openai") {
		t.Errorf("translation by local = %v; want 400 translation_unsupported naming openai", err)
	}
	//lint:ignore SA1019 the SDK marks translations deprecated; clients still call them, which is what is tested
	res, err := c.Audio.Translations.New(context.Background(), openai.AudioTranslationNewParams{File: recording("openai"), Model: "openai",
		Prompt: openai.String("names"), ResponseFormat: openai.AudioTranslationNewParamsResponseFormatVerboseJSON})
	if err != nil {
		t.Fatal(err)
	}
	var v openAIVerbose
	if err := json.Unmarshal([]byte(res.RawJSON()), &v); err != nil {
		t.Fatal(err)
	}
	if res.Text != "in English" || v.Task != "translate" {
		t.Errorf("translation = %s; want the English text, task translate", res.RawJSON())
	}
	for _, j := range h.jobs.jobs {
		if j.in.Engine == "openai" && (!j.in.Recognition.Translate || j.in.Language != "") {
			t.Errorf("job input = %+v; want a translation without a spoken language", j.in)
		}
	}
}
