package config

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/engine/builtin"
	"github.com/transcriber/transcriber/internal/engine/openai"
)

func env(pairs ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	c, err := Load(env())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	want := []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute}
	if len(c.RetrySchedule) != len(want) {
		t.Fatalf("schedule = %v; want %v", c.RetrySchedule, want)
	}
	for i := range want {
		if c.RetrySchedule[i] != want[i] {
			t.Errorf("schedule[%d] = %v; want %v", i, c.RetrySchedule[i], want[i])
		}
	}
	if c.MaxAttempts != 5 || c.Engine != "local" || c.HTTPAddr != "127.0.0.1:8080" || c.UIAddr != "127.0.0.1:8233" ||
		c.TemporalPort != 7233 || c.TemporalNamespace != "default" || c.DataDir != "./data" {
		t.Errorf("defaults = %+v", c)
	}
	if oa := c.EngineSettings[openai.Name].(*openai.Config); oa.Model != "whisper-1" || oa.MaxUploadBytes != 25_000_000 {
		t.Errorf("openai settings = %+v; want model whisper-1 and 25 MB uploads", *oa)
	}
	if c.DatabaseFile() != "data/temporal.db" {
		t.Errorf("database file = %q", c.DatabaseFile())
	}
}

func TestFlagOverridesEnvironment(t *testing.T) {
	c, err := Load(env("TRANSCRIBER_ENGINE", "openai", "TRANSCRIBER_MAX_ATTEMPTS", "3"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--engine", "local", "--retry-schedule", "1s, 1s"}); err != nil {
		t.Fatal(err)
	}
	if c.Engine != "local" || c.MaxAttempts != 3 || len(c.RetrySchedule) != 2 || c.RetrySchedule[1] != time.Second {
		t.Errorf("config = %+v", c)
	}
	if fs.Lookup("openai-api-key") != nil {
		t.Error("secrets must not be flags: they would show in process lists")
	}
}

// Scenario: An engine's settings come from its registration
func TestEngineSettingsComeFromTheRegistry(t *testing.T) {
	c, err := Load(env("OPENAI_MODEL", "large-v3", "OPENAI_MAX_DURATION", "10m"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--openai-model", "small"}); err != nil {
		t.Fatal(err)
	}
	if oa := c.EngineSettings[openai.Name].(*openai.Config); oa.Model != "small" || oa.MaxDuration != 10*time.Minute {
		t.Errorf("openai settings = %+v; want the flag's model and the variable's duration", *oa)
	}
	// Every engine's variables are settings, with the flag and default
	// their registration declares.
	docs := map[string][4]string{}
	for _, s := range Settings() {
		docs[s[0]] = s
	}
	for _, v := range builtin.Engines.Vars() {
		flagName := ""
		if v.Flag != "" {
			flagName = "--" + v.Flag
		}
		if got, want := docs[v.Env], [4]string{v.Env, flagName, v.Default, v.Usage}; got != want {
			t.Errorf("setting %s = %q; want %q", v.Env, got, want)
		}
		if v.Flag == "" {
			continue
		}
		if f := fs.Lookup(v.Flag); f == nil || !strings.Contains(f.Usage, v.Env) {
			t.Errorf("flag --%s = %+v; want one that names %s", v.Flag, f, v.Env)
		}
	}
	if !slices.Equal(Engines, []string{"local", "openai", "speechkit", "assemblyai", "nats"}) {
		t.Errorf("engines = %v; want local, openai, speechkit, assemblyai, nats", Engines)
	}
}

func TestInvalidSettingsAreExplained(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"bad schedule", []string{"TRANSCRIBER_RETRY_SCHEDULE", "soon"}, "TRANSCRIBER_RETRY_SCHEDULE"},
		{"negative wait", []string{"TRANSCRIBER_RETRY_SCHEDULE", "1s,-1s"}, "positive"},
		{"attempts not a number", []string{"TRANSCRIBER_MAX_ATTEMPTS", "many"}, "TRANSCRIBER_MAX_ATTEMPTS"},
		{"zero attempts", []string{"TRANSCRIBER_MAX_ATTEMPTS", "0"}, "at least 1"},
		{"unknown engine", []string{"TRANSCRIBER_ENGINE", "whisperx"}, "choose one of local, openai, speechkit, assemblyai"},
		{"openai URL", []string{"TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", "api.openai.com"}, "OPENAI_BASE_URL"},
		{"http addr", []string{"TRANSCRIBER_HTTP_ADDR", "8080"}, "TRANSCRIBER_HTTP_ADDR"},
		{"log format", []string{"TRANSCRIBER_LOG_FORMAT", "xml"}, "text or json"},
		{"assemblyai without key", []string{"TRANSCRIBER_ENGINE", "assemblyai"}, "ASSEMBLYAI_API_KEY"},
		{"allowed users", []string{"TELEGRAM_ALLOWED_USERS", "alice"}, "neither a numeric user id nor an @username"},
		{"speechkit without credentials", []string{"TRANSCRIBER_ENGINE", "speechkit"}, "SPEECHKIT_API_KEY or SPEECHKIT_IAM_TOKEN"},
		{"speechkit with both credentials", []string{"SPEECHKIT_API_KEY", "k", "SPEECHKIT_IAM_TOKEN", "t"}, "not both"},
		{"route not language=engine", []string{"TRANSCRIBER_ENGINE_ROUTES", "ru"}, "language=engine"},
		{"route to unknown engine", []string{"TRANSCRIBER_ENGINE_ROUTES", "ru=yandex"}, "not an engine"},
		{"language routed twice", []string{"TRANSCRIBER_ENGINE_ROUTES", "ru=speechkit,RU=openai"}, "routed twice"},
		{"unknown fallback", []string{"TRANSCRIBER_FALLBACK_ENGINE", "whisperx"}, "TRANSCRIBER_FALLBACK_ENGINE"},
		{"zero concurrency", []string{"TRANSCRIBER_ENGINE_CONCURRENCY", "0"}, "at least 1"},
		{"tiny upload limit", []string{"OPENAI_MAX_UPLOAD_BYTES", "1000"}, "too small"},
		{"tiny chunks", []string{"TRANSCRIBER_CHUNK_DURATION", "5s"}, "at least 30s"},
		{"temporal on every address", []string{"TRANSCRIBER_TEMPORAL_HOST", "0.0.0.0"}, "one IP address of this machine"},
		{"temporal host not an address", []string{"TRANSCRIBER_TEMPORAL_HOST", "server.local"}, "TRANSCRIBER_TEMPORAL_HOST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env...))
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v; want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestWebUICanBeTurnedOff(t *testing.T) {
	c, err := Load(env("TRANSCRIBER_UI_ADDR", "off"))
	if err != nil || c.UIAddr != "" {
		t.Errorf("UIAddr = %q, %v; want empty", c.UIAddr, err)
	}
}

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Scenario: The README documents every registered engine's settings
func TestREADMEListsEveryEngineSetting(t *testing.T) {
	table := readme(t)
	for _, v := range builtin.Engines.Vars() {
		if !strings.Contains(table, "\n| `"+v.Env+"` |") {
			t.Errorf("README's configuration table lacks a row for %s", v.Env)
		}
	}
}

// The README's configuration table lists every setting with its default.
func TestREADMEListsEverySetting(t *testing.T) {
	readme := []byte(readme(t))
	for _, s := range Settings() {
		def := "unset"
		if s[2] != "" {
			def = "`" + s[2] + "`"
		}
		// The settings table has a row per setting with its flag, default
		// and meaning; other tables (the compose file's) may name the same
		// variable with other words.
		row := "| `" + s[0] + "` |"
		var found []string
		for _, line := range strings.Split(string(readme), "\n") {
			if strings.HasPrefix(line, row) {
				found = append(found, line)
			}
		}
		if len(found) == 0 {
			t.Errorf("README lacks a row for %s", s[0])
			continue
		}
		if !slices.ContainsFunc(found, func(line string) bool {
			return strings.Contains(line, def) && strings.Contains(line, s[3])
		}) {
			t.Errorf("README row for %s is out of date:\n%s\nwant default %s and %q", s[0], strings.Join(found, "\n"), def, s[3])
		}
	}
}

// Scenario: A routing rule picks the engine by language, with a fallback
func TestRoute(t *testing.T) {
	c, err := Load(env("TRANSCRIBER_ENGINE", "openai", "TRANSCRIBER_ENGINE_ROUTES", "ru=speechkit, uk=speechkit",
		"TRANSCRIBER_FALLBACK_ENGINE", "local"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ language, engine, fallback string }{
		{"ru", "speechkit", "local"},
		{"ru-RU", "speechkit", "local"},
		{"UK", "speechkit", "local"},
		{"en", "openai", "local"},
		{"", "openai", "local"},
	} {
		if e, f := c.Route(tc.language); e != tc.engine || f != tc.fallback {
			t.Errorf("Route(%q) = %s, %s; want %s, %s", tc.language, e, f, tc.engine, tc.fallback)
		}
	}
	c.FallbackEngine = "openai"
	if e, f := c.Route("en"); e != "openai" || f != "" {
		t.Errorf("Route(en) = %s, %s; an engine is never its own fallback", e, f)
	}
}

func TestIsSettingFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"engine", true},
		{"temporal-address", true},
		{"telegram-api-endpoint", true},
		{"format", false}, // transcribe's own
		{"", false},       // what secrets have
	} {
		if got := IsSettingFlag(tc.name); got != tc.want {
			t.Errorf("IsSettingFlag(%q) = %v; want %v", tc.name, got, tc.want)
		}
	}
}
