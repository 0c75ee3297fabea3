// Package builtin lists the speech engines this binary has. Adding an
// engine is one package under internal/engine and one line here: its
// settings, validation, construction, routes and documentation follow from
// the registration.
//
// The list is explicit rather than filled by init functions in the engine
// packages: the order is the one users read in messages and --help, no
// package needs a blank import to have the engines, and everything that
// needs them (the configuration, its tests, the wiring in cmd) imports the
// same list.
package builtin

import (
	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/assemblyai"
	"github.com/transcriber/transcriber/internal/engine/local"
	"github.com/transcriber/transcriber/internal/engine/nats"
	"github.com/transcriber/transcriber/internal/engine/openai"
	"github.com/transcriber/transcriber/internal/engine/speechkit"
)

// Engines are the registered engines, the default first.
var Engines = engine.Registry{
	local.Registration,
	openai.Registration,
	speechkit.Registration,
	assemblyai.Registration,
	nats.Registration,
}
