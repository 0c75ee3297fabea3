package job

import "time"

// Defaults of a job's persistence, from the recording-lifecycle
// specification: the fifth failure of a step gives up, and a failed or dead
// job waits 30 days for revive. The workflow falls back on them for a job
// started without a policy, and the configuration's defaults are these.
const (
	DefaultMaxAttempts = 5
	DefaultParkFor     = 30 * 24 * time.Hour
)

// DefaultBackoff returns the default waits between attempts of a failing
// step, 30 s, 2 min, 10 min and 30 min; the last repeats. It is a function
// so that no caller can change the default for the others.
func DefaultBackoff() []time.Duration {
	return []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute}
}
