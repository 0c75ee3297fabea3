package openai

import (
	"errors"
	"fmt"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// Registration declares the engine to the service. It is always
// available, so that a job may ask for it whatever a worker's default is;
// without a valid key the server's 401 fails such a job with a reason the
// owner can act on.
var Registration = engine.Register(engine.Spec[Config]{
	Name:    Name,
	Summary: "any OpenAI-compatible server",
	Settings: []engine.Setting[Config]{
		{Env: "OPENAI_BASE_URL", Flag: "openai-base-url", Default: "https://api.openai.com/v1",
			Usage: "base URL of the OpenAI-compatible server",
			Set:   engine.Text(func(c *Config) *string { return &c.BaseURL })},
		{Env: "OPENAI_API_KEY", Usage: "API key of the OpenAI-compatible server (environment only)",
			Set: engine.Text(func(c *Config) *string { return &c.APIKey })},
		{Env: "OPENAI_MODEL", Flag: "openai-model", Default: "whisper-1",
			Usage: "model name sent to the OpenAI-compatible server",
			Set:   engine.Text(func(c *Config) *string { return &c.Model })},
		{Env: "OPENAI_MAX_UPLOAD_BYTES", Flag: "openai-max-upload-bytes", Default: "25000000",
			Usage: "largest file sent in one request; longer recordings are split into chunks that fit",
			Set:   engine.Bytes(func(c *Config) *int64 { return &c.MaxUploadBytes })},
		{Env: "OPENAI_MAX_DURATION", Flag: "openai-max-duration", Default: "0",
			Usage: "longest audio sent in one request (e.g. 10m); 0 is no limit besides the size",
			Set:   engine.Duration(func(c *Config) *time.Duration { return &c.MaxDuration })},
		{Env: "OPENAI_DIARIZE_MODEL", Flag: "openai-diarize-model", Default: "gpt-4o-transcribe-diarize",
			Usage: "model asked when a job wants speakers labelled (it answers diarized_json); empty labels no speakers",
			Set:   engine.Text(func(c *Config) *string { return &c.DiarizeModel })},
		{Env: "OPENAI_ALWAYS_CONVERT", Flag: "openai-always-convert", Default: "false",
			Usage: "convert every recording to 16 kHz mono FLAC, also those OpenAI's API takes as they are (ogg, mp3, m4a, wav, webm, flac), for servers that read fewer formats",
			Set:   engine.Bool(func(c *Config) *bool { return &c.AlwaysConvert })},
		{Env: "OPENAI_PROMPT", Flag: "openai-prompt",
			Usage: "text that guides the model's style and vocabulary (names, terms), sent with every request",
			Set:   engine.Text(func(c *Config) *string { return &c.Prompt })},
	},
	Validate:     validate,
	Availability: engine.Always,
	New:          func(c Config) (engine.Engine, error) { return New(c, nil) },
})

func validate(c Config, isDefault bool) error {
	var errs []error
	if isDefault {
		if _, ok := engine.ParseHTTPURL(c.BaseURL); !ok {
			errs = append(errs, fmt.Errorf("OPENAI_BASE_URL=%q must be an http(s) URL such as https://api.openai.com/v1", c.BaseURL))
		}
		if c.Model == "" {
			errs = append(errs, errors.New("OPENAI_MODEL must not be empty"))
		}
	}
	if c.MaxUploadBytes < 200_000 {
		errs = append(errs, fmt.Errorf("OPENAI_MAX_UPLOAD_BYTES=%d is too small; give at least 200000", c.MaxUploadBytes))
	}
	if c.MaxDuration != 0 && c.MaxDuration < 30*time.Second {
		errs = append(errs, errors.New("OPENAI_MAX_DURATION must be 0 (no limit) or at least 30s"))
	}
	return errors.Join(errs...)
}
