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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/devserver/pgurl"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/builtin"
	"github.com/transcriber/transcriber/internal/job"
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
	// OperationTimeout bounds an engine operation; zero sizes it from the
	// audio.
	OperationTimeout time.Duration
	// Retention is how long a closed job's recordings and transcripts are
	// kept; zero keeps them.
	Retention    time.Duration
	MaxDuration  time.Duration
	HTTPAddr     string
	UIAddr       string
	TemporalPort int
	// TemporalHost is the address the embedded server binds to and
	// advertises to its own services.
	TemporalHost string
	// DB is where the embedded Temporal server keeps its state: empty is
	// the SQLite file in DataDir, else a postgres:// URL. It may hold a
	// password: never log it.
	DB string
	// EngineConcurrency bounds the simultaneous requests of one worker to
	// one engine.
	EngineConcurrency int
	// ChunkDuration, when positive, splits longer recordings for parallel
	// recognition whatever the engine's limits.
	ChunkDuration time.Duration
	// Routes pick the engine by the job's language (primary subtag);
	// FallbackEngine takes jobs whose engine gave up.
	Routes         map[string]string
	FallbackEngine string
	// EngineSettings are each engine's own settings, as its registration
	// declares them; they may hold credentials: never log them.
	EngineSettings   engine.Settings
	TelegramToken    string
	TelegramEndpoint string
	TelegramAllowed  []string
	// VaultDir, when set, is the notes vault whose recordings up and vault
	// transcribe; VaultSource and VaultInbox are folders inside it.
	VaultDir, VaultSource, VaultInbox string
	// VaultLanguage is the language of the vault's recordings and of the
	// messages written into its notes; empty is the engine's choice.
	VaultLanguage    string
	VaultConcurrency int
	// Device names this machine among the devices that share a vault;
	// empty is an id kept in DataDir.
	Device         string
	APITokens      []string
	Admins         []string
	MaxUploadBytes int64
	APIWait        time.Duration
	WebhookSecret  string
	// WebhookAllowLoopback lets webhooks reach this machine, for testing.
	WebhookAllowLoopback bool
	LogLevel             slog.Level
	LogFormat            string

	// TemporalSecurity is TLS and the API key for a cluster the roles dial.
	TemporalSecurity TemporalSecurity
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
	// The Temporal CLI's variables for secured clusters. Keys and key data
	// are secrets, and PEM data does not fit a command line: environment
	// only. Checked in Validate, whose errors never quote them.
	{"TEMPORAL_API_KEY", "", "", "API key of Temporal Cloud or of a cluster that checks keys, sent as a bearer token; turns TLS on unless TEMPORAL_TLS=false (environment only)",
		func(c *Config, v string) error { c.TemporalSecurity.APIKey = strings.TrimSpace(v); return nil }},
	{"TEMPORAL_TLS", "temporal-tls", "", "true connects to Temporal over TLS, false without; unset is TLS when a certificate, key, CA or API key is given",
		func(c *Config, v string) error {
			if strings.TrimSpace(v) == "" {
				c.TemporalSecurity.TLS = nil
				return nil
			}
			b, err := parseBool(v)
			c.TemporalSecurity.TLS = &b
			return err
		}},
	{"TEMPORAL_TLS_CLIENT_CERT_PATH", "temporal-tls-client-cert-path", "", "PEM file of the client certificate for mutual TLS",
		func(c *Config, v string) error { c.TemporalSecurity.ClientCertPath = strings.TrimSpace(v); return nil }},
	{"TEMPORAL_TLS_CLIENT_CERT_DATA", "", "", "the client certificate itself, PEM, instead of a file (environment only)",
		func(c *Config, v string) error { c.TemporalSecurity.ClientCertData = v; return nil }},
	{"TEMPORAL_TLS_CLIENT_KEY_PATH", "temporal-tls-client-key-path", "", "PEM file of the client certificate's private key",
		func(c *Config, v string) error { c.TemporalSecurity.ClientKeyPath = strings.TrimSpace(v); return nil }},
	{"TEMPORAL_TLS_CLIENT_KEY_DATA", "", "", "the client's private key itself, PEM, instead of a file (environment only)",
		func(c *Config, v string) error { c.TemporalSecurity.ClientKeyData = v; return nil }},
	{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "temporal-tls-server-ca-cert-path", "", "PEM file of the CA that signed the server's certificate; unset trusts the system's CAs",
		func(c *Config, v string) error {
			c.TemporalSecurity.ServerCACertPath = strings.TrimSpace(v)
			return nil
		}},
	{"TEMPORAL_TLS_SERVER_CA_CERT_DATA", "", "", "the server's CA certificate itself, PEM, instead of a file (environment only)",
		func(c *Config, v string) error { c.TemporalSecurity.ServerCACertData = v; return nil }},
	{"TEMPORAL_TLS_SERVER_NAME", "temporal-tls-server-name", "", "name the server's certificate must carry, when it is not the host of TEMPORAL_ADDRESS",
		func(c *Config, v string) error { c.TemporalSecurity.ServerName = strings.TrimSpace(v); return nil }},
	{"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "temporal-tls-disable-host-verification", "false", "true accepts any server certificate; for tests only",
		func(c *Config, v string) (err error) {
			c.TemporalSecurity.DisableHostVerification, err = parseBool(v)
			return err
		}},
	{"TRANSCRIBER_DATA_DIR", "data-dir", "./data", "directory for the embedded server's database (temporal.db) and the stored recordings",
		func(c *Config, v string) error { c.DataDir = v; return nil }},
	{"TRANSCRIBER_BLOB_URL", "blob-url", "", "where recordings and transcripts are kept: a directory, file:///path or s3://bucket/prefix (with the AWS_* variables); unset is blobs under the data directory",
		func(c *Config, v string) error { c.BlobURL = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_ENGINE", "engine", builtin.Engines[0].Name(), engineUsage(),
		func(c *Config, v string) error { c.Engine = strings.ToLower(strings.TrimSpace(v)); return nil }},
	{"TRANSCRIBER_RETRY_SCHEDULE", "retry-schedule", formatSchedule(job.DefaultBackoff()), "waits between attempts of a failing step, comma-separated; the last repeats",
		func(c *Config, v string) (err error) { c.RetrySchedule, err = parseSchedule(v); return err }},
	{"TRANSCRIBER_MAX_ATTEMPTS", "max-attempts", strconv.Itoa(job.DefaultMaxAttempts), "attempts a step may take before the job is dead",
		func(c *Config, v string) (err error) {
			c.MaxAttempts, err = strconv.Atoi(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_OPERATION_TIMEOUT", "operation-timeout", "0", "how long an engine operation (a submitted recording the engine works on) may run before the job is dead with kind timeout, e.g. 2h; 0 is half an hour plus four times the audio's length",
		func(c *Config, v string) (err error) {
			c.OperationTimeout, err = time.ParseDuration(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_PARK_FOR", "park-for", formatDuration(job.DefaultParkFor), "how long a failed or dead job waits for revive before it closes",
		func(c *Config, v string) (err error) {
			c.ParkFor, err = time.ParseDuration(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_RETENTION", "retention", "0", "how long a closed job's recordings and transcripts are kept before they are removed (e.g. 720h); 0 keeps them",
		func(c *Config, v string) (err error) {
			c.Retention, err = time.ParseDuration(strings.TrimSpace(v))
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
	{"TRANSCRIBER_TEMPORAL_HOST", "temporal-host", "127.0.0.1", "IP address the embedded Temporal server listens on; this machine's own address lets workers on other machines join (0.0.0.0 cannot be used: the server tells its parts this address)",
		func(c *Config, v string) error { c.TemporalHost = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_TEMPORAL_PORT", "temporal-port", "7233", "gRPC port of the embedded Temporal server",
		func(c *Config, v string) (err error) {
			c.TemporalPort, err = strconv.Atoi(strings.TrimSpace(v))
			return err
		}},
	// Checked in Validate, whose errors never quote the URL and its password.
	{"TRANSCRIBER_DB", "db", "", "database of the embedded Temporal server: unset is SQLite in the data directory (temporal.db); postgres://user:password@host:5432/temporal?sslmode=disable is PostgreSQL, with visibility in temporal_visibility; the URL holds a password, so prefer the variable to the flag",
		func(c *Config, v string) error { c.DB = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_ENGINE_CONCURRENCY", "engine-concurrency", "4", "simultaneous requests of one worker to one engine; 1 makes them strictly sequential",
		func(c *Config, v string) (err error) {
			c.EngineConcurrency, err = strconv.Atoi(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_CHUNK_DURATION", "chunk-duration", "0", "split recordings longer than this into chunks recognised in parallel (e.g. 5m); 0 splits only what exceeds the engine's limits",
		func(c *Config, v string) (err error) {
			c.ChunkDuration, err = time.ParseDuration(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_ENGINE_ROUTES", "engine-routes", "", "engine by language, e.g. ru=speechkit,uk=speechkit; other languages use TRANSCRIBER_ENGINE",
		func(c *Config, v string) (err error) { c.Routes, err = parseRoutes(v); return err }},
	{"TRANSCRIBER_FALLBACK_ENGINE", "fallback-engine", "", "engine that takes a job whose engine gave up on it (ran out of attempts or time); unset is none",
		func(c *Config, v string) error { c.FallbackEngine = strings.ToLower(strings.TrimSpace(v)); return nil }},
	{"TELEGRAM_BOT_TOKEN", "", "", "token of the Telegram bot from @BotFather; set, up runs the bot (environment only)",
		func(c *Config, v string) error { c.TelegramToken = strings.TrimSpace(v); return nil }},
	{"TELEGRAM_API_ENDPOINT", "telegram-api-endpoint", "https://api.telegram.org", "Bot API server; a local telegram-bot-api --local lifts the 20 MB download limit",
		func(c *Config, v string) error {
			c.TelegramEndpoint = strings.TrimRight(strings.TrimSpace(v), "/")
			return nil
		}},
	{"TELEGRAM_ALLOWED_USERS", "telegram-allowed-users", "", "who may use the bot: numeric user ids and @usernames, comma-separated; unset is nobody",
		func(c *Config, v string) error { c.TelegramAllowed = parseUsers(v); return nil }},
	{"TRANSCRIBER_VAULT_DIR", "vault-dir", "", "notes vault (an Obsidian vault) whose voice recordings up transcribes into their notes; unset is no vault",
		func(c *Config, v string) error { c.VaultDir = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_VAULT_SOURCE", "vault-source", "voice/source", "folder of the vault, from its top, where recordings are kept",
		func(c *Config, v string) error { c.VaultSource = strings.Trim(strings.TrimSpace(v), "/"); return nil }},
	{"TRANSCRIBER_VAULT_INBOX", "vault-inbox", "voice/inbox", "folder of the vault, from its top, where the notes of new recordings are made",
		func(c *Config, v string) error { c.VaultInbox = strings.Trim(strings.TrimSpace(v), "/"); return nil }},
	{"TRANSCRIBER_VAULT_LANGUAGE", "vault-language", "", "language of the vault's recordings (en, ru, ...) and of the messages in their notes; unset lets the engine decide and writes English",
		func(c *Config, v string) error { c.VaultLanguage = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_VAULT_CONCURRENCY", "vault-concurrency", "1", "recordings of this device in flight at once; 1 sends them strictly one after another",
		func(c *Config, v string) (err error) {
			c.VaultConcurrency, err = strconv.Atoi(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_DEVICE", "device", "", "this machine's name among the devices that share the vault; unset is an id made once and kept in the data directory",
		func(c *Config, v string) error { c.Device = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_API_TOKENS", "", "", "accounts of the HTTP job API and the web page, comma-separated, each name:token (a bare token is an account named after its fingerprint); unset turns the job endpoints off (environment only)",
		func(c *Config, v string) error { c.APITokens = parseList(v); return nil }},
	{"TRANSCRIBER_ADMINS", "admins", "", "accounts of TRANSCRIBER_API_TOKENS that see, revive and cancel every job, comma-separated",
		func(c *Config, v string) error { c.Admins = parseList(v); return nil }},
	{"TRANSCRIBER_MAX_UPLOAD_BYTES", "max-upload-bytes", "1073741824", "largest recording the HTTP API accepts, in bytes",
		func(c *Config, v string) (err error) {
			c.MaxUploadBytes, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return err
		}},
	{"TRANSCRIBER_API_WAIT", "api-wait", "1h", "how long POST /v1/audio/transcriptions waits for the transcript when the client announces no timeout of its own (OpenAI's SDKs send X-Stainless-Timeout, which is waited for instead), before it answers 202 with the job id",
		func(c *Config, v string) (err error) {
			c.APIWait, err = time.ParseDuration(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_WEBHOOK_SECRET", "", "", "key that signs webhooks to the jobs' webhook URLs (HMAC-SHA256); unset refuses webhook URLs (environment only)",
		func(c *Config, v string) error { c.WebhookSecret = strings.TrimSpace(v); return nil }},
	{"TRANSCRIBER_WEBHOOK_ALLOW_LOOPBACK", "webhook-allow-loopback", "false", "let webhooks reach this machine's own addresses (127.0.0.1, ::1, localhost), for local testing; link-local addresses such as cloud metadata are refused always",
		func(c *Config, v string) (err error) {
			c.WebhookAllowLoopback, err = strconv.ParseBool(strings.TrimSpace(v))
			return err
		}},
	{"TRANSCRIBER_LOG_LEVEL", "log-level", "info", "debug, info, warn or error",
		func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(strings.TrimSpace(v))) }},
	{"TRANSCRIBER_LOG_FORMAT", "log-format", "text", "text or json",
		func(c *Config, v string) error { c.LogFormat = strings.ToLower(strings.TrimSpace(v)); return nil }},
}

// all are the service's settings followed by every engine's, which their
// registrations declare.
var all = append(slices.Clip(settings), engineSettings()...)

func engineSettings() []setting {
	var out []setting
	for _, v := range builtin.Engines.Vars() {
		out = append(out, setting{v.Env, v.Flag, v.Default, v.Usage,
			func(c *Config, val string) error { return v.Set(c.EngineSettings, val) }})
	}
	return out
}

// engineUsage lists the engines for TRANSCRIBER_ENGINE's usage, each with
// its summary.
func engineUsage() string {
	var names []string
	for _, r := range builtin.Engines {
		n := r.Name()
		if s := r.Summary(); s != "" {
			n += " (" + s + ")"
		}
		names = append(names, n)
	}
	if len(names) > 1 {
		names = append(names[:len(names)-2], names[len(names)-2]+" or "+names[len(names)-1])
	}
	return "speech engine: " + strings.Join(names, ", ")
}

// Engines that this build can use, in the order of their registration.
var Engines = builtin.Engines.Names()

// Load reads the environment through getenv, applying defaults.
func Load(getenv func(string) string) (Config, error) {
	c := Config{EngineSettings: builtin.Engines.NewSettings()}
	var errs []error
	for _, s := range all {
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
	for _, s := range all {
		if s.flag == "" {
			continue
		}
		usage := fmt.Sprintf("%s (env %s, default %q)", s.usage, s.env, s.def)
		set := func(v string) error { return s.set(c, v) }
		if boolFlags[s.flag] {
			fs.BoolFunc(s.flag, usage, set)
		} else {
			fs.Func(s.flag, usage, set)
		}
	}
}

// IsSettingFlag tells a flag RegisterFlags adds from a command's own, so
// that a command's help can show its own flags and only the few settings
// a person running it needs, while every setting still parses.
func IsSettingFlag(name string) bool {
	return slices.ContainsFunc(all, func(s setting) bool { return s.flag != "" && s.flag == name })
}

// SettingOfFlag is the variable of the setting whose flag is name.
func SettingOfFlag(name string) (string, bool) {
	for _, s := range all {
		if s.flag != "" && s.flag == name {
			return s.env, true
		}
	}
	return "", false
}

// boolFlags may be given without a value, as the Temporal CLI's --tls is:
// --temporal-tls means --temporal-tls=true.
var boolFlags = map[string]bool{"temporal-tls": true, "temporal-tls-disable-host-verification": true}

// Validate checks the settings together and says how to fix what is wrong.
func (c Config) Validate() error {
	var errs []error
	if c.TemporalNamespace == "" {
		errs = append(errs, errors.New("TEMPORAL_NAMESPACE must not be empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("TRANSCRIBER_DATA_DIR must not be empty"))
	}
	if c.VaultConcurrency < 1 {
		errs = append(errs, errors.New("TRANSCRIBER_VAULT_CONCURRENCY must be at least 1"))
	}
	for _, f := range []struct{ name, v string }{{"TRANSCRIBER_VAULT_SOURCE", c.VaultSource}, {"TRANSCRIBER_VAULT_INBOX", c.VaultInbox}} {
		if !filepath.IsLocal(f.v) {
			errs = append(errs, fmt.Errorf("%s must be a folder inside the vault, such as voice/source", f.name))
		}
	}
	if c.VaultLanguage != "" && !job.IsLanguageCode(c.VaultLanguage) {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_VAULT_LANGUAGE %q is not a language code such as en or ru", c.VaultLanguage))
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
	if c.OperationTimeout < 0 {
		errs = append(errs, errors.New("TRANSCRIBER_OPERATION_TIMEOUT must not be negative; 0 sizes it from the audio"))
	}
	if c.ParkFor <= 0 {
		errs = append(errs, errors.New("TRANSCRIBER_PARK_FOR must be positive"))
	}
	if c.Retention < 0 {
		errs = append(errs, errors.New("TRANSCRIBER_RETENTION must not be negative"))
	}
	if c.MaxDuration <= 0 {
		errs = append(errs, errors.New("TRANSCRIBER_MAX_DURATION must be positive"))
	}
	if ip := net.ParseIP(c.TemporalHost); ip == nil || ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_TEMPORAL_HOST=%q must be one IP address of this machine, such as 127.0.0.1 or 10.0.0.5", c.TemporalHost))
	}
	if c.TemporalPort < 1 || c.TemporalPort > 65535 {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_TEMPORAL_PORT=%d is not a port", c.TemporalPort))
	}
	if c.DB != "" {
		if _, err := pgurl.Parse(c.DB); err != nil {
			errs = append(errs, fmt.Errorf("TRANSCRIBER_DB: %w", err))
		}
	}
	for name, addr := range map[string]string{"TRANSCRIBER_HTTP_ADDR": c.HTTPAddr, "TRANSCRIBER_UI_ADDR": c.UIAddr} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not host:port: %w", name, addr, err))
		}
	}
	if _, err := c.TemporalSecurity.ClientTLS(); err != nil {
		errs = append(errs, err)
	}
	if c.TemporalAddress != "" {
		if _, _, err := net.SplitHostPort(c.TemporalAddress); err != nil {
			errs = append(errs, fmt.Errorf("TEMPORAL_ADDRESS=%q is not host:port: %w", c.TemporalAddress, err))
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
	errs = append(errs, builtin.Engines.Validate(c.EngineSettings, c.Engine))
	if c.EngineConcurrency < 1 {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_ENGINE_CONCURRENCY=%d must be at least 1", c.EngineConcurrency))
	}
	if c.ChunkDuration != 0 && c.ChunkDuration < 30*time.Second {
		errs = append(errs, errors.New("TRANSCRIBER_CHUNK_DURATION must be 0 (off) or at least 30s"))
	}
	for lang, e := range c.Routes {
		if !slices.Contains(Engines, e) {
			errs = append(errs, fmt.Errorf("TRANSCRIBER_ENGINE_ROUTES sends %s to %q, which is not an engine; choose one of %s", lang, e, strings.Join(Engines, ", ")))
		}
	}
	if c.FallbackEngine != "" && !slices.Contains(Engines, c.FallbackEngine) {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_FALLBACK_ENGINE=%q is not an engine; choose one of %s", c.FallbackEngine, strings.Join(Engines, ", ")))
	}
	if c.MaxUploadBytes < 1 {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_MAX_UPLOAD_BYTES=%d must be positive", c.MaxUploadBytes))
	}
	if c.APIWait < 0 {
		errs = append(errs, errors.New("TRANSCRIBER_API_WAIT must not be negative"))
	}
	for _, t := range c.APITokens {
		if strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			errs = append(errs, errors.New("TRANSCRIBER_API_TOKENS: a token holds a space or control character; separate tokens with commas"))
			break
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("TRANSCRIBER_LOG_FORMAT=%q must be text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// Route picks the engine of a job in language, and its fallback. A job's
// own choice of engine comes before the route; a route names the language
// by its primary subtag, so ru also takes ru-RU.
func (c Config) Route(language string) (engine, fallback string) {
	engine = c.Engine
	primary, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(language)), "-")
	primary, _, _ = strings.Cut(primary, "_")
	if e, ok := c.Routes[primary]; ok {
		engine = e
	}
	if c.FallbackEngine != engine {
		fallback = c.FallbackEngine
	}
	return engine, fallback
}

func parseRoutes(v string) (map[string]string, error) {
	routes := map[string]string{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lang, engine, ok := strings.Cut(part, "=")
		lang, engine = strings.ToLower(strings.TrimSpace(lang)), strings.ToLower(strings.TrimSpace(engine))
		if !ok || lang == "" || engine == "" {
			return nil, fmt.Errorf("route %q is not language=engine, e.g. ru=speechkit", part)
		}
		if _, dup := routes[lang]; dup {
			return nil, fmt.Errorf("language %s is routed twice", lang)
		}
		routes[lang] = engine
	}
	return routes, nil
}

// DatabaseFile is the embedded Temporal server's SQLite file.
func (c Config) DatabaseFile() string { return filepath.Join(c.DataDir, "temporal.db") }

// BlobDir is where the local blob store keeps recordings and transcripts.
func (c Config) BlobDir() string { return filepath.Join(c.DataDir, "blobs") }

// parseList splits a comma-separated list, dropping empty entries.
func parseList(v string) []string {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

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

// formatSchedule writes waits the way parseSchedule reads them.
func formatSchedule(waits []time.Duration) string {
	parts := make([]string, len(waits))
	for i, d := range waits {
		parts[i] = formatDuration(d)
	}
	return strings.Join(parts, ",")
}

// formatDuration writes d as a person would, "2m" rather than "2m0s", so
// that the defaults read in the help and the README as they are typed.
func formatDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// Settings describes every setting for documentation: variable, flag,
// default and meaning.
func Settings() [][4]string {
	out := make([][4]string, 0, len(all))
	for _, s := range all {
		f := ""
		if s.flag != "" {
			f = "--" + s.flag
		}
		out = append(out, [4]string{s.env, f, s.def, s.usage})
	}
	return out
}
