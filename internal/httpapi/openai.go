package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

// openAIFormats are the response_format values of OpenAI's endpoint.
var openAIFormats = []string{"json", "text", "srt", "vtt", "verbose_json", "diarized_json"}

// openAIGranularities are the timestamp_granularities[] values.
var openAIGranularities = []string{"word", "segment"}

// openAIRequest is what a transcription or translation request asks for.
type openAIRequest struct {
	submission
	format string
	// words and segments are the granularities verbose_json carries.
	words, segments bool
	stream          bool
	translate       bool
}

// openAITranscription is POST /v1/audio/transcriptions as OpenAI serves
// it: a multipart form with file and model, the transcript in the answer.
func (a *API) openAITranscription(w http.ResponseWriter, r *http.Request) {
	a.openAIAudio(w, r, false)
}

// openAITranslation is POST /v1/audio/translations: English text of speech
// in any language, from the engines that translate.
func (a *API) openAITranslation(w http.ResponseWriter, r *http.Request) {
	a.openAIAudio(w, r, true)
}

func (a *API) openAIAudio(w http.ResponseWriter, r *http.Request, translate bool) {
	key, apiErr := checkKey(r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	u, apiErr := a.receive(w, r, true)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	defer u.remove()
	req, apiErr := a.openAIRequest(u, key, translate)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	// The id accept gives is derived from the caller's account, so the job
	// it names is the caller's own; the stream still asks through ownJob,
	// as every path that reads a job does.
	id, existing, apiErr := a.accept(r.Context(), u, req.submission)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if req.stream {
		a.streamTranscript(w, r, id)
		return
	}
	wait, async := a.waitFor(r)
	if async {
		w.Header().Set("Preference-Applied", "respond-async")
		if wait == 0 {
			a.writeAccepted(w, id, existing, job.Accepted)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	go func() {
		select {
		case <-a.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	kw := &keepAlive{w: w, json: strings.HasSuffix(req.format, "json")}
	stopKeepAlive := kw.start(keepAliveAfter, keepAliveEvery)
	st, err := a.opts.Jobs.Await(ctx, id, nil)
	stopKeepAlive()
	if err != nil {
		if r.Context().Err() != nil {
			// The client went away; the job goes on and the next request
			// for the same recording finds it.
			return
		}
		// Still running: the job goes on, and its id says where to look.
		if kw.committed {
			writeBody(w, errorBody{Error: errorDetail{Code: "still_running", Type: "server_error",
				Message: fmt.Sprintf("job %s is still running; fetch its transcript from /v1/jobs/%s/transcript", id, id)}})
			return
		}
		a.writeAccepted(w, id, false, st.State)
		return
	}
	var apiErr2 *apiError
	var doc transcript.Document
	switch st.State {
	case job.Done:
		doc, err = transcript.Load(r.Context(), a.opts.Blobs, st.TranscriptKey)
		if err != nil {
			a.log.Error("transcript unreadable", "job_id", id, "error", err)
			apiErr2 = &apiError{status: http.StatusInternalServerError, code: "storage_error",
				message: fmt.Sprintf("the transcript of job %s cannot be read from this server's store", id)}
		}
	case job.Cancelled:
		apiErr2 = &apiError{status: http.StatusConflict, code: "cancelled", message: fmt.Sprintf("job %s was cancelled", id)}
	default:
		apiErr2 = failedError(id, st)
	}
	if apiErr2 != nil {
		if kw.committed {
			// The status went out with the first keep-alive byte; the body
			// still says what went wrong in OpenAI's shape.
			writeBody(w, errorBody{Error: errorDetail{Code: apiErr2.code, Message: apiErr2.message, Type: "server_error"}})
			return
		}
		writeError(w, apiErr2)
		return
	}
	writeOpenAI(w, doc, req, kw.committed)
}

// openAIRequest reads and checks the fields of an OpenAI audio request.
// Fields OpenAI takes that no engine here can honour (chunking_strategy,
// include[], known_speaker_names[], ...) are accepted and ignored, so that
// clients written for OpenAI keep working.
func (a *API) openAIRequest(u *upload, key string, translate bool) (openAIRequest, *apiError) {
	req := openAIRequest{translate: translate, format: u.fields["response_format"]}
	if req.format == "" {
		req.format = "json"
	}
	formats := openAIFormats
	if translate {
		formats = openAIFormats[:5]
	}
	if !slices.Contains(formats, req.format) {
		return req, errBadRequest("invalid_response_format",
			fmt.Sprintf("response_format %q is not one of %s", req.format, strings.Join(formats, ", ")))
	}
	model := u.fields["model"]
	if model == "" {
		return req, errBadRequest("missing_model", "the form has no field model; any model name is accepted, and an engine name (such as local) picks that engine")
	}
	switch v := u.fields["stream"]; v {
	case "", "false":
	case "true":
		req.stream = true
	default:
		return req, errBadRequest("invalid_stream", fmt.Sprintf("stream %q is not true or false", v))
	}
	grans := u.list("timestamp_granularities")
	for _, g := range grans {
		if !slices.Contains(openAIGranularities, g) {
			return req, errBadRequest("invalid_timestamp_granularities",
				fmt.Sprintf("timestamp_granularities[] %q is not one of %s", g, strings.Join(openAIGranularities, ", ")))
		}
	}
	// OpenAI gives segments unless only words are asked for.
	req.words = slices.Contains(grans, "word")
	req.segments = len(grans) == 0 || slices.Contains(grans, "segment")

	s := submission{key: key, language: u.fields["language"], prompt: u.fields["prompt"]}
	if translate {
		// The spoken language is the engine's to find; the text is English.
		s.language = ""
	}
	// OpenAI model names mean nothing here; an engine's name picks it.
	if slices.Contains(a.opts.Engines, model) {
		s.engine = model
	}
	if v := u.fields["temperature"]; v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || t < 0 || t > 1 {
			return req, errBadRequest("invalid_temperature", fmt.Sprintf("temperature %q is not a number from 0 to 1", v))
		}
		s.recognition.Temperature = t
	}
	speakers, apiErr := speakersField(u.fields["speakers"])
	if apiErr != nil {
		return req, apiErr
	}
	if speakers >= 0 || req.format == "diarized_json" || strings.Contains(model, "diarize") {
		s.recognition.Speakers = true
		s.recognition.SpeakersExpected = max(speakers, 0)
	}
	s.recognition.Translate = translate
	if apiErr := a.checkSubmission(s); apiErr != nil {
		return req, apiErr
	}
	if translate {
		if e, _ := a.opts.Engine(s.engine, ""); !slices.Contains(a.opts.Translators, e) {
			msg := fmt.Sprintf("the %s engine does not translate", e)
			if len(a.opts.Translators) > 0 {
				msg += "; name an engine that does as the model: " + strings.Join(a.opts.Translators, ", ")
			} else {
				msg += "; none of this server's engines does (the openai engine forwards translations to its server)"
			}
			return req, errBadRequest("translation_unsupported", msg)
		}
	}
	req.submission = s
	return req, nil
}

// speakersField reads speakers: true or false, or the number of speakers
// expected. It returns -1 when speakers are not asked for, 0 when asked
// for without a count.
func speakersField(v string) (int, *apiError) {
	switch v {
	case "", "false", "0":
		return -1, nil
	case "true":
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 32 {
		return -1, errBadRequest("invalid_speakers", fmt.Sprintf("speakers %q is not true, false or a number of speakers from 1 to 32", v))
	}
	return n, nil
}

// defaultWait is how long a request whose client announces no timeout
// waits for its transcript when the server is configured with none.
const defaultWait = time.Hour

// waitFor is how long a request waits for its transcript, and whether it
// asked to be answered at once with the job's id (Prefer: respond-async,
// RFC 7240, whose wait=N preference is honoured). A client that announces
// its timeout, as OpenAI's SDKs do with X-Stainless-Timeout, is waited for
// until just before it would give up, however long the configured wait.
func (a *API) waitFor(r *http.Request) (wait time.Duration, async bool) {
	wait = a.waitCap(r)
	// wait=N bounds only an asynchronous answer: a client that did not
	// opt in to 202 gets its transcript, however long that takes.
	preferred := -1
	for _, v := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(pref), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "respond-async":
				async = true
			case "wait":
				if n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`)); err == nil && n >= 0 {
					preferred = n
				}
			}
		}
	}
	if async {
		if preferred < 0 {
			return 0, true
		}
		wait = min(wait, time.Duration(preferred)*time.Second)
	}
	return wait, async
}

// waitCap is the longest wait the client allows.
func (a *API) waitCap(r *http.Request) time.Duration {
	wait := a.opts.Wait
	if wait <= 0 {
		wait = defaultWait
	}
	if s, err := strconv.ParseFloat(r.Header.Get("X-Stainless-Timeout"), 64); err == nil && s > 0 {
		wait = time.Duration(s * float64(time.Second) * 9 / 10)
	}
	return wait
}

// Keep-alive: proxies and load balancers close connections that stay
// silent for a minute or two, so a long wait sends whitespace, which
// JSON readers skip before the body. Text formats cannot take it, and the
// first byte commits the status, so it starts only after a wait most jobs
// never reach.
var (
	keepAliveAfter = 20 * time.Second
	keepAliveEvery = 15 * time.Second
)

type keepAlive struct {
	w         http.ResponseWriter
	json      bool
	committed bool
}

// start sends keep-alive bytes after the first wait; the returned function
// stops them, and after it returns committed says whether the status went.
func (k *keepAlive) start(after, every time.Duration) (stop func()) {
	if !k.json {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTimer(after)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if !k.committed {
				k.w.Header().Set("Content-Type", "application/json")
				k.w.WriteHeader(http.StatusOK)
				k.committed = true
			}
			if _, err := k.w.Write([]byte("\n")); err != nil {
				return
			}
			_ = http.NewResponseController(k.w).Flush()
			t.Reset(every)
		}
	}()
	return func() { close(done); <-stopped }
}

func failedError(id string, st workflows.Status) *apiError {
	e := &apiError{status: http.StatusBadGateway, code: string(job.Internal),
		message: fmt.Sprintf("job %s is %s", id, st.State)}
	if f := st.Failure; f != nil {
		e.code = string(f.Kind)
		e.message = fmt.Sprintf("job %s is %s (%s at %s): %s", id, st.State, f.Kind, f.Step, f.Message)
		// OpenAI answers a recording at fault with 400.
		if f.Kind.BlamesInput() {
			e.status = http.StatusBadRequest
		}
	}
	return e
}

type openAISegment struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int   `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
}

type openAIWord struct {
	Word  string  `json:"word"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

type openAIUsage struct {
	Type    string  `json:"type"`
	Seconds float64 `json:"seconds"`
}

type openAIVerbose struct {
	Task     string          `json:"task"`
	Language string          `json:"language"`
	Duration float64         `json:"duration"`
	Text     string          `json:"text"`
	Segments []openAISegment `json:"segments,omitempty"`
	Words    []openAIWord    `json:"words,omitempty"`
	Usage    openAIUsage     `json:"usage"`
}

// openAIDiarized is diarized_json as OpenAI shapes it for
// gpt-4o-transcribe-diarize: segments with speakers, ids and a type.
type openAIDiarized struct {
	Task     string                  `json:"task"`
	Duration float64                 `json:"duration"`
	Text     string                  `json:"text"`
	Segments []openAIDiarizedSegment `json:"segments"`
	Usage    openAIUsage             `json:"usage"`
}

type openAIDiarizedSegment struct {
	Type    string  `json:"type"`
	ID      string  `json:"id"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Text    string  `json:"text"`
	Speaker string  `json:"speaker"`
}

// languageNames are the names verbose_json gives the languages, as
// Whisper reports them; a code without a name is reported as the code.
var languageNames = map[string]string{
	"en": "english", "ru": "russian", "de": "german", "fr": "french", "es": "spanish", "it": "italian",
	"pt": "portuguese", "uk": "ukrainian", "zh": "chinese", "ja": "japanese", "nl": "dutch", "pl": "polish",
	"tr": "turkish", "ar": "arabic", "ko": "korean", "hi": "hindi", "cs": "czech", "sv": "swedish",
	"be": "belarusian", "kk": "kazakh",
}

func languageName(code string) string {
	if n, ok := languageNames[code]; ok {
		return n
	}
	return code
}

func writeOpenAI(w http.ResponseWriter, doc transcript.Document, req openAIRequest, committed bool) {
	usage := openAIUsage{Type: "duration", Seconds: doc.Duration.Seconds()}
	var body any
	switch req.format {
	case "json":
		body = map[string]any{"text": doc.Text, "usage": usage}
	case "verbose_json":
		v := openAIVerbose{Task: "transcribe", Language: languageName(doc.Language), Duration: doc.Duration.Seconds(),
			Text: doc.Text, Usage: usage}
		if v.Language == "" {
			v.Language = languageName(req.language)
		}
		if req.translate {
			v.Task = "translate"
		}
		if req.segments {
			v.Segments = make([]openAISegment, 0, len(doc.Segments))
			for i, s := range doc.Segments {
				v.Segments = append(v.Segments, openAISegment{ID: i, Start: s.Start, End: s.End, Text: s.Text, Tokens: []int{}})
			}
		}
		if req.words {
			v.Words = make([]openAIWord, 0, len(doc.Words))
			for _, wd := range doc.Words {
				v.Words = append(v.Words, openAIWord{Word: wd.Word, Start: wd.Start, End: wd.End})
			}
		}
		body = v
	case "diarized_json":
		d := openAIDiarized{Task: "transcribe", Duration: doc.Duration.Seconds(), Text: doc.Text, Usage: usage,
			Segments: make([]openAIDiarizedSegment, 0, len(doc.Segments))}
		for i, s := range doc.Segments {
			d.Segments = append(d.Segments, openAIDiarizedSegment{Type: "transcript.text.segment", ID: fmt.Sprintf("seg_%d", i),
				Start: s.Start, End: s.End, Text: s.Text, Speaker: s.Speaker})
		}
		body = d
	default:
		f := req.format
		if f == "text" {
			f = "txt"
		}
		mediaType, _ := transcript.MediaType(f)
		w.Header().Set("Content-Type", mediaType)
		_ = transcript.Render(w, doc, f)
		return
	}
	if committed {
		writeBody(w, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// writeBody writes JSON after the status has gone.
func writeBody(w http.ResponseWriter, v any) {
	_ = json.NewEncoder(w).Encode(v)
}
