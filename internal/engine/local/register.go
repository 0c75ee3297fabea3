package local

import (
	"fmt"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

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
		{Env: "POCKETSPHINX_CHUNK_DURATION", Flag: "pocketsphinx-chunk-duration", Default: DefaultChunkDuration.String(),
			Usage: "longest piece of a recording one pocketsphinx process takes (e.g. 5m); longer recordings are cut in pauses and recognised in parallel, one process per core, and resume after a crash from the pieces done; 0 takes every recording whole",
			Set: func(c *Config, v string) (err error) {
				c.ChunkDuration, err = time.ParseDuration(strings.TrimSpace(v))
				return err
			}},
	},
	Validate: func(c Config, _ bool) error {
		if c.ChunkDuration < 0 || c.ChunkDuration > 0 && c.ChunkDuration < time.Minute {
			return fmt.Errorf("POCKETSPHINX_CHUNK_DURATION is %s; give at least 1m, or 0 to take recordings whole", c.ChunkDuration)
		}
		return nil
	},
	Availability: engine.WhenInstalled,
	New:          func(c Config) (engine.Engine, error) { return New(c) },
})
