package builtin_test

import (
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/builtin"
)

func env(pairs ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) string { return m[k] }
}

// Scenario: Each built-in engine declares its abilities
func TestBuiltinEnginesAndTheirAbilities(t *testing.T) {
	cfg, err := config.Load(env())
	if err != nil {
		t.Fatal(err)
	}
	built, err := builtin.Engines.Build(cfg.EngineSettings, cfg.Engine)
	_, sphinxErr := exec.LookPath("pocketsphinx_continuous")
	switch {
	case err != nil && sphinxErr == nil:
		t.Fatal(err)
	case err != nil:
		t.Skipf("pocketsphinx is not installed (scripts/install-deps.sh): %v", err)
	}
	// Without credentials only the engines that need none are there.
	if got := keys(built); !slices.Equal(got, []string{"local", "openai"}) {
		t.Errorf("engines without credentials = %v; want local and openai", got)
	}
	if got := builtin.Engines.Callbacks(cfg.EngineSettings); len(got) != 0 {
		t.Errorf("callbacks without a secret = %v; want none", got)
	}
	if !slices.Equal(languages(built["local"]), []string{"en"}) || languages(built["openai"]) != nil {
		t.Errorf("languages: local %v, openai %v; want English alone, and any", languages(built["local"]), languages(built["openai"]))
	}
	if l, ok := built["openai"].(engine.Limiter); !ok || l.Limits().MaxBytes != 25_000_000 {
		t.Error("openai does not limit requests to OPENAI_MAX_UPLOAD_BYTES")
	}

	cfg, err = config.Load(env("SPEECHKIT_API_KEY", "sk", "ASSEMBLYAI_API_KEY", "aai",
		"ASSEMBLYAI_POLL_INTERVAL", "7s", "ASSEMBLYAI_WEBHOOK_SECRET", "s"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if built, err = builtin.Engines.Build(cfg.EngineSettings, cfg.Engine); err != nil {
		t.Fatal(err)
	}
	if got := keys(built); !slices.Equal(got, []string{"assemblyai", "local", "openai", "speechkit"}) {
		t.Errorf("engines with credentials = %v; want all four", got)
	}
	sk := built["speechkit"]
	if p, ok := sk.(engine.Poller); !ok || p.PollInterval() != 15*time.Second {
		t.Error("speechkit does not poll every SPEECHKIT_POLL_INTERVAL (15s)")
	}
	if _, ok := sk.(engine.FirstChecker); !ok {
		t.Error("speechkit does not wait for its first check")
	}
	if _, ok := sk.(engine.Limiter); !ok {
		t.Error("speechkit does not declare its limits")
	}
	if p, ok := built["assemblyai"].(engine.Poller); !ok || p.PollInterval() != 7*time.Second {
		t.Error("assemblyai does not poll every ASSEMBLYAI_POLL_INTERVAL")
	}
	if got := keys(builtin.Engines.Callbacks(cfg.EngineSettings)); !slices.Equal(got, []string{"assemblyai"}) {
		t.Errorf("callbacks = %v; want assemblyai's, turned on by its secret", got)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func languages(e engine.Engine) []string {
	if l, ok := e.(engine.Linguist); ok {
		return l.Languages()
	}
	return nil
}
