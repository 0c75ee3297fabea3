package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/audio"
)

// Engine is what a registration builds. The activities call it through
// their own Recognizer, which has the same methods; abilities beyond these
// are the optional interfaces below, found by type assertion.
type Engine interface {
	Format() audio.Format
	Submit(ctx context.Context, req Request) (Submission, error)
	Check(ctx context.Context, operationID string) (Submission, error)
}

// Limiter is an engine that refuses audio above a size or a length per
// request; the pipeline cuts longer recordings into chunks that fit.
type Limiter interface {
	Limits() Limits
}

// Poller is an engine whose operations run on the provider's side and are
// checked at a fixed interval; a check that finds one running spends no
// attempt. Engines without it are checked every DefaultPollInterval.
type Poller interface {
	PollInterval() time.Duration
}

// DefaultPollInterval is the wait between checks of an operation of an
// engine that is not a Poller.
const DefaultPollInterval = 10 * time.Second

// FirstChecker is an engine whose operations take a predictable share of
// the audio's length: asking before then only spends quota.
type FirstChecker interface {
	FirstCheck(audio time.Duration) time.Duration
}

// Linguist is an engine that recognises only some languages; an engine
// that is not one takes any language (or refuses one in its own answer).
type Linguist interface {
	// Languages are primary subtags such as "en"; nil is any language.
	Languages() []string
}

// Supports reports whether e recognises language (a BCP 47 tag); an empty
// language is the engine's own choice, which it always has.
func Supports(e any, language string) bool {
	l, ok := e.(Linguist)
	if !ok || language == "" {
		return true
	}
	langs := l.Languages()
	if langs == nil {
		return true
	}
	primary := PrimaryLanguage(language)
	for _, have := range langs {
		if have == primary {
			return true
		}
	}
	return false
}

// Availability says on which workers an engine is built.
type Availability int

const (
	// Always: every worker builds the engine, so a job may name it
	// whatever the worker's default; failing to build it stops the worker.
	Always Availability = iota
	// WhenInstalled: workers build it where its local tools exist; where
	// they do not, it is left out, unless it is the default engine, whose
	// error then says what to install.
	WhenInstalled
	// WhenConfigured: workers build it when Spec.Configured reports its
	// credentials set, and leave it out otherwise.
	WhenConfigured
)

// Setting is one variable of an engine's configuration and its flag,
// declared once so that the environment, the flags, --help and the README
// agree.
type Setting[C any] struct {
	Env string
	// Flag is empty for secrets, which come from the environment only so
	// that they never show in process lists.
	Flag, Default, Usage string
	Set                  func(c *C, v string) error
}

// Spec declares an engine whose settings fill a C.
type Spec[C any] struct {
	// Name is how jobs, routes and TRANSCRIBER_ENGINE refer to the engine.
	Name string
	// Summary says in a few words what the engine is, for the usage of
	// TRANSCRIBER_ENGINE; empty when the name says it.
	Summary  string
	Settings []Setting[C]
	// Validate checks the settings together and says how to fix them;
	// isDefault is whether the engine is TRANSCRIBER_ENGINE, which may need
	// settings that an engine merely available does not. Nil accepts all.
	Validate     func(c C, isDefault bool) error
	Availability Availability
	// Configured, for WhenConfigured engines, reports whether the settings
	// hold what the engine needs to be built.
	Configured func(c C) bool
	// New builds the engine from its settings.
	New func(c C) (Engine, error)
	// Callbacks, when set, gives what checks the engine's calls to
	// /v1/callbacks/{name}, or nil when the settings do not turn them on.
	// It needs no engine: the role that receives the calls may have no
	// worker, and so no credentials for the provider.
	Callbacks func(c C) CallbackReceiver
}

// Registration is one engine as the service sees it, whatever the type of
// its settings. Make one with Register.
type Registration struct {
	name         string
	summary      string
	vars         []Var
	fresh        func() any
	validate     func(s any, isDefault bool) error
	availability Availability
	configured   func(s any) bool
	build        func(s any) (Engine, error)
	callbacks    func(s any) CallbackReceiver
}

// Var is one engine setting with its setter bound to the engine's entry in
// Settings, which must come from the same Registry's NewSettings.
type Var struct {
	Env, Flag, Default, Usage string
	Set                       func(s Settings, v string) error
}

// Settings are the loaded settings of every registered engine, by name.
type Settings map[string]any

// Register turns a Spec into a Registration.
func Register[C any](spec Spec[C]) Registration {
	name := spec.Name
	typed := func(s any) C { return *s.(*C) }
	r := Registration{
		name:         name,
		summary:      spec.Summary,
		fresh:        func() any { return new(C) },
		availability: spec.Availability,
		build:        func(s any) (Engine, error) { return spec.New(typed(s)) },
	}
	for _, st := range spec.Settings {
		set := st.Set
		r.vars = append(r.vars, Var{Env: st.Env, Flag: st.Flag, Default: st.Default, Usage: st.Usage,
			Set: func(s Settings, v string) error { return set(s[name].(*C), v) }})
	}
	if spec.Validate != nil {
		r.validate = func(s any, isDefault bool) error { return spec.Validate(typed(s), isDefault) }
	}
	if spec.Configured != nil {
		r.configured = func(s any) bool { return spec.Configured(typed(s)) }
	}
	if spec.Callbacks != nil {
		r.callbacks = func(s any) CallbackReceiver { return spec.Callbacks(typed(s)) }
	}
	return r
}

// Name is the engine's name.
func (r Registration) Name() string { return r.name }

// Summary says what the engine is; empty when its name says it.
func (r Registration) Summary() string { return r.summary }

// Registry is the engines a binary has, in the order they are listed.
type Registry []Registration

// Names lists the engines in order.
func (reg Registry) Names() []string {
	out := make([]string, len(reg))
	for i, r := range reg {
		out[i] = r.name
	}
	return out
}

// Vars are every engine's settings, engine by engine.
func (reg Registry) Vars() []Var {
	var out []Var
	for _, r := range reg {
		out = append(out, r.vars...)
	}
	return out
}

// NewSettings makes empty settings for every engine, for Vars to fill.
func (reg Registry) NewSettings() Settings {
	s := Settings{}
	for _, r := range reg {
		s[r.name] = r.fresh()
	}
	return s
}

// Validate checks every engine's settings; defaultEngine is
// TRANSCRIBER_ENGINE.
func (reg Registry) Validate(s Settings, defaultEngine string) error {
	var errs []error
	for _, r := range reg {
		if r.validate != nil {
			errs = append(errs, r.validate(s[r.name], r.name == defaultEngine))
		}
	}
	return errors.Join(errs...)
}

// Build makes the engines this worker can run, by name, as each one's
// Availability says.
func (reg Registry) Build(s Settings, defaultEngine string) (map[string]Engine, error) {
	out := map[string]Engine{}
	for _, r := range reg {
		if r.availability == WhenConfigured && (r.configured == nil || !r.configured(s[r.name])) {
			continue
		}
		e, err := r.build(s[r.name])
		if err != nil {
			if r.availability == WhenInstalled && r.name != defaultEngine {
				continue
			}
			// Engines' errors already name them.
			return nil, err
		}
		out[r.name] = e
	}
	return out, nil
}

// Callbacks are the receivers of the engines whose settings turn their
// callbacks on, by name; empty when none does.
func (reg Registry) Callbacks(s Settings) map[string]CallbackReceiver {
	out := map[string]CallbackReceiver{}
	for _, r := range reg {
		if r.callbacks == nil {
			continue
		}
		if c := r.callbacks(s[r.name]); c != nil {
			out[r.name] = c
		}
	}
	return out
}

// Text sets a string field to the value without surrounding spaces, which
// an environment file easily adds.
func Text[C any](field func(c *C) *string) func(c *C, v string) error {
	return func(c *C, v string) error { *field(c) = strings.TrimSpace(v); return nil }
}

// Duration sets a field from a Go duration such as 15s or 10m.
func Duration[C any](field func(c *C) *time.Duration) func(c *C, v string) error {
	return func(c *C, v string) (err error) {
		*field(c), err = time.ParseDuration(strings.TrimSpace(v))
		return err
	}
}

// Bool sets a field from true or false (or 1, 0 and the other spellings
// strconv.ParseBool reads).
func Bool[C any](field func(c *C) *bool) func(c *C, v string) error {
	return func(c *C, v string) (err error) {
		*field(c), err = strconv.ParseBool(strings.TrimSpace(v))
		return err
	}
}

// Bytes sets a field from a whole number of bytes.
func Bytes[C any](field func(c *C) *int64) func(c *C, v string) error {
	return func(c *C, v string) (err error) {
		*field(c), err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return err
	}
}
