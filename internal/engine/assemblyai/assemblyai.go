// Package assemblyai recognises speech with AssemblyAI's asynchronous API:
// Submit uploads the file and creates a transcript, Check polls it. Every
// call makes at most the requests it needs once; the pipeline decides about
// retries from the classified error.
package assemblyai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
)

// Name is how jobs and configuration refer to this engine.
const Name = "assemblyai"

const (
	// DefaultBaseURL is AssemblyAI's API root.
	DefaultBaseURL = "https://api.assemblyai.com"
	// DefaultPollInterval is the wait between checks when none is configured.
	DefaultPollInterval = 5 * time.Second
)

// How words are grouped into segments.
const (
	maxPause      = time.Second
	maxSegmentLen = 15 * time.Second
)

// Config locates the service and holds the credentials.
type Config struct {
	// BaseURL is the API root, "https://api.assemblyai.com" when empty; a
	// trailing slash is tolerated.
	BaseURL string
	// APIKey is sent as the authorization header, without "Bearer". Required.
	APIKey string
	// PollInterval is the wait the caller should leave between checks;
	// DefaultPollInterval when zero or negative.
	PollInterval time.Duration
	// WebhookURL, when set, is this service's callback endpoint as
	// AssemblyAI can reach it; AssemblyAI then calls it the moment a
	// transcript finishes, and the job checks at once instead of at its next
	// poll. WebhookSecret signs each job's callback token and is required
	// with it.
	WebhookURL    string
	WebhookSecret string
}

// Engine uploads a file, creates a transcript of it and polls the transcript.
type Engine struct {
	uploadURL     string
	transcriptURL string
	apiKey        string
	pollInterval  time.Duration
	webhookURL    *url.URL
	webhookSecret string
	http          *engine.Client
}

// New checks the configuration. A nil client gets one without an overall
// timeout, because uploading a long recording can take minutes and the
// caller's context already bounds each call.
func New(cfg Config, client *http.Client) (*Engine, error) {
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, ok := engine.ParseHTTPURL(base)
	if !ok {
		return nil, errors.New("assemblyai engine: base URL must be an absolute http or https URL such as " + DefaultBaseURL)
	}
	key := strings.TrimSpace(cfg.APIKey)
	if key == "" {
		return nil, errors.New("assemblyai engine: an API key is required")
	}
	if strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return nil, errors.New("assemblyai engine: the API key contains spaces or control characters")
	}
	poll := cfg.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	c := engine.NewClient(client, "AssemblyAI", "assemblyai")
	c.Secret = key
	c.Header.Set("Authorization", key)
	c.Adjust = adjust
	var hook *url.URL
	if cfg.WebhookURL != "" {
		hook, ok = engine.ParseHTTPURL(cfg.WebhookURL)
		if !ok || hook.User != nil {
			return nil, errors.New("assemblyai engine: webhook URL must be an absolute http or https URL without credentials")
		}
		if cfg.WebhookSecret == "" {
			return nil, errors.New("assemblyai engine: a webhook URL needs a webhook secret")
		}
	}
	return &Engine{
		uploadURL:     u.JoinPath("v2", "upload").String(),
		transcriptURL: u.JoinPath("v2", "transcript").String(),
		apiKey:        key,
		pollInterval:  poll,
		webhookURL:    hook,
		webhookSecret: cfg.WebhookSecret,
		http:          c,
	}, nil
}

// Name implements the activities' Recognizer.
func (e *Engine) Name() string { return Name }

// Format is FLAC: AssemblyAI reads it, and it is half the upload of WAV.
func (e *Engine) Format() audio.Format { return audio.FLAC16kMono }

// TakesAsIs accepts the common files AssemblyAI lists among its supported
// formats (flac, mp3, m4a, ogg, wav, webm). The upload is raw bytes that
// AssemblyAI identifies itself, so the file needs no name or media type.
func (e *Engine) TakesAsIs(info audio.Info) bool {
	_, ok := audio.TypeOf(info)
	return ok
}

// PollInterval is the wait the caller leaves between checks of an operation.
func (e *Engine) PollInterval() time.Duration { return e.pollInterval }

// Submit uploads the file and creates a transcript of it. The transcript is
// usually still queued, so the answer is its id for Check.
func (e *Engine) Submit(ctx context.Context, req engine.Request) (engine.Submission, error) {
	audioURL, err := e.upload(ctx, req.AudioPath)
	if err != nil {
		return engine.Submission{}, err
	}

	create := createRequest{AudioURL: audioURL, Punctuate: true, FormatText: true}
	if lang := engine.PrimaryLanguage(req.Language); lang != "" {
		create.LanguageCode = lang
	} else {
		create.LanguageDetection = true
	}
	if req.Speakers {
		create.SpeakerLabels, create.SpeakersExpected = true, req.SpeakersExpected
	}
	if e.webhookURL != nil && req.JobID != "" {
		hook := *e.webhookURL
		q := hook.Query()
		q.Set("job", req.JobID)
		hook.RawQuery = q.Encode()
		create.WebhookURL = hook.String()
		create.WebhookAuthHeaderName = engine.CallbackHeader
		create.WebhookAuthHeaderValue = engine.CallbackToken(e.webhookSecret, req.JobID)
	}
	payload, err := json.Marshal(create)
	if err != nil {
		return engine.Submission{}, fmt.Errorf("assemblyai: encode transcript request: %w", err)
	}
	httpReq, err := e.http.NewRequest(ctx, http.MethodPost, e.transcriptURL, bytes.NewReader(payload))
	if err != nil {
		return engine.Submission{}, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	resp, body, err := e.http.Do(ctx, httpReq, stepCreate.String(), nil)
	if err != nil {
		return engine.Submission{}, err
	}
	t, perr := parseTranscript(body)
	if perr == nil && t.ID == "" {
		perr = engine.Errorf(engine.Unavailable, "malformed response: no transcript id")
	}
	if perr == nil && !engine.SafeOperationID(t.ID) {
		perr = engine.Errorf(engine.Unavailable, "malformed response: unusable transcript id")
	}
	if perr != nil {
		perr.Status = resp.StatusCode
		return engine.Submission{}, perr
	}
	sub, err := e.submission(t, t.ID, resp, body)
	if sub.Result != nil && sub.Result.Language == "" && engine.IsLanguageCode(create.LanguageCode) {
		// The service was told the language and did not contradict it.
		sub.Result.Language = create.LanguageCode
	}
	return sub, err
}

// Check asks for the transcript: still running, finished or failed.
func (e *Engine) Check(ctx context.Context, operationID string) (engine.Submission, error) {
	if !engine.SafeOperationID(operationID) {
		return engine.Submission{}, engine.Errorf(engine.Rejected, "not an AssemblyAI transcript id")
	}
	httpReq, err := e.http.NewRequest(ctx, http.MethodGet, e.transcriptURL+"/"+operationID, nil)
	if err != nil {
		return engine.Submission{}, err
	}
	resp, body, err := e.http.Do(ctx, httpReq, stepCheck.String(), nil)
	if err != nil {
		return engine.Submission{}, err
	}
	t, perr := parseTranscript(body)
	if perr != nil {
		perr.Status = resp.StatusCode
		return engine.Submission{}, perr
	}
	return e.submission(t, operationID, resp, body)
}

// maxCodeRunes bounds the error sentence that stands for a code.
const maxCodeRunes = 120

// submission turns a transcript's status into the caller's answer.
func (e *Engine) submission(t transcript, id string, resp *http.Response, body []byte) (engine.Submission, error) {
	switch t.Status {
	case "queued", "processing":
		return engine.Submission{OperationID: id}, nil
	case "completed":
		rawType := resp.Header.Get("Content-Type")
		if rawType == "" {
			rawType = "application/json"
		}
		res := t.result(body, rawType)
		return engine.Submission{Result: &res}, nil
	case "error":
		msg := "AssemblyAI could not transcribe the recording"
		// AssemblyAI names a failed transcript's error only in words, one
		// fixed sentence per cause, so the sentence is its code.
		var code string
		if t.Error != nil {
			if detail := engine.Scrub(*t.Error, e.apiKey, engine.MaxMessageRunes); detail != "" {
				msg += ": " + detail
				code = engine.Scrub(*t.Error, e.apiKey, maxCodeRunes)
			}
		}
		rawType := resp.Header.Get("Content-Type")
		if rawType == "" {
			rawType = "application/json"
		}
		return engine.Submission{}, (&engine.Error{Kind: engine.OperationFailed, Message: msg, Code: code}).KeepRaw(body, rawType)
	}
	return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Status: resp.StatusCode,
		Message: fmt.Sprintf("malformed response: unknown transcript status %q", engine.Scrub(t.Status, e.apiKey, 40))}
}

// upload streams the file to AssemblyAI and returns the URL it was given.
func (e *Engine) upload(ctx context.Context, path string) (string, error) {
	up, err := engine.OpenUpload(path, nil, nil, engine.Raw)
	if err != nil {
		return "", fmt.Errorf("assemblyai: %w", err)
	}
	defer func() { _ = up.Close() }() // Do reports a failure to read the audio
	httpReq, err := e.http.UploadRequest(ctx, http.MethodPost, e.uploadURL, up)
	if err != nil {
		return "", err
	}
	httpReq.Header.Set("Content-Type", "application/octet-stream")
	resp, body, err := e.http.Do(ctx, httpReq, stepUpload.String(), up)
	if err != nil {
		return "", err
	}
	var answer struct {
		UploadURL string `json:"upload_url"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "", &engine.Error{Kind: engine.Unavailable, Status: resp.StatusCode,
			Message: "malformed response to the upload: not valid JSON", Err: err}
	}
	u, ok := engine.ParseHTTPURL(strings.TrimSpace(answer.UploadURL))
	if !ok {
		return "", &engine.Error{Kind: engine.Unavailable, Status: resp.StatusCode,
			Message: "malformed response to the upload: no usable upload_url"}
	}
	return u.String(), nil
}

// step names a request in messages.
type step int

const (
	stepUpload step = iota
	stepCreate
	stepCheck
)

func (s step) String() string {
	switch s {
	case stepUpload:
		return "upload"
	case stepCreate:
		return "transcript request"
	}
	return "transcript check"
}

// adjust says what a 404 means for a check: the transcript was deleted
// or never existed, and polling again cannot bring it back.
func adjust(err *engine.Error, _ *http.Response, _ []byte, what, detail string) {
	if what == stepCheck.String() && err.Status == http.StatusNotFound {
		err.Message = "AssemblyAI has no such transcript: " + detail
	}
}

// createRequest is the body of POST /v2/transcript.
type createRequest struct {
	AudioURL          string `json:"audio_url"`
	Punctuate         bool   `json:"punctuate"`
	FormatText        bool   `json:"format_text"`
	LanguageCode      string `json:"language_code,omitempty"`
	LanguageDetection bool   `json:"language_detection,omitempty"`
	SpeakerLabels     bool   `json:"speaker_labels,omitempty"`
	SpeakersExpected  int    `json:"speakers_expected,omitempty"`
	// The webhook fields are AssemblyAI's documented callback settings.
	WebhookURL             string `json:"webhook_url,omitempty"`
	WebhookAuthHeaderName  string `json:"webhook_auth_header_name,omitempty"`
	WebhookAuthHeaderValue string `json:"webhook_auth_header_value,omitempty"`
}

// transcript is the part of AssemblyAI's transcript object the engine reads.
type transcript struct {
	ID           string  `json:"id"`
	Status       string  `json:"status"`
	Text         *string `json:"text"`
	LanguageCode *string `json:"language_code"`
	Words        []word  `json:"words"`
	// Utterances are the speakers' turns, given with speaker_labels.
	Utterances []utterance `json:"utterances"`
	Error      *string     `json:"error"`
}

// word has its times in milliseconds.
type word struct {
	Text       string  `json:"text"`
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	Confidence float64 `json:"confidence"`
	// Speaker is null unless speaker labels were asked for.
	Speaker *string `json:"speaker"`
}

type utterance struct {
	Speaker string  `json:"speaker"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Text    string  `json:"text"`
}

func (w word) speaker() string {
	if w.Speaker == nil {
		return ""
	}
	return *w.Speaker
}

func parseTranscript(body []byte) (transcript, *engine.Error) {
	var t transcript
	if err := json.Unmarshal(body, &t); err != nil {
		return transcript{}, &engine.Error{Kind: engine.Unavailable, Message: "malformed response: not a valid transcript object", Err: err}
	}
	if t.Status == "" {
		return transcript{}, engine.Errorf(engine.Unavailable, "malformed response: no transcript status")
	}
	return t, nil
}

// result builds the finished recognition. A null text is a transcript of
// silence; whether that is a failure is the caller's verdict.
func (t transcript) result(raw []byte, rawType string) engine.Result {
	res := engine.Result{Raw: raw, RawType: rawType, Segments: segments(t.Words)}
	if len(t.Utterances) > 0 {
		// The speakers' own turns are better segments than sentences
		// guessed from punctuation.
		res.Segments = nil
		for _, u := range t.Utterances {
			if text := strings.Join(strings.Fields(u.Text), " "); text != "" {
				res.Segments = append(res.Segments, engine.Segment{Start: millis(u.Start), End: max(millis(u.End), millis(u.Start)), Text: text, Speaker: u.Speaker})
			}
		}
	}
	for _, w := range t.Words {
		if text := strings.Join(strings.Fields(w.Text), " "); text != "" {
			res.Words = append(res.Words, engine.Word{Start: millis(w.Start), End: max(millis(w.End), millis(w.Start)), Text: text, Speaker: w.speaker()})
		}
	}
	if t.Text != nil {
		res.Text = strings.TrimSpace(*t.Text)
	}
	if t.LanguageCode != nil {
		if lang := engine.PrimaryLanguage(*t.LanguageCode); engine.IsLanguageCode(lang) {
			res.Language = lang
		}
	}
	return res
}

// segments groups words into sentences: a segment ends after a word that
// ends a sentence, before a pause longer than maxPause, and before a word
// that would stretch it beyond maxSegmentLen, and where the speaker
// changes.
func segments(words []word) []engine.Segment {
	var (
		segs       []engine.Segment
		texts      []string
		start, end time.Duration
		speaker    string
	)
	flush := func() {
		if len(texts) == 0 {
			return
		}
		segs = append(segs, engine.Segment{Start: start, End: end, Text: strings.Join(texts, " "), Speaker: speaker})
		texts = texts[:0]
	}
	for _, w := range words {
		text := strings.Join(strings.Fields(w.Text), " ")
		if text == "" {
			continue
		}
		ws, we := millis(w.Start), millis(w.End)
		if we < ws {
			we = ws
		}
		if len(texts) > 0 && (ws-end > maxPause || we-start > maxSegmentLen || w.speaker() != speaker) {
			flush()
		}
		if len(texts) == 0 {
			start, end, speaker = ws, we, w.speaker()
		}
		texts = append(texts, text)
		end = max(end, we)
		if endsSentence(text) {
			flush()
		}
	}
	flush()
	return segs
}

// endsSentence looks past closing quotes and brackets for . ! ? or ….
func endsSentence(text string) bool {
	text = strings.TrimRight(text, "\"'”’»)]")
	return strings.HasSuffix(text, ".") || strings.HasSuffix(text, "!") ||
		strings.HasSuffix(text, "?") || strings.HasSuffix(text, "…")
}

// maxMillis keeps the conversion to a Duration from overflowing.
const maxMillis = float64(math.MaxInt64 / int64(time.Millisecond))

func millis(ms float64) time.Duration {
	switch {
	case ms <= 0 || math.IsNaN(ms):
		return 0
	case ms >= maxMillis:
		return time.Duration(maxMillis) * time.Millisecond
	}
	return time.Duration(math.Round(ms)) * time.Millisecond
}
