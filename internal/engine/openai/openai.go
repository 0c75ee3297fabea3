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
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
)

// Name is how jobs and configuration refer to this engine.
const Name = "openai"

const (
	userAgent = "transcriber"
	// A verbose_json answer for hours of audio stays far below this; the
	// limit only protects the worker from a misbehaving server.
	defaultMaxResponse = 64 << 20
)

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
}

// DefaultMaxUpload is OpenAI's documented limit of 25 MB per file.
const DefaultMaxUpload = 25_000_000

// Engine sends one file per Submit to the transcription endpoint.
type Engine struct {
	endpoint    string
	apiKey      string
	model       string
	prompt      string
	limits      engine.Limits
	client      *http.Client
	maxResponse int64
}

// New checks the configuration. A nil client gets one without an overall
// timeout, because a long recording can take minutes and the caller's
// context already bounds each request.
func New(cfg Config, client *http.Client) (*Engine, error) {
	u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	// The parse error would repeat the URL, which may carry credentials.
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("openai engine: base URL must be an absolute http or https URL such as https://api.openai.com/v1")
	}
	var c http.Client
	if client != nil {
		c = *client
	}
	// Following a redirect would be a second request, and for 307/308 it
	// cannot resend the streamed body anyway; surfacing the 3xx tells the
	// operator to fix the base URL instead.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if cfg.MaxUploadBytes < 0 || cfg.MaxDuration < 0 {
		return nil, errors.New("openai engine: upload limits must not be negative")
	}
	limits := engine.Limits{MaxBytes: cfg.MaxUploadBytes, MaxDuration: cfg.MaxDuration}
	if limits.MaxBytes == 0 {
		limits.MaxBytes = DefaultMaxUpload
	}
	return &Engine{
		endpoint:    u.JoinPath("audio", "transcriptions").String(),
		apiKey:      cfg.APIKey,
		model:       cfg.Model,
		prompt:      cfg.Prompt,
		limits:      limits,
		client:      &c,
		maxResponse: defaultMaxResponse,
	}, nil
}

// Name implements the activities' Recognizer.
func (e *Engine) Name() string { return Name }

// Format is FLAC: every OpenAI-compatible server reads it, and it is half
// the upload of WAV.
func (e *Engine) Format() audio.Format { return audio.FLAC16kMono }

// Submit uploads the file and waits for the transcript; the API has no
// asynchronous operations.
func (e *Engine) Submit(ctx context.Context, req engine.Request) (engine.Submission, error) {
	f, err := os.Open(req.AudioPath)
	if err != nil {
		return engine.Submission{}, fmt.Errorf("openai: open audio: %w", err)
	}
	defer f.Close()

	up := startUpload(f, e.formFields(req), partFileName(req.AudioPath), partContentType(req.AudioPath))
	// Runs before f.Close: the writer goroutine must be gone before the
	// file it reads is closed.
	defer up.stop()

	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, up.body)
	if err != nil {
		return engine.Submission{}, fmt.Errorf("openai: build request: %w", err)
	}
	httpReq.Header.Set("Content-Type", up.contentType)
	httpReq.Header.Set("Accept", "application/json")
	httpReq.Header.Set("User-Agent", userAgent)
	if e.apiKey != "" {
		httpReq.Header.Set("Authorization", "Bearer "+e.apiKey)
	}

	resp, err := e.client.Do(httpReq)
	if err != nil {
		return engine.Submission{}, e.requestError(ctx, err, up)
	}
	defer resp.Body.Close()

	body, tooLarge, readErr := engine.ReadLimited(resp.Body, e.maxResponse)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if readErr != nil && ctx.Err() != nil {
			return engine.Submission{}, fmt.Errorf("openai: read response: %w", ctx.Err())
		}
		// A partial error body still carries the status, which is what
		// decides the classification.
		return engine.Submission{}, e.statusError(resp, body, time.Now())
	}
	switch {
	case readErr != nil && ctx.Err() != nil:
		return engine.Submission{}, fmt.Errorf("openai: read response: %w", ctx.Err())
	case readErr != nil:
		return engine.Submission{}, &engine.Error{Kind: engine.Unreachable, Status: resp.StatusCode,
			Message: "the connection to the transcription server broke before its answer was complete", Err: readErr}
	case tooLarge:
		return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Status: resp.StatusCode,
			Message: fmt.Sprintf("malformed response: larger than %d bytes", e.maxResponse)}
	}
	res, perr := parseResult(body, resp.Header.Get("Content-Type"))
	if perr != nil {
		perr.Status = resp.StatusCode
		return engine.Submission{}, perr
	}
	if res.Language == "" {
		// The server was told the language and did not contradict it.
		res.Language = engine.PrimaryLanguage(req.Language)
	}
	return engine.Submission{Result: &res}, nil
}

// Limits are the server's size limit and the configured longest audio.
func (e *Engine) Limits() engine.Limits { return e.limits }

// Check is never called: Submit does not return operations.
func (e *Engine) Check(context.Context, string) (engine.Submission, error) {
	return engine.Submission{}, engine.Errorf(engine.Rejected, "the openai engine has no pending operations")
}

type formField struct{ name, value string }

func (e *Engine) formFields(req engine.Request) []formField {
	var fields []formField
	if e.model != "" {
		fields = append(fields, formField{"model", e.model})
	}
	if lang := engine.PrimaryLanguage(req.Language); lang != "" {
		fields = append(fields, formField{"language", lang})
	}
	prompt := req.Prompt
	if prompt == "" {
		prompt = e.prompt
	}
	if prompt != "" {
		fields = append(fields, formField{"prompt", prompt})
	}
	return append(fields, formField{"response_format", "verbose_json"})
}

// requestError classifies a failure to get any answer. Cancellation stays a
// plain context error so that the caller can tell it from engine faults.
func (e *Engine) requestError(ctx context.Context, err error, up *upload) error {
	if ctx.Err() != nil {
		return fmt.Errorf("openai: send request: %w", ctx.Err())
	}
	// A failing local disk aborts the upload too, but says nothing about
	// the server.
	if readErr := up.stop(); readErr != nil {
		return fmt.Errorf("openai: read audio: %w", readErr)
	}
	return &engine.Error{Kind: engine.Unreachable, Message: "could not reach the transcription server", Err: err}
}

// upload streams the multipart form through a pipe, so memory use does not
// depend on the size of the recording.
type upload struct {
	body        *io.PipeReader
	contentType string
	src         *trackingReader
	done        chan struct{}
}

func startUpload(f io.Reader, fields []formField, fileName, fileType string) *upload {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	up := &upload{body: pr, contentType: mw.FormDataContentType(), src: &trackingReader{r: f}, done: make(chan struct{})}
	go func() {
		defer close(up.done)
		pw.CloseWithError(writeForm(mw, fields, up.src, fileName, fileType))
	}()
	return up
}

// stop ends the upload if the transport has not consumed it, waits for the
// writer and reports a failure to read the local file.
func (u *upload) stop() error {
	u.body.Close()
	<-u.done
	return u.src.err
}

func writeForm(mw *multipart.Writer, fields []formField, src io.Reader, fileName, fileType string) error {
	// Options come before the file so that a server parsing the stream
	// knows them before the audio arrives.
	for _, f := range fields {
		if err := mw.WriteField(f.name, f.value); err != nil {
			return err
		}
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, fileName))
	h.Set("Content-Type", fileType)
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, src); err != nil {
		return err
	}
	return mw.Close()
}

// trackingReader remembers a read error of the source, which the pipe would
// otherwise present to the caller as a network failure.
type trackingReader struct {
	r   io.Reader
	err error
}

func (t *trackingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
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
	case ".mp3":
		return "audio/mpeg"
	}
	return "application/octet-stream"
}

// statusError classifies an answer other than 2xx.
func (e *Engine) statusError(resp *http.Response, body []byte, now time.Time) *engine.Error {
	code := resp.StatusCode
	if code >= 300 && code <= 399 {
		return &engine.Error{Kind: engine.Rejected, Status: code, Message: engine.RedirectMessage("the transcription server", resp)}
	}
	detail := engine.ErrorDetail(body, code, e.apiKey)
	kind := engine.ClassifyHTTP(code)
	err := &engine.Error{Kind: kind, Status: code}
	switch kind {
	case engine.Unauthorized:
		err.Message = "the transcription server refused the credentials: " + detail
	case engine.Rejected:
		err.Message = "the transcription server rejected the request: " + detail
	default:
		err.Message = "the transcription server cannot serve now: " + detail
		err.RetryAfter = retryAfter(resp.Header, now)
	}
	return err
}

// retryAfter prefers OpenAI's millisecond hint, which is finer than the
// standard header it accompanies.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err == nil && ms > 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return engine.ParseRetryAfter(h.Get("Retry-After"), now)
}

// transcription is the verbose_json answer; servers that ignore the format
// send only text, which is enough.
type transcription struct {
	Text     *string `json:"text"`
	Language string  `json:"language"`
	Segments []struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Text  string  `json:"text"`
	} `json:"segments"`
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
			Start: seconds(s.Start),
			End:   seconds(s.End),
			Text:  strings.TrimSpace(s.Text),
		})
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
