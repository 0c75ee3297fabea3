package nats

import (
	"errors"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// Registration declares the engine to the service. Workers build it when
// NATS_URL is set; "transcriber up" sets it to the NATS server it embeds
// when the engine is the default and the variable is unset.
var Registration = engine.Register(engine.Spec[Config]{
	Name:    Name,
	Summary: "jobs published to NATS JetStream for recognition services",
	Settings: []engine.Setting[Config]{
		{Env: "NATS_URL", Flag: "nats-url",
			Usage: "NATS server(s) of the recognition exchange, e.g. nats://broker:4222; unset, transcriber up embeds one when the engine is nats",
			Set:   engine.Text(func(c *Config) *string { return &c.URL })},
		{Env: "NATS_CREDS", Flag: "nats-creds", Usage: "NATS credentials file (JWT and NKey seed)",
			Set: engine.Text(func(c *Config) *string { return &c.CredsFile })},
		{Env: "NATS_TOKEN", Usage: "NATS authentication token (environment only)",
			Set: engine.Text(func(c *Config) *string { return &c.Token })},
		{Env: "NATS_TLS_CA", Flag: "nats-tls-ca", Usage: "CA certificate (PEM) that signed the NATS server's certificate",
			Set: engine.Text(func(c *Config) *string { return &c.TLSCA })},
		{Env: "NATS_TLS_CERT", Flag: "nats-tls-cert", Usage: "client certificate (PEM) for NATS, with NATS_TLS_KEY",
			Set: engine.Text(func(c *Config) *string { return &c.TLSCert })},
		{Env: "NATS_TLS_KEY", Flag: "nats-tls-key", Usage: "private key (PEM) of NATS_TLS_CERT",
			Set: engine.Text(func(c *Config) *string { return &c.TLSKey })},
		{Env: "TRANSCRIBER_NATS_SERVICE", Flag: "nats-service", Default: DefaultService,
			Usage: "recognition service queue jobs go to: subject " + JobsSubjectPrefix + "<service>",
			Set:   engine.Text(func(c *Config) *string { return &c.Service })},
		{Env: "TRANSCRIBER_NATS_REPLY_DEADLINE", Flag: "nats-reply-deadline",
			Usage: "how long a recognition service has to answer before the job is dead with kind timeout; unset is 10m plus four times the audio",
			Set: func(c *Config, v string) error {
				if strings.TrimSpace(v) == "" {
					c.ReplyDeadline = 0
					return nil
				}
				return engine.Duration(func(c *Config) *time.Duration { return &c.ReplyDeadline })(c, v)
			}},
		{Env: "TRANSCRIBER_NATS_AUDIO_URL", Flag: "nats-audio-url",
			Usage: "this service's HTTP server as recognition services reach it, for the signed audio URLs; unset is http://$TRANSCRIBER_HTTP_ADDR",
			Set:   engine.Text(func(c *Config) *string { return &c.AudioBaseURL })},
		{Env: "TRANSCRIBER_NATS_AUDIO_SECRET",
			Usage: "key that signs the audio URLs; every worker and HTTP server of the engine needs the same one; unset, one is kept in the data directory (environment only)",
			Set:   engine.Text(func(c *Config) *string { return &c.AudioSecret })},
		{Env: "TRANSCRIBER_NATS_EMBED_ADDR", Flag: "nats-embed-addr", Default: "127.0.0.1:4222",
			Usage: "where transcriber up listens with its embedded NATS server (engine nats without NATS_URL)",
			Set:   engine.Text(func(c *Config) *string { return &c.EmbedAddr })},
		{Env: "TRANSCRIBER_RECOGNIZER_ENGINE", Flag: "recognizer-engine", Default: "local",
			Usage: "engine transcriber recognizer recognises with",
			Set:   engine.Text(func(c *Config) *string { return &c.RecognizerEngine })},
		{Env: "TRANSCRIBER_RECOGNIZER_HTTP_ADDR", Flag: "recognizer-http-addr",
			Usage: "where transcriber recognizer answers /healthz and /readyz (ready while connected to NATS); unset serves nothing",
			Set:   engine.Text(func(c *Config) *string { return &c.RecognizerHTTPAddr })},
	},
	Validate:     validate,
	Availability: engine.WhenConfigured,
	Configured:   func(c Config) bool { return c.URL != "" },
	New:          func(c Config) (engine.Engine, error) { return New(c) },
})

func validate(c Config, isDefault bool) error {
	var errs []error
	if !validToken(c.Service) {
		errs = append(errs, errors.New("TRANSCRIBER_NATS_SERVICE must be one subject token of letters, digits, - and _, such as default or gpu"))
	}
	if c.ReplyDeadline < 0 || (c.ReplyDeadline > 0 && c.ReplyDeadline < time.Second) {
		errs = append(errs, errors.New("TRANSCRIBER_NATS_REPLY_DEADLINE must be at least 1s, or unset"))
	}
	if c.ReplyDeadline > retainFor {
		errs = append(errs, errors.New("TRANSCRIBER_NATS_REPLY_DEADLINE must not exceed 168h, how long the broker keeps results"))
	}
	if c.AudioSecret != "" && len(c.AudioSecret) < 16 {
		errs = append(errs, errors.New("TRANSCRIBER_NATS_AUDIO_SECRET must have at least 16 characters"))
	}
	if c.AudioBaseURL != "" {
		if _, ok := engine.ParseHTTPURL(c.AudioBaseURL); !ok {
			errs = append(errs, errors.New("TRANSCRIBER_NATS_AUDIO_URL must be an http(s) URL such as http://transcriber.example:8080"))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("NATS_TLS_CERT and NATS_TLS_KEY go together"))
	}
	return errors.Join(errs...)
}

// validToken reports whether s is a safe single subject token.
func validToken(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0
}
