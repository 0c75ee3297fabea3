package assemblyai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// Registration declares the engine to the service. Workers build it only
// with an API key; a role with the webhook secret receives its callbacks.
var Registration = engine.Register(engine.Spec[Config]{
	Name: Name,
	Settings: []engine.Setting[Config]{
		{Env: "ASSEMBLYAI_BASE_URL", Flag: "assemblyai-base-url", Default: DefaultBaseURL,
			Usage: "base URL of AssemblyAI (or a compatible stand-in)",
			Set:   engine.Text(func(c *Config) *string { return &c.BaseURL })},
		{Env: "ASSEMBLYAI_API_KEY", Usage: "AssemblyAI API key (environment only)",
			Set: engine.Text(func(c *Config) *string { return &c.APIKey })},
		{Env: "ASSEMBLYAI_POLL_INTERVAL", Flag: "assemblyai-poll-interval", Default: "5s",
			Usage: "fixed wait between checks of an AssemblyAI transcript",
			Set:   engine.Duration(func(c *Config) *time.Duration { return &c.PollInterval })},
		{Env: "ASSEMBLYAI_WEBHOOK_URL", Flag: "assemblyai-webhook-url",
			Usage: "public URL of /v1/callbacks/assemblyai on this service; set, AssemblyAI calls it when a transcript is ready instead of waiting for the next check",
			Set:   engine.Text(func(c *Config) *string { return &c.WebhookURL })},
		{Env: "ASSEMBLYAI_WEBHOOK_SECRET",
			Usage: "key that makes each job's callback token for AssemblyAI; needed with ASSEMBLYAI_WEBHOOK_URL and by every role that receives the callbacks (environment only)",
			Set:   engine.Text(func(c *Config) *string { return &c.WebhookSecret })},
	},
	Validate:     validate,
	Availability: engine.WhenConfigured,
	Configured:   func(c Config) bool { return c.APIKey != "" },
	New:          func(c Config) (engine.Engine, error) { return New(c, nil) },
	Callbacks: func(c Config) engine.CallbackReceiver {
		if c.WebhookSecret == "" {
			return nil
		}
		return NewCallbacks(c.WebhookSecret)
	},
})

func validate(c Config, isDefault bool) error {
	var errs []error
	if isDefault && c.APIKey == "" {
		errs = append(errs, errors.New("TRANSCRIBER_ENGINE=assemblyai needs ASSEMBLYAI_API_KEY"))
	}
	if c.WebhookURL != "" {
		if _, ok := engine.ParseHTTPURL(c.WebhookURL); !ok {
			errs = append(errs, errors.New("ASSEMBLYAI_WEBHOOK_URL must be an http(s) URL such as https://transcriber.example.com/v1/callbacks/assemblyai"))
		}
		if c.WebhookSecret == "" {
			errs = append(errs, errors.New("ASSEMBLYAI_WEBHOOK_URL needs ASSEMBLYAI_WEBHOOK_SECRET"))
		}
	}
	if c.PollInterval < time.Second {
		errs = append(errs, errors.New("ASSEMBLYAI_POLL_INTERVAL must be at least 1s"))
	}
	return errors.Join(errs...)
}

// Callbacks checks AssemblyAI's webhook calls: the job is named in the
// URL the engine gave AssemblyAI, and the job's token comes back in the
// header the engine asked for.
type Callbacks struct {
	secret string
}

// NewCallbacks checks calls against the tokens secret gives each job.
func NewCallbacks(secret string) *Callbacks { return &Callbacks{secret: secret} }

// maxCallbackBody bounds a callback's body: AssemblyAI's is two short
// fields.
const maxCallbackBody = 64 << 10

// maxJobID bounds the job named in a call, far above any id the service
// makes.
const maxJobID = 1000

// ReadCallback implements engine.CallbackReceiver.
func (c *Callbacks) ReadCallback(r *http.Request) (engine.Callback, error) {
	jobID := r.URL.Query().Get("job")
	if jobID == "" || len(jobID) > maxJobID || !engine.ValidCallbackToken(c.secret, jobID, r.Header.Get(engine.CallbackHeader)) {
		return engine.Callback{}, engine.ErrCallbackToken
	}
	var body struct {
		TranscriptID string `json:"transcript_id"`
		Status       string `json:"status"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxCallbackBody+1))
	if err != nil || len(data) > maxCallbackBody || json.Unmarshal(data, &body) != nil || body.TranscriptID == "" {
		return engine.Callback{}, errors.New(`the body must be {"transcript_id": "...", "status": "..."}`)
	}
	return engine.Callback{JobID: jobID, OperationID: body.TranscriptID, Status: body.Status}, nil
}
