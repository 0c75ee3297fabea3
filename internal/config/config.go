// Package config reads transcriber's settings from the environment and from
// command-line flags that mirror it. Each setting is declared once, with
// its variable, flag, default and meaning, so the two never disagree.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config is every setting of every role.
type Config struct {
	TemporalAddress   string
	TemporalNamespace string
	DataDir           string
	BlobURL           string
	Engine            string
	RetrySchedule     []time.Duration
	MaxAttempts       int
	ParkFor           time.Duration
	MaxDuration       time.Duration
	HTTPAddr          string
	UIAddr            string
	TemporalPort      int
	OpenAIBaseURL     string
	OpenAIAPIKey      string
	OpenAIModel       string
	PocketsphinxModel string
	AssemblyAIBaseURL string
	AssemblyAIAPIKey  string
	AssemblyAIPoll    time.Duration
	TelegramToken     string
	TelegramEndpoint  string
	TelegramAllowed   []string
	LogLevel          slog.Level
	LogFormat         string
}

// setting is one variable and its flag.
type setting struct {
	// flag is empty for secrets, which come from the environment only so
	// that they never show in process lists.
	env, flag, def, usage string
	set                   func(c *Config, v string) error
}

var settings = []setting{
	{"TEMPORAL_ADDRESS", "temporal-address", "", "host:port of an external Temporal frontend; unset embeds a Temporal server",
		func(c *Config, v string) error { c.TemporalAddress = v; return nil }},
	{"TEMPORAL_NAMESPACE", "temporal-namespace", "default", "Temporal namespace of the jobs",
		func(c *Config, v string) error { c.TemporalNamespace = v; return nil }},
	{"TRANSCRIBER_DATA_DIR", "data-dir", "./data", "directory for the embedded server's database (temporal.db) and the stored recordings",
		func(c *Config, v string) error { c.DataDir = v; return nil }},
	{"TRANSCRIBER_BLOB_URL", "blob-url", "", "where recordings and transcripts are kept: a directory, file:///path or s3://bucket/prefix (with the AWS_* variables); unset is blobs under the data directory",
		func(c *Config, v string) error { c.BlobURL = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_ENGINE", "engine", "local", "speech engine: local (offline pocketsphinx), openai (any OpenAI-compatible server) or assemblyai",
		func(c *Config, v string) error { c.Engine = strings.ToLower(strings.TrimSpace(v)); return nil }},
	{"TRANSCRIBER_RETRY_SCHEDULE", "retry-schedule", "30s,2m,10m,30m", "waits between attempts of a failing step, comma-separated; the last repeats",
		func(c *Config, v string) (err error) { c.RetrySchedule, err = parseSchedule(v); return err }},
	{"TRANSCRIBER_MAX_ATTEMPTS", "max-attempts", "5", "attempts a step may take before the job is dead",
		func(c *Config, v string) (err error) {
			c.MaxAttempts, err = strconv.Atoi(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_PARK_FOR", "park-for", "720h", "how long a failed or dead job waits for revive before it closes",
		func(c *Config, v string) (err error) {
			c.ParkFor, err = time.ParseDuration(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_MAX_DURATION", "max-duration", "4h", "longest recording accepted",
		func(c *Config, v string) (err error) {
			c.MaxDuration, err = time.ParseDuration(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_HTTP_ADDR", "http-addr", "127.0.0.1:8080", "address of the HTTP server (health, metrics, API)",
		func(c *Config, v string) error { c.HTTPAddr = v; return nil }},
	{"TRANSCRIBER_UI_ADDR", "ui-addr", "127.0.0.1:8233", "address of the embedded Temporal Web UI; off disables it",
		func(c *Config, v string) error {
			if strings.EqualFold(strings.TrimSpace(v), "off") {
				v = ""
			}
			c.UIAddr = v
			return nil
		}},
	{"TRANSCRIBER_TEMPORAL_PORT", "temporal-port", "7233", "gRPC port of the embedded Temporal server",
		func(c *Config, v string) (err error) {
			c.TemporalPort, err = strconv.Atoi(strings.TrimSpace(v))
			return err
		}},
	{"OPENAI_BASE_URL", "openai-base-url", "https://api.openai.com/v1", "base URL of the OpenAI-compatible server",
		func(c *Config, v string) error { c.OpenAIBaseURL = strings.TrimSpace(v); return nil }},
	{"OPENAI_API_KEY", "", "", "API key of the OpenAI-compatible server (environment only)",
		func(c *Config, v string) error { c.OpenAIAPIKey = strings.TrimSpace(v); return nil }},
	{"OPENAI_MODEL", "openai-model", "whisper-1", "model name sent to the OpenAI-compatible server",
		func(c *Config, v string) error { c.OpenAIModel = strings.TrimSpace(v); return nil }},
	{"ASSEMBLYAI_BASE_URL", "assemblyai-base-url", "https://api.assemblyai.com", "base URL of AssemblyAI (or a compatible stand-in)",
		func(c *Config, v string) error { c.AssemblyAIBaseURL = strings.TrimSpace(v); return nil }},
	{"ASSEMBLYAI_API_KEY", "", "", "AssemblyAI API key (environment only)",
		func(c *Config, v string) error { c.AssemblyAIAPIKey = strings.TrimSpace(v); return nil }},
	{"ASSEMBLYAI_POLL_INTERVAL", "assemblyai-poll-interval", "5s", "fixed wait between checks of an AssemblyAI transcript",
		func(c *Config, v string) (err error) {
			c.AssemblyAIPoll, err = time.ParseDuration(strings.TrimSpace(v))
			return err
		}},
	{"POCKETSPHINX_MODEL_DIR", "pocketsphinx-model-dir", "/usr/share/pocketsphinx/model/en-us", "pocketsphinx model directory of the local engine",
		func(c *Config, v string) error { c.PocketsphinxModel = v; return nil }},
	{"TELEGRAM_BOT_TOKEN", "", "", "token of the Telegram bot from @BotFather; set, up runs the bot (environment only)",
		func(c *Config, v string) error { c.TelegramToken = strings.TrimSpace(v); return nil }},
	{"TELEGRAM_API_ENDPOINT", "telegram-api-endpoint", "https://api.telegram.org", "Bot API server; a local telegram-bot-api --local lifts the 20 MB download limit",
		func(c *Config, v string) error {
			c.TelegramEndpoint = strings.TrimRight(strings.TrimSpace(v), "/")
			return nil
		}},
	{"TELEGRAM_ALLOWED_USERS", "telegram-allowed-users", "", "who may use the bot: numeric user ids and @usernames, comma-separated; unset is nobody",
		func(c *Config, v string) error { c.TelegramAllowed = parseUsers(v); return nil }},
	{"TRANSCRIBER_LOG_LEVEL", "log-level", "info", "debug, info, warn or error",
		func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(strings.TrimSpace(v))) }},
	{"TRANSCRIBER_LOG_FORMAT", "log-format", "text", "text or json",
		func(c *Config, v string) error { c.LogFormat = strings.ToLower(strings.TrimSpace(v)); return nil }},
}

// Engines that this build can use.
var Engines = []string{"local", "openai", "assemblyai"}

// Load reads the environment through getenv, applying defaults.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	var errs []error
	for _, s := range settings {
		v := getenv(s.env)
		if v == "" {
			v = s.def
		}
		if err := s.set(&c, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", s.env, v, err))
		}
	}
	return c, errors.Join(errs...)
}

// RegisterFlags adds a flag for every setting to fs, with the loaded values
// as defaults, so a flag overrides its variable.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	for _, s := range settings {
		if s.flag == "" {
			continue
		}
		fs.Func(s.flag, fmt.Sprintf("%s (env %s, default %q)", s.usage, s.env, s.def), func(v string) error {
			return s.set(c, v)
		})
	}
}

// Validate checks the settings together and says how to fix what is wrong.
func (c Config) Validate() error {
	var errs []error
	if c.TemporalNamespace == "" {
		errs = append(errs, errors.New("TEMPORAL_NAMESPACE must not be empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("TRANSCRIBER_DATA_DIR must not be empty"))
	}
	known := false
	for _, e := range Engines {
		known = known || e == c.Engine
	}
	if !known {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_ENGINE=%q is not an engine; choose one of %s", c.Engine, strings.Join(Engines, ", ")))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_MAX_ATTEMPTS=%d must be at least 1", c.MaxAttempts))
	}
	if c.ParkFor <= 0 {
		errs = append(errs, errors.New("TRANSCRIBER_PARK_FOR must be positive"))
	}
	if c.MaxDuration <= 0 {
		errs = append(errs, errors.New("TRANSCRIBER_MAX_DURATION must be positive"))
	}
	if c.TemporalPort < 1 || c.TemporalPort > 65535 {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_TEMPORAL_PORT=%d is not a port", c.TemporalPort))
	}
	for name, addr := range map[string]string{"TRANSCRIBER_HTTP_ADDR": c.HTTPAddr, "TRANSCRIBER_UI_ADDR": c.UIAddr} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not host:port: %w", name, addr, err))
		}
	}
	if c.TemporalAddress != "" {
		if _, _, err := net.SplitHostPort(c.TemporalAddress); err != nil {
			errs = append(errs, fmt.Errorf("TEMPORAL_ADDRESS=%q is not host:port: %w", c.TemporalAddress, err))
		}
	}
	if c.Engine == "openai" {
		u, err := url.Parse(c.OpenAIBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("OPENAI_BASE_URL=%q must be an http(s) URL such as https://api.openai.com/v1", c.OpenAIBaseURL))
		}
		if c.OpenAIModel == "" {
			errs = append(errs, errors.New("OPENAI_MODEL must not be empty"))
		}
	}
	if u, err := url.Parse(c.TelegramEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("TELEGRAM_API_ENDPOINT=%q must be an http(s) URL such as https://api.telegram.org", c.TelegramEndpoint))
	}
	for _, u := range c.TelegramAllowed {
		if name, ok := strings.CutPrefix(u, "@"); ok {
			if name == "" {
				errs = append(errs, errors.New("TELEGRAM_ALLOWED_USERS has an empty @username"))
			}
		} else if _, err := strconv.ParseInt(u, 10, 64); err != nil {
			errs = append(errs, fmt.Errorf("TELEGRAM_ALLOWED_USERS entry %q is neither a numeric user id nor an @username", u))
		}
	}
	if c.Engine == "assemblyai" && c.AssemblyAIAPIKey == "" {
		errs = append(errs, errors.New("TRANSCRIBER_ENGINE=assemblyai needs ASSEMBLYAI_API_KEY"))
	}
	if c.AssemblyAIPoll < time.Second {
		errs = append(errs, errors.New("ASSEMBLYAI_POLL_INTERVAL must be at least 1s"))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_LOG_FORMAT=%q must be text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// DatabaseFile is the embedded Temporal server's SQLite file.
func (c Config) DatabaseFile() string { return filepath.Join(c.DataDir, "temporal.db") }

// BlobDir is where the local blob store keeps recordings and transcripts.
func (c Config) BlobDir() string { return filepath.Join(c.DataDir, "blobs") }

func parseUsers(v string) []string {
	var out []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

func parseSchedule(v string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, fmt.Errorf("wait %s must be positive", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("give at least one wait, e.g. 30s,2m,10m,30m")
	}
	return out, nil
}

// Settings describes every setting for documentation: variable, flag,
// default and meaning.
func Settings() [][4]string {
	out := make([][4]string, 0, len(settings))
	for _, s := range settings {
		f := ""
		if s.flag != "" {
			f = "--" + s.flag
		}
		out = append(out, [4]string{s.env, f, s.def, s.usage})
	}
	return out
}
