package config

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
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
		c.TemporalPort != 7233 || c.TemporalNamespace != "default" || c.DataDir != "./data" || c.OpenAIModel != "whisper-1" {
		t.Errorf("defaults = %+v", c)
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
		{"unknown engine", []string{"TRANSCRIBER_ENGINE", "whisperx"}, "choose one of local, openai, assemblyai"},
		{"openai URL", []string{"TRANSCRIBER_ENGINE", "openai", "OPENAI_BASE_URL", "api.openai.com"}, "OPENAI_BASE_URL"},
		{"http addr", []string{"TRANSCRIBER_HTTP_ADDR", "8080"}, "TRANSCRIBER_HTTP_ADDR"},
		{"log format", []string{"TRANSCRIBER_LOG_FORMAT", "xml"}, "text or json"},
		{"assemblyai without key", []string{"TRANSCRIBER_ENGINE", "assemblyai"}, "ASSEMBLYAI_API_KEY"},
		{"allowed users", []string{"TELEGRAM_ALLOWED_USERS", "alice"}, "neither a numeric user id nor an @username"},
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

// The README's configuration table lists every setting with its default.
func TestREADMEListsEverySetting(t *testing.T) {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readme, _ := io.ReadAll(f)
	for _, s := range Settings() {
		def := "unset"
		if s[2] != "" {
			def = "`" + s[2] + "`"
		}
		row := "| `" + s[0] + "` |"
		i := strings.Index(string(readme), row)
		if i < 0 {
			t.Errorf("README lacks a row for %s", s[0])
			continue
		}
		line := string(readme[i:])
		line = line[:strings.IndexByte(line, '\n')]
		if !strings.Contains(line, def) || !strings.Contains(line, s[3]) {
			t.Errorf("README row for %s is out of date:\n%s\nwant default %s and %q", s[0], line, def, s[3])
		}
	}
}
