package activities

import (
	"context"
	"time"
)

// Defaults are what the service chooses for a job whose intake left the
// choice to it: a command line sent to a running service with no engine
// or retry settings of its own gets the service's, not built-in ones.
type Defaults struct {
	Engine   string `json:"engine"`
	Fallback string `json:"fallback,omitempty"`
	// The retry policy; zero values are the job's built-in defaults.
	Backoff          []time.Duration `json:"backoff,omitempty"`
	MaxAttempts      int             `json:"max_attempts,omitempty"`
	ParkFor          time.Duration   `json:"park_for,omitempty"`
	Retain           time.Duration   `json:"retain,omitempty"`
	OperationTimeout time.Duration   `json:"operation_timeout,omitempty"`
}

// ServiceDefaults tells a job the choices of the service that runs it. It
// runs as a local activity on the worker that runs the job, so the answer
// is that worker's configuration, read once and kept in the history.
type ServiceDefaults struct {
	// Route picks the engine for a recording's language (empty: unknown).
	Route func(language string) (engine, fallback string)
	// Policy is the service's retry policy; its Engine and Fallback are
	// unused.
	Policy Defaults
}

// Choose returns the service's engine for language and its retry policy.
func (s *ServiceDefaults) Choose(_ context.Context, language string) (Defaults, error) {
	d := s.Policy
	d.Engine, d.Fallback = s.Route(language)
	return d, nil
}
