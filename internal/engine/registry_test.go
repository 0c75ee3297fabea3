package engine

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
)

// english is the smallest engine: it answers at once and knows English only.
type english struct{ poll time.Duration }

func (english) Format() audio.Format { return audio.WAV16kMono }
func (english) Submit(context.Context, Request) (Submission, error) {
	return Submission{Result: &Result{Text: "hello"}}, nil
}
func (english) Check(context.Context, string) (Submission, error) { return Submission{}, nil }
func (english) Languages() []string                               { return []string{"en"} }
func (e english) PollInterval() time.Duration                     { return e.poll }

var (
	_ Engine   = english{}
	_ Linguist = english{}
	_ Poller   = english{}
)

type testSettings struct {
	Key      string
	Poll     time.Duration
	Secret   string
	Failing  bool
	Language string
}

type receiver struct{ secret string }

func (r receiver) ReadCallback(*http.Request) (Callback, error) { return Callback{}, nil }

func spec(name string, a Availability) Spec[testSettings] {
	return Spec[testSettings]{
		Name: name,
		Settings: []Setting[testSettings]{
			{Env: strings.ToUpper(name) + "_KEY", Usage: "key (environment only)", Set: Text(func(c *testSettings) *string { return &c.Key })},
			{Env: strings.ToUpper(name) + "_POLL", Flag: name + "-poll", Default: "5s", Usage: "poll", Set: Duration(func(c *testSettings) *time.Duration { return &c.Poll })},
		},
		Validate: func(c testSettings, isDefault bool) error {
			if isDefault && c.Key == "" {
				return errors.New("TRANSCRIBER_ENGINE=" + name + " needs a key")
			}
			return nil
		},
		Availability: a,
		Configured:   func(c testSettings) bool { return c.Key != "" },
		New: func(c testSettings) (Engine, error) {
			if c.Failing {
				return nil, errors.New(name + " engine: not installed")
			}
			return english{poll: c.Poll}, nil
		},
		Callbacks: func(c testSettings) CallbackReceiver {
			if c.Secret == "" {
				return nil
			}
			return receiver{c.Secret}
		},
	}
}

func load(t *testing.T, reg Registry, env map[string]string) Settings {
	t.Helper()
	s := reg.NewSettings()
	for _, v := range reg.Vars() {
		val := env[v.Env]
		if val == "" {
			val = v.Default
		}
		if err := v.Set(s, val); err != nil {
			t.Fatalf("%s: %v", v.Env, err)
		}
	}
	return s
}

// Scenario: A registration decides where its engine is available
func TestRegistryBuildsWhatEachAvailabilityAllows(t *testing.T) {
	reg := Registry{Register(spec("always", Always)), Register(spec("installed", WhenInstalled)), Register(spec("keyed", WhenConfigured))}
	if got := reg.Names(); !slices.Equal(got, []string{"always", "installed", "keyed"}) {
		t.Errorf("names = %v; want the registration order", got)
	}
	s := load(t, reg, map[string]string{"ALWAYS_POLL": "1m"})
	s["installed"].(*testSettings).Failing = true
	built, err := reg.Build(s, "always")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := built["always"]; !ok || len(built) != 1 {
		t.Errorf("built %v; want only the engine that is always there: installed is missing, keyed has no key", built)
	}
	if p := built["always"].(Poller).PollInterval(); p != time.Minute {
		t.Errorf("poll interval = %v; want the setting's 1m", p)
	}
	// The default engine's failure says what is missing.
	if _, err := reg.Build(s, "installed"); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("build with a missing default = %v; want its error", err)
	}
	s["always"].(*testSettings).Failing = true
	if _, err := reg.Build(s, "keyed"); err == nil {
		t.Error("an engine that is always there failed to build, and the worker started anyway")
	}

	s = load(t, reg, map[string]string{"KEYED_KEY": " k "})
	if got := s["keyed"].(*testSettings).Key; got != "k" {
		t.Errorf("key = %q; want it without spaces", got)
	}
	built, err = reg.Build(s, "always")
	if _, ok := built["keyed"]; err != nil || !ok {
		t.Errorf("built %v, %v; want the configured engine too", built, err)
	}
	if err := reg.Validate(load(t, reg, nil), "keyed"); err == nil || !strings.Contains(err.Error(), "TRANSCRIBER_ENGINE=keyed needs a key") {
		t.Errorf("validate = %v; want the default engine's own message", err)
	}
	if err := reg.Validate(load(t, reg, nil), "elsewhere"); err != nil {
		t.Errorf("validate = %v; an engine that is not the default needs no key", err)
	}
	s = load(t, reg, nil)
	s["keyed"].(*testSettings).Secret = "x"
	if got := reg.Callbacks(s); len(got) != 1 || got["keyed"] == nil {
		t.Errorf("callbacks = %v; want the one engine whose settings turn them on", got)
	}
}

func TestSupports(t *testing.T) {
	for _, tc := range []struct {
		e    any
		lang string
		want bool
	}{
		{english{}, "", true}, {english{}, "en", true}, {english{}, "en-US", true}, {english{}, "EN_gb", true},
		{english{}, "ru", false}, {english{}, "english", false},
		{struct{}{}, "ru", true},
	} {
		if got := Supports(tc.e, tc.lang); got != tc.want {
			t.Errorf("Supports(%T, %q) = %v; want %v", tc.e, tc.lang, got, tc.want)
		}
	}
}
