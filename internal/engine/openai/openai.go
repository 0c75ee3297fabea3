// Package openai recognises speech with any server that speaks the OpenAI
// transcription API: OpenAI itself, Groq, speaches, faster-whisper-server,
// the whisper.cpp server and LocalAI. One Submit is one HTTP request; the
// pipeline decides about retries from the classified error.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
)

// Name is how jobs and configuration refer to this engine.
const Name = "openai"

// Config locates the server and chooses the model.
type Config struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1"; a trailing
	// slash is tolerated.
	BaseURL string
	// APIKey is sent as a bearer token; empty for local servers that need none.
	APIKey string
	// Model is e.g. "whisper-1"; empty leaves the choice to the server,
	// which some local servers allow.
	Model string
	// MaxUploadBytes is the largest file the server takes, DefaultMaxUpload
	// when zero; MaxDuration the longest audio, zero for no limit. Longer
	// recordings reach the engine in chunks that fit.
	MaxUploadBytes int64
	MaxDuration    time.Duration
	// Prompt guides the model's spelling of names and terms in every
	// request that brings no prompt of its own.
	Prompt string
	// AlwaysConvert sends every recording as FLAC, for servers that do not
	// read every file OpenAI does.
	AlwaysConvert bool
	// DiarizeModel is the model asked when a job wants speakers labelled
	// (OpenAI's gpt-4o-transcribe-diarize answers diarized_json); empty
	// leaves speakers unlabelled, for servers that have no such model.
	DiarizeModel string
}

// DefaultMaxUpload is OpenAI's documented limit of 25 MB per file.
const DefaultMaxUpload = 25_000_000

// Engine sends one file per Submit to the transcription endpoint.
type Engine struct {
	endpoint  string
	translate string
	model     string
	diarize   string
	prompt    string
	convert   bool
	limits    engine.Limits
	http      *engine.Client
}

// New checks the configuration. A nil client gets one without an overall
// timeout, because a long recording can take minutes and the caller's
// context already bounds each request.
func New(cfg Config, client *http.Client) (*Engine, error) {
	u, ok := engine.ParseHTTPURL(strings.TrimSpace(cfg.BaseURL))
	if !ok {
		return nil, errors.New("openai engine: base URL must be an absolute http or https URL such as https://api.openai.com/v1")
	}
	if cfg.MaxUploadBytes < 0 || cfg.MaxDuration < 0 {
		return nil, errors.New("openai engine: upload limits must not be negative")
	}
	limits := engine.Limits{MaxBytes: cfg.MaxUploadBytes, MaxDuration: cfg.MaxDuration}
	if limits.MaxBytes == 0 {
		limits.MaxBytes = DefaultMaxUpload
	}
	c := engine.NewClient(client, "the transcription server", "openai")
	c.Secret = cfg.APIKey
	if cfg.APIKey != "" {
		c.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	c.Adjust = adjust
	return &Engine{
		endpoint:  u.JoinPath("audio", "transcriptions").String(),
		translate: u.JoinPath("audio", "translations").String(),
		model:     cfg.Model,
		diarize:   cfg.DiarizeModel,
		prompt:    cfg.Prompt,
		convert:   cfg.AlwaysConvert,
		limits:    limits,
		http:      c,
	}, nil
}

// Name implements the activities' Recognizer.
func (e *Engine) Name() string { return Name }

// Format is FLAC: every OpenAI-compatible server reads it, and it is half
// the upload of WAV.
func (e *Engine) Format() audio.Format { return audio.FLAC16kMono }

// TakesAsIs accepts the files OpenAI documents for its transcription
// endpoint (flac, mp3, mp4/m4a, mpeg/mpga, ogg, wav, webm): uploading a
// voice note as it is spares a conversion and is smaller than FLAC.
func (e *Engine) TakesAsIs(info audio.Info) bool {
	_, ok := audio.TypeOf(info)
	return ok && !e.convert
}

// Submit uploads the file and waits for the transcript; the API has no
// asynchronous operations.
func (e *Engine) Submit(ctx context.Context, req engine.Request) (engine.Submission, error) {
	contentType := req.MIME
	if contentType == "" {
		contentType = partContentType(req.AudioPath)
	}
	form, err := engine.Form(e.formFields(req), "file", partFileName(req.AudioPath), contentType)
	if err != nil {
		return engine.Submission{}, fmt.Errorf("openai: lay out the form: %w", err)
	}
	up, err := engine.OpenUpload(req.AudioPath, form.Head, form.Tail, engine.Raw)
	if err != nil {
		return engine.Submission{}, fmt.Errorf("openai: %w", err)
	}
	defer func() { _ = up.Close() }() // Do reports a failure to read the audio
	endpoint := e.endpoint
	if req.Translate {
		endpoint = e.translate
	}
	httpReq, err := e.http.UploadRequest(ctx, http.MethodPost, endpoint, up)
	if err != nil {
		return engine.Submission{}, err
	}
	httpReq.Header.Set("Content-Type", form.ContentType)
	resp, body, err := e.http.Do(ctx, httpReq, "", up)
	if err != nil {
		return engine.Submission{}, err
	}
	res, perr := parseResult(body, resp.Header.Get("Content-Type"))
	if perr != nil {
		perr.Status = resp.StatusCode
		return engine.Submission{}, perr
	}
	switch {
	case req.Translate:
		// A translation is English whatever was spoken.
		res.Language = "en"
	case res.Language == "":
		// The server was told the language and did not contradict it.
		res.Language = engine.PrimaryLanguage(req.Language)
	}
	return engine.Submission{Result: &res}, nil
}

// Limits are the server's size limit and the configured longest audio.
func (e *Engine) Limits() engine.Limits { return e.limits }

// Translates: the server's translations endpoint renders any speech as
// English text.
func (e *Engine) Translates() bool { return true }

// Check is never called: Submit does not return operations.
func (e *Engine) Check(context.Context, string) (engine.Submission, error) {
	return engine.Submission{}, engine.Errorf(engine.Rejected, "the openai engine has no pending operations")
}

func (e *Engine) formFields(req engine.Request) [][2]string {
	var fields [][2]string
	model := e.model
	diarize := req.Speakers && e.diarize != "" && !req.Translate
	if diarize {
		model = e.diarize
	}
	if model != "" {
		fields = append(fields, [2]string{"model", model})
	}
	if lang := engine.PrimaryLanguage(req.Language); lang != "" && !req.Translate {
		fields = append(fields, [2]string{"language", lang})
	}
	prompt := req.Prompt
	if prompt == "" {
		prompt = e.prompt
	}
	// The diarize model takes no prompt.
	if prompt != "" && !diarize {
		fields = append(fields, [2]string{"prompt", prompt})
	}
	if req.Temperature > 0 {
		fields = append(fields, [2]string{"temperature", strconv.FormatFloat(req.Temperature, 'f', -1, 64)})
	}
	switch {
	case diarize:
		// OpenAI requires a chunking strategy of the diarize model for
		// audio over 30 seconds; auto is what it suggests.
		return append(fields, [2]string{"response_format", "diarized_json"}, [2]string{"chunking_strategy", "auto"})
	case req.Translate:
		return append(fields, [2]string{"response_format", "verbose_json"})
	}
	// Word times cost OpenAI some latency and nothing else; servers that
	// do not know the field ignore it.
	return append(fields, [2]string{"response_format", "verbose_json"},
		[2]string{"timestamp_granularities[]", "segment"}, [2]string{"timestamp_granularities[]", "word"})
}

// partFileName keeps only the extension of the local path: servers pick the
// decoder by it, and the local name means nothing to them.
func partFileName(path string) string {
	ext := strings.ToLower(filepath.Ext(path))
	// .oga is OGG audio by another name that several servers refuse to
	// recognise as a format.
	if ext == ".oga" {
		ext = ".ogg"
	}
	for _, r := range strings.TrimPrefix(ext, ".") {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9') {
			return "audio"
		}
	}
	return "audio" + ext
}

func partContentType(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".flac":
		return "audio/flac"
	case ".wav":
		return "audio/wav"
	case ".ogg", ".oga", ".opus":
		return "audio/ogg"
	case ".mp3", ".mpga", ".mpeg":
		return "audio/mpeg"
	case ".m4a", ".mp4":
		return "audio/mp4"
	case ".webm":
		return "audio/webm"
	}
	return "application/octet-stream"
}

// adjust prefers OpenAI's millisecond hint, which is finer than the
// standard header it accompanies.
func adjust(err *engine.Error, resp *http.Response, _ []byte, _, _ string) {
	if !err.Kind.Verdict() {
		err.RetryAfter = retryAfter(resp.Header, time.Now())
	}
}

func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err == nil && ms > 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return engine.ParseRetryAfter(h.Get("Retry-After"), now)
}

// transcription is the verbose_json or diarized_json answer; servers that
// ignore the format send only text, which is enough.
type transcription struct {
	Text     *string `json:"text"`
	Language string  `json:"language"`
	Segments []struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Text  string  `json:"text"`
		// Speaker is in diarized_json's segments only.
		Speaker string `json:"speaker"`
	} `json:"segments"`
	Words []struct {
		Word  string  `json:"word"`
		Start float64 `json:"start"`
		End   float64 `json:"end"`
	} `json:"words"`
}

func parseResult(body []byte, contentType string) (engine.Result, *engine.Error) {
	mediaType, _, _ := mime.ParseMediaType(contentType)
	isJSON := mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
	switch {
	case isJSON, mediaType == "" && looksLikeJSON(body):
		if contentType == "" {
			contentType = "application/json"
		}
		return parseJSON(body, contentType)
	case mediaType == "text/plain", mediaType == "":
		if contentType == "" {
			contentType = "text/plain; charset=utf-8"
		}
		return engine.Result{Text: strings.TrimSpace(string(body)), Raw: body, RawType: contentType}, nil
	}
	// An HTML page from a proxy or portal is not a transcript of silence.
	return engine.Result{}, engine.Errorf(engine.Unavailable, "malformed response: unexpected content type %q", mediaType)
}

func looksLikeJSON(body []byte) bool {
	s := strings.TrimSpace(string(body))
	return strings.HasPrefix(s, "{")
}

func parseJSON(body []byte, contentType string) (engine.Result, *engine.Error) {
	var t transcription
	if err := json.Unmarshal(body, &t); err != nil {
		return engine.Result{}, &engine.Error{Kind: engine.Unavailable, Message: "malformed response: not valid JSON", Err: err}
	}
	if t.Text == nil {
		return engine.Result{}, engine.Errorf(engine.Unavailable, "malformed response: no text field")
	}
	res := engine.Result{
		Text:     strings.TrimSpace(*t.Text),
		Language: normaliseLanguage(t.Language),
		Raw:      body,
		RawType:  contentType,
	}
	for _, s := range t.Segments {
		res.Segments = append(res.Segments, engine.Segment{
			Start:   seconds(s.Start),
			End:     seconds(s.End),
			Text:    strings.TrimSpace(s.Text),
			Speaker: strings.TrimSpace(s.Speaker),
		})
	}
	for _, w := range t.Words {
		res.Words = append(res.Words, engine.Word{Start: seconds(w.Start), End: seconds(w.End), Text: strings.TrimSpace(w.Word)})
	}
	return res, nil
}

func seconds(f float64) time.Duration {
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond)
}

// normaliseLanguage turns the reported language into a code. verbose_json
// reports Whisper's language names; an unknown name gives nothing, because a
// wrong code is worse than none.
func normaliseLanguage(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if code := languageCode(s); code != "" {
		return code
	}
	if engine.IsLanguageCode(s) {
		return s
	}
	return ""
}

func languageCode(name string) string {
	switch name {
	case "english":
		return "en"
	case "russian":
		return "ru"
	case "german":
		return "de"
	case "french":
		return "fr"
	case "spanish", "castilian":
		return "es"
	case "italian":
		return "it"
	case "portuguese":
		return "pt"
	case "ukrainian":
		return "uk"
	case "chinese", "mandarin":
		return "zh"
	case "japanese":
		return "ja"
	case "dutch", "flemish":
		return "nl"
	case "polish":
		return "pl"
	case "turkish":
		return "tr"
	case "arabic":
		return "ar"
	case "korean":
		return "ko"
	case "hindi":
		return "hi"
	case "czech":
		return "cs"
	case "swedish":
		return "sv"
	case "belarusian":
		return "be"
	case "kazakh":
		return "kk"
	}
	return ""
}
