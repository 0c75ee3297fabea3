package speechkit

import (
	"errors"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// Registration declares the engine to the service. Workers build it only
// with an API key or an IAM token.
var Registration = engine.Register(engine.Spec[Config]{
	Name:    Name,
	Summary: "Yandex SpeechKit",
	Settings: []engine.Setting[Config]{
		{Env: "SPEECHKIT_API_KEY", Usage: "Yandex SpeechKit API key (environment only)",
			Set: engine.Text(func(c *Config) *string { return &c.APIKey })},
		{Env: "SPEECHKIT_IAM_TOKEN", Usage: "Yandex Cloud IAM token, instead of an API key (environment only)",
			Set: engine.Text(func(c *Config) *string { return &c.IAMToken })},
		{Env: "SPEECHKIT_FOLDER_ID", Flag: "speechkit-folder-id",
			Usage: "Yandex Cloud folder billed for recognition; needed with a user account's IAM token",
			Set:   engine.Text(func(c *Config) *string { return &c.FolderID })},
		{Env: "SPEECHKIT_BASE_URL", Flag: "speechkit-base-url", Default: DefaultBaseURL,
			Usage: "SpeechKit recognition API (or a compatible stand-in)",
			Set:   engine.Text(func(c *Config) *string { return &c.BaseURL })},
		{Env: "SPEECHKIT_OPERATIONS_URL", Flag: "speechkit-operations-url", Default: DefaultOperationsURL,
			Usage: "Yandex Cloud operations API, where recognition operations are checked",
			Set:   engine.Text(func(c *Config) *string { return &c.OperationsURL })},
		{Env: "SPEECHKIT_MODEL", Flag: "speechkit-model", Default: DefaultModel,
			Usage: "SpeechKit recognition model, e.g. general or deferred-general",
			Set:   engine.Text(func(c *Config) *string { return &c.Model })},
		{Env: "SPEECHKIT_POLL_INTERVAL", Flag: "speechkit-poll-interval", Default: "15s",
			Usage: "least wait between checks of a SpeechKit operation, stretched to share the hourly quota among the operations running in the process",
			Set:   engine.Duration(func(c *Config) *time.Duration { return &c.PollInterval })},
	},
	Validate:     validate,
	Availability: engine.WhenConfigured,
	Configured:   func(c Config) bool { return c.APIKey != "" || c.IAMToken != "" },
	New:          func(c Config) (engine.Engine, error) { return New(c, nil) },
})

func validate(c Config, isDefault bool) error {
	var errs []error
	if isDefault && c.APIKey == "" && c.IAMToken == "" {
		errs = append(errs, errors.New("TRANSCRIBER_ENGINE=speechkit needs SPEECHKIT_API_KEY or SPEECHKIT_IAM_TOKEN"))
	}
	if c.APIKey != "" && c.IAMToken != "" {
		errs = append(errs, errors.New("set SPEECHKIT_API_KEY or SPEECHKIT_IAM_TOKEN, not both"))
	}
	if c.PollInterval < time.Second {
		errs = append(errs, errors.New("SPEECHKIT_POLL_INTERVAL must be at least 1s"))
	}
	return errors.Join(errs...)
}
