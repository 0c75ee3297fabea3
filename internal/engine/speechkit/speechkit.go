// Package speechkit recognises speech with Yandex SpeechKit's asynchronous
// recognition, API v3 over REST. Submit posts the audio inside the request
// (POST {stt}/stt/v3/recognizeFileAsync) and answers the operation's id;
// Check asks the operation service (GET {operation}/operations/{id}) and,
// once the operation is done, fetches its results
// (GET {stt}/stt/v3/getRecognition?operationId={id}).
//
// Why API v3 with the audio in the body: API v2 (longRunningRecognize) only
// reads audio from a Yandex Object Storage bucket, which would bring a
// second service with its own credentials and roles, and uploads to clean
// up. API v3 takes up to 60 MB in the request itself, which at the 24
// kbit/s Ogg Opus this engine asks for holds more than the 4 hours one
// asynchronous recognition may last.
//
// Limits, from SpeechKit's quotas and limits page: at most 4 hours of audio
// and, in the body of a v3 request, at most 60 MB. The body carries the
// file in base64, a third larger than the file, so one request takes files
// up to 44 MB (58.7 MB once encoded); the pipeline splits anything longer
// or larger into chunks (see Limits). Results stay on the server for 3
// days.
//
// Every call makes each request it needs once (a Check that finds the
// operation done makes two: the status, then the results); the pipeline
// decides about retries from the classified error.
package speechkit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
)

// Name is how jobs and configuration refer to this engine.
const Name = "speechkit"

const (
	// DefaultBaseURL is the root of SpeechKit's recognition API.
	DefaultBaseURL = "https://stt.api.cloud.yandex.net"
	// DefaultOperationsURL is the root of Yandex Cloud's operation service,
	// which reports whether a recognition is done.
	DefaultOperationsURL = "https://operation.api.cloud.yandex.net"
	// DefaultModel is SpeechKit's main recognition model. "deferred-general"
	// is cheaper but may take up to 24 hours: raise the poll interval with it.
	DefaultModel = "general"

	// DefaultPollInterval keeps status checks inside SpeechKit's quota. The
	// quota page allows 2,500 operation status checks per hour for a folder
	// (API v3's own figure is 5 per second, 18,000 per hour, so the hourly
	// one is the binding figure). One operation checked every 15 s makes 240
	// checks an hour, so ten recordings or chunks can be in recognition at
	// once and stay under it (2,400), with room left for their ten result
	// fetches; beyond ten, the shared budget (budget.go) stretches the
	// interval. The wait before the first check (FirstCheck) lowers the
	// count further.
	DefaultPollInterval = 15 * time.Second

	// MaxAudioBytes is the largest file one request carries: SpeechKit takes
	// at most 60 MB in the body of a v3 request, and base64 makes 44 MB of
	// audio 58.67 MB, which leaves room for the JSON around it whether the
	// limit counts decimal or binary megabytes.
	MaxAudioBytes = 44_000_000
	// MaxAudioDuration is the longest audio one asynchronous recognition takes.
	MaxAudioDuration = 4 * time.Hour

	// SpeechKit's documentation says asynchronous recognition takes about 10
	// seconds per minute of single-channel audio: a sixth of its length.
	// Checking earlier only spends quota.
	processingPerMinute = 10 * time.Second
	// Even a second of audio is queued and its results written, so a very
	// short recording is first checked after a few seconds.
	minFirstCheck = 3 * time.Second

	// Yandex Cloud folder ids are 20 characters; its APIs accept up to 50.
	maxFolderID = 50
)

// languages maps primary language subtags to the codes SpeechKit's list of
// supported recognition languages uses (kk-KK is spelled that way there).
var languages = map[string]string{
	"de": "de-DE", "en": "en-US", "es": "es-ES", "fi": "fi-FI", "fr": "fr-FR",
	"it": "it-IT", "kk": "kk-KK", "nl": "nl-NL", "pl": "pl-PL", "pt": "pt-PT",
	"ru": "ru-RU", "sv": "sv-SE", "tr": "tr-TR",
}

// regional are documented codes other than a language's default.
var regional = map[string]bool{"pt-BR": true}

// Config locates the service and holds the credentials.
type Config struct {
	// BaseURL is the recognition API root, DefaultBaseURL when empty; a
	// trailing slash is tolerated.
	BaseURL string
	// OperationsURL is the operation service root, DefaultOperationsURL when
	// empty.
	OperationsURL string
	// APIKey of a service account, sent as "Api-Key <key>". Exactly one of
	// APIKey and IAMToken is required.
	APIKey string
	// IAMToken is sent as "Bearer <token>". IAM tokens expire within a day
	// and this engine does not renew them, so an API key suits a
	// long-running worker better.
	IAMToken string
	// FolderID is sent as x-folder-id on every request. A user account's
	// IAM token needs it; a service account's credentials imply their home
	// folder, and naming another one is refused.
	FolderID string
	// Model is the recognition model, DefaultModel when empty.
	Model string
	// PollInterval is the wait the caller should leave between checks;
	// DefaultPollInterval when zero or negative.
	PollInterval time.Duration
}

// Engine submits recordings to SpeechKit and collects their results.
type Engine struct {
	recognizeURL  string
	resultsURL    string
	operationsURL string
	secret        string
	model         string
	pollInterval  time.Duration
	http          *engine.Client
	maxBytes      int64
	checks        *budget
	now           func() time.Time
}

// New checks the configuration. A nil client gets one without an overall
// timeout, because sending a long recording can take minutes and the
// caller's context already bounds each call.
func New(cfg Config, client *http.Client) (*Engine, error) {
	base, err := rootURL(cfg.BaseURL, DefaultBaseURL)
	if err != nil {
		return nil, errors.New("speechkit engine: base URL must be an absolute http or https URL such as " + DefaultBaseURL)
	}
	ops, err := rootURL(cfg.OperationsURL, DefaultOperationsURL)
	if err != nil {
		return nil, errors.New("speechkit engine: operations URL must be an absolute http or https URL such as " + DefaultOperationsURL)
	}
	key, token := strings.TrimSpace(cfg.APIKey), strings.TrimSpace(cfg.IAMToken)
	var auth, secret string
	switch {
	case key != "" && token != "":
		return nil, errors.New("speechkit engine: set either an API key or an IAM token, not both")
	case key != "":
		auth, secret = "Api-Key "+key, key
	case token != "":
		auth, secret = "Bearer "+token, token
	default:
		return nil, errors.New("speechkit engine: an API key or an IAM token is required")
	}
	if hasSpaceOrControl(secret) {
		return nil, errors.New("speechkit engine: the API key or IAM token contains spaces or control characters")
	}
	folder := strings.TrimSpace(cfg.FolderID)
	if hasSpaceOrControl(folder) || len(folder) > maxFolderID {
		return nil, fmt.Errorf("speechkit engine: the folder id must be at most %d characters without spaces", maxFolderID)
	}
	model := strings.TrimSpace(cfg.Model)
	if model == "" {
		model = DefaultModel
	}
	if hasSpaceOrControl(model) || len(model) > 100 {
		return nil, errors.New("speechkit engine: the model must be a name such as " + DefaultModel + " or deferred-general")
	}
	poll := cfg.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	c := engine.NewClient(client, "SpeechKit", "speechkit")
	c.Secret = secret
	c.Header.Set("Authorization", auth)
	if folder != "" {
		c.Header.Set("x-folder-id", folder)
	}
	c.Adjust = adjust
	return &Engine{
		recognizeURL:  base.JoinPath("stt", "v3", "recognizeFileAsync").String(),
		resultsURL:    base.JoinPath("stt", "v3", "getRecognition").String(),
		operationsURL: ops.JoinPath("operations").String(),
		secret:        secret,
		model:         model,
		pollInterval:  poll,
		http:          c,
		maxBytes:      MaxAudioBytes,
		checks:        sharedBudget(ops.String() + "\x00" + folder + "\x00" + secret),
		now:           time.Now,
	}, nil
}

func rootURL(raw, def string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = def
	}
	u, ok := engine.ParseHTTPURL(raw)
	if !ok {
		return nil, errors.New("not an absolute http or https URL")
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

func hasSpaceOrControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0
}

// Name implements the activities' Recognizer.
func (e *Engine) Name() string { return Name }

// Format is Ogg Opus: SpeechKit reads it natively (OGG_OPUS), and at an
// tenth of the size of WAV it puts four hours of audio in one request.
func (e *Engine) Format() audio.Format { return audio.OggOpus16kMono }

// TakesAsIs accepts Ogg/Opus, the one container the request declares
// (OGG_OPUS): a Telegram voice note goes as it was recorded.
func (e *Engine) TakesAsIs(info audio.Info) bool {
	t, ok := audio.TypeOf(info)
	return ok && t == audio.Ogg && info.Codec == "opus"
}

// PollInterval is the wait the caller leaves between checks of an
// operation: the configured interval, stretched so that all the operations
// this process has running in the folder share its quota of checks.
func (e *Engine) PollInterval() time.Duration { return e.checks.interval(e.now(), e.pollInterval) }

// FirstCheck is the wait before the first check of a recording of the
// given length: the time SpeechKit says recognition takes, at least a few
// seconds.
// A pause that a 429 asked for holds the first check back too.
func (e *Engine) FirstCheck(d time.Duration) time.Duration {
	return max(firstCheck(d), e.checks.paused(e.now()))
}

func firstCheck(d time.Duration) time.Duration {
	if d <= 0 {
		return minFirstCheck
	}
	if d > MaxAudioDuration {
		d = MaxAudioDuration
	}
	return max(time.Duration(float64(d)*float64(processingPerMinute)/float64(time.Minute)), minFirstCheck)
}

// Limits are the largest audio one request may carry.
func (e *Engine) Limits() engine.Limits {
	return engine.Limits{MaxBytes: e.maxBytes, MaxDuration: MaxAudioDuration}
}

// Submit starts the recognition of one file and answers its operation id.
func (e *Engine) Submit(ctx context.Context, req engine.Request) (engine.Submission, error) {
	lang, err := languageCode(req.Language)
	if err != nil {
		return engine.Submission{}, err
	}
	options, err := json.Marshal(e.options(lang))
	if err != nil {
		return engine.Submission{}, fmt.Errorf("speechkit: encode recognition request: %w", err)
	}
	prefix := `{"recognitionModel":` + string(options) + `,"content":"`
	const suffix = `"}`
	up, err := engine.OpenUpload(req.AudioPath, []byte(prefix), []byte(suffix), engine.Base64)
	if err != nil {
		return engine.Submission{}, fmt.Errorf("speechkit: %w", err)
	}
	defer func() { _ = up.Close() }() // Do reports a failure to read the audio
	// Both would be refused after the upload; saying so first spends neither
	// bandwidth nor the hourly quota of recognition requests.
	switch size := up.Size(); {
	case size == 0:
		return engine.Submission{}, engine.Errorf(engine.Rejected, "the audio file is empty")
	case size > e.maxBytes:
		return engine.Submission{}, engine.Errorf(engine.Rejected,
			"the audio is %d bytes; SpeechKit takes at most %d in one request, so it must be split first", size, e.maxBytes)
	}
	httpReq, err := e.http.UploadRequest(ctx, http.MethodPost, e.recognizeURL, up)
	if err != nil {
		return engine.Submission{}, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	resp, body, err := e.http.Do(ctx, httpReq, stepRecognize.String(), up)
	if err != nil {
		return engine.Submission{}, err
	}
	op, perr := parseOperation(body)
	if perr == nil && op.ID == "" {
		perr = engine.Errorf(engine.Unavailable, "malformed response to the recognition request: no operation id")
	}
	if perr == nil && !engine.SafeOperationID(op.ID) {
		perr = engine.Errorf(engine.Unavailable, "malformed response to the recognition request: unusable operation id")
	}
	if perr != nil {
		perr.Status = resp.StatusCode
		return engine.Submission{}, perr
	}
	if op.Error != nil {
		return engine.Submission{}, e.operationError(op.Error, body, resp.Header.Get("Content-Type"))
	}
	// Even an operation that is already done is answered as running: its
	// results come from another request, which Check makes.
	// Counted from now: the caller asks PollInterval next, and the share
	// it gets must include this operation. The first check's own wait is
	// FirstCheck's, so the submission names no wait of its own.
	e.checks.running(op.ID, e.now(), e.pollInterval, e.FirstCheck(req.Duration))
	return engine.Submission{OperationID: op.ID}, nil
}

func (e *Engine) options(lang string) recognitionModel {
	return recognitionModel{
		Model:       e.model,
		AudioFormat: audioFormat{ContainerAudio: containerAudio{ContainerAudioType: "OGG_OPUS"}},
		// Normalisation writes numbers as digits; literature style adds
		// punctuation and capitals, which a transcript read by people needs.
		TextNormalization: textNormalization{
			TextNormalization: "TEXT_NORMALIZATION_ENABLED",
			LiteratureText:    true,
		},
		LanguageRestriction: languageRestriction{RestrictionType: "WHITELIST", LanguageCode: []string{lang}},
	}
}

// Check asks whether the operation is done and, when it is, fetches the
// results.
func (e *Engine) Check(ctx context.Context, operationID string) (engine.Submission, error) {
	if !engine.SafeOperationID(operationID) {
		return engine.Submission{}, engine.Errorf(engine.Rejected, "not a SpeechKit operation id")
	}
	httpReq, err := e.http.NewRequest(ctx, http.MethodGet, e.operationsURL+"/"+operationID, nil)
	if err != nil {
		return engine.Submission{}, err
	}
	resp, body, err := e.http.Do(ctx, httpReq, stepOperation.String(), nil)
	if err != nil {
		return e.checkFailed(operationID, err)
	}
	op, perr := parseOperation(body)
	if perr == nil && op.ID != operationID {
		perr = engine.Errorf(engine.Unavailable, "malformed response to the operation check: it describes another operation")
	}
	if perr != nil {
		perr.Status = resp.StatusCode
		return engine.Submission{}, perr
	}
	// The operation service may report a failure before done is set.
	if op.Error != nil {
		e.checks.finished(operationID)
		return engine.Submission{}, e.operationError(op.Error, body, resp.Header.Get("Content-Type"))
	}
	if !op.Done {
		wait := e.checks.running(operationID, e.now(), e.pollInterval, 0)
		return engine.Submission{OperationID: operationID, CheckAfter: wait}, nil
	}
	res, err := e.results(ctx, operationID)
	if err != nil {
		return e.checkFailed(operationID, err)
	}
	e.checks.finished(operationID)
	return engine.Submission{Result: res}, nil
}

// checkFailed reads a failed check. A 429 is the quota speaking, not the
// operation: the answer is "still running, check again after the wait it
// asked for", which spends no attempt of the check step, and every other
// check of the folder waits as long. An operation the service does not
// know stops counting against the quota.
func (e *Engine) checkFailed(operationID string, err error) (engine.Submission, error) {
	ee, ok := engine.AsError(err)
	switch {
	case ok && ee.Status == http.StatusTooManyRequests:
		now := e.now()
		e.checks.pause(now, max(ee.RetryAfter, e.pollInterval))
		wait := e.checks.running(operationID, now, e.pollInterval, ee.RetryAfter)
		return engine.Submission{OperationID: operationID, CheckAfter: wait}, nil
	case ok && ee.Status == http.StatusNotFound:
		e.checks.finished(operationID)
	}
	return engine.Submission{}, err
}

// results fetches the stream of recognition messages of a done operation.
func (e *Engine) results(ctx context.Context, operationID string) (*engine.Result, error) {
	httpReq, err := e.http.NewRequest(ctx, http.MethodGet, e.resultsURL+"?"+url.Values{"operationId": {operationID}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, body, err := e.http.Do(ctx, httpReq, stepResults.String(), nil)
	if err != nil {
		return nil, err
	}
	rawType := resp.Header.Get("Content-Type")
	if rawType == "" {
		rawType = "application/json"
	}
	res, perr := parseResults(body, e.secret)
	if perr != nil {
		if perr.Status == 0 {
			perr.Status = resp.StatusCode
		}
		return nil, perr.KeepRaw(body, rawType)
	}
	res.Raw, res.RawType = body, rawType
	return res, nil
}

// operationError turns the error of a finished operation into the caller's
// verdict: SpeechKit accepted the audio and then could not recognise it.
// raw is the operation as the service described it, kept as the failure's
// raw answer.
func (e *Engine) operationError(st *rpcStatus, raw []byte, rawType string) error {
	msg := "SpeechKit could not recognise the recording"
	name := engine.GRPCCodeName(st.Code)
	if name != "" {
		msg += " (" + name + ")"
	}
	if detail := engine.Scrub(st.Message, e.secret, engine.MaxMessageRunes); detail != "" {
		msg += ": " + detail
	}
	return (&engine.Error{Kind: engine.OperationFailed, Message: msg, Code: name}).KeepRaw(raw, cmp.Or(rawType, "application/json"))
}

// languageCode maps the request's language onto the code SpeechKit takes:
// "auto" when none is given, the documented code of a known language, or a
// full tag as given for a language the list above does not know yet.
func languageCode(tag string) (string, error) {
	tag = strings.ReplaceAll(strings.TrimSpace(tag), "_", "-")
	if tag == "" || strings.EqualFold(tag, "auto") {
		return "auto", nil
	}
	primary := engine.PrimaryLanguage(tag)
	full := primary
	if _, region, ok := strings.Cut(tag, "-"); ok {
		full += "-" + strings.ToUpper(region)
	}
	if regional[full] {
		return full, nil
	}
	if code, ok := languages[primary]; ok {
		return code, nil
	}
	if full != primary && engine.IsLanguageCode(primary) {
		return full, nil
	}
	return "", engine.Errorf(engine.Rejected,
		"SpeechKit does not recognise the language %q; leave the language empty to let it detect one", engine.Scrub(tag, "", 20))
}

// step names a request in messages.
type step int

const (
	stepRecognize step = iota
	stepOperation
	stepResults
)

func (s step) String() string {
	switch s {
	case stepRecognize:
		return "recognition request"
	case stepOperation:
		return "operation check"
	}
	return "results request"
}

// adjust says what a 404 means for a check or a results request, and
// reads the wait a gateway error may give in its details when there is no
// Retry-After. SpeechKit's REST gateway answers errors as a
// google.rpc.Status: {"code", "message", "details"}.
func adjust(err *engine.Error, _ *http.Response, body []byte, what, detail string) {
	switch {
	case what == stepOperation.String() && err.Status == http.StatusNotFound:
		// The operation never existed or is gone: checking again cannot
		// bring it back.
		err.Message = "SpeechKit has no such operation: " + detail
	case what == stepResults.String() && err.Status == http.StatusNotFound:
		err.Message = "SpeechKit has no results for the operation (it keeps them for 3 days): " + detail
	case !err.Kind.Verdict() && err.RetryAfter == 0:
		err.RetryAfter = retryDelay(body)
	}
}

// retryDelay reads the google.rpc.RetryInfo a gateway error may carry in
// its details, e.g. {"@type": ".../google.rpc.RetryInfo", "retryDelay": "30s"}.
func retryDelay(body []byte) time.Duration {
	var st struct {
		Details []struct {
			Type       string `json:"@type"`
			RetryDelay string `json:"retryDelay"`
		} `json:"details"`
	}
	if json.Unmarshal(body, &st) != nil {
		return 0
	}
	for _, d := range st.Details {
		if !strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			continue
		}
		if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
			return v
		}
	}
	return 0
}

// recognitionModel is RecognizeFileRequest.recognitionModel; the audio goes
// beside it as "content".
type recognitionModel struct {
	Model               string              `json:"model"`
	AudioFormat         audioFormat         `json:"audioFormat"`
	TextNormalization   textNormalization   `json:"textNormalization"`
	LanguageRestriction languageRestriction `json:"languageRestriction"`
}

type audioFormat struct {
	ContainerAudio containerAudio `json:"containerAudio"`
}

type containerAudio struct {
	ContainerAudioType string `json:"containerAudioType"`
}

type textNormalization struct {
	TextNormalization string `json:"textNormalization"`
	ProfanityFilter   bool   `json:"profanityFilter"`
	LiteratureText    bool   `json:"literatureText"`
}

type languageRestriction struct {
	RestrictionType string   `json:"restrictionType"`
	LanguageCode    []string `json:"languageCode"`
}

// operation is the part of a yandex.cloud.operation.Operation the engine
// reads. Proto3 JSON leaves out "done" while it is false.
type operation struct {
	ID    string     `json:"id"`
	Done  bool       `json:"done"`
	Error *rpcStatus `json:"error"`
}

// rpcStatus is a google.rpc.Status.
type rpcStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func parseOperation(body []byte) (operation, *engine.Error) {
	var op operation
	if !isObject(body) {
		return operation{}, engine.Errorf(engine.Unavailable, "malformed response: not an operation object")
	}
	if err := json.Unmarshal(body, &op); err != nil {
		return operation{}, &engine.Error{Kind: engine.Unavailable, Message: "malformed response: not a valid operation object", Err: err}
	}
	return op, nil
}

// isObject keeps "null" and other JSON values from passing as an empty
// operation, which would read as "still running" forever.
func isObject(body []byte) bool {
	t := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n")
	return strings.HasPrefix(t, "{")
}
