package local

import "github.com/transcriber/transcriber/internal/engine"

// Registration declares the engine to the service. It is there wherever
// pocketsphinx is installed, so that a job may name it even where another
// engine is the default.
var Registration = engine.Register(engine.Spec[Config]{
	Name:    Name,
	Summary: "offline pocketsphinx",
	Settings: []engine.Setting[Config]{
		// A directory name is taken as given: spaces are legal in it.
		{Env: "POCKETSPHINX_MODEL_DIR", Flag: "pocketsphinx-model-dir", Default: DefaultModelDir,
			Usage: "pocketsphinx model directory of the local engine",
			Set:   func(c *Config, v string) error { c.ModelDir = v; return nil }},
	},
	Availability: engine.WhenInstalled,
	New:          func(c Config) (engine.Engine, error) { return New(c) },
})
