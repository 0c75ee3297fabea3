package main

import (
	"context"
	"log/slog"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/telegram"
	"github.com/transcriber/transcriber/internal/vault"
	"github.com/transcriber/transcriber/workflows"
)

// intake is one way recordings come in, declared once: what a worker needs
// for its jobs' steps (fetching a recording from the intake's service,
// replying to the sender) and the loop that takes recordings in and starts
// their jobs. The command line and the HTTP API start jobs from their own
// commands and need no entry; an intake with a service of its own adds one
// line to intakes.
type intake struct {
	source job.Source
	// configured reports whether this process has what the intake needs;
	// needs says what that is, for a role that cannot run without it.
	configured func(cfg config.Config) bool
	needs      string
	// steps builds the worker's side of the intake's jobs; either may be
	// nil when the intake needs no such step.
	steps func(cfg config.Config) (activities.Fetcher, activities.Replier, error)
	// loop builds the intake itself, which runs until ctx ends.
	loop func(cfg config.Config, d intakeDeps) (run func(ctx context.Context) error, err error)
}

// intakeDeps are what a running intake gets from its process.
type intakeDeps struct {
	jobs   *jobctl.Service
	blobs  blob.Store
	logger *slog.Logger
	// choices are what the intake's jobs name themselves; the rest is
	// left to the service's workers.
	choices choices
}

var intakes = []intake{telegramIntake, vaultIntake}

var telegramIntake = intake{
	source:     job.SourceTelegram,
	configured: func(cfg config.Config) bool { return cfg.TelegramToken != "" },
	needs:      "TELEGRAM_BOT_TOKEN (from @BotFather)",
	steps: func(cfg config.Config) (activities.Fetcher, activities.Replier, error) {
		c, err := telegram.NewClient(cfg.TelegramToken, cfg.TelegramEndpoint, nil)
		if err != nil {
			return nil, nil, err
		}
		m := telegram.NewMessenger(c)
		return m, m, nil
	},
	loop: func(cfg config.Config, d intakeDeps) (func(context.Context) error, error) {
		c, err := telegram.NewClient(cfg.TelegramToken, cfg.TelegramEndpoint, nil)
		if err != nil {
			return nil, err
		}
		bc := telegram.BotConfig{
			Allowed: cfg.TelegramAllowed, Engine: cfg.Engine, Policy: policyFrom(cfg), MaxDuration: cfg.MaxDuration,
			Route: cfg.Route,
		}
		if !d.choices.engine {
			bc.Engine, bc.Route = "", nil
		}
		if !d.choices.policy {
			bc.Policy = workflows.Policy{}
		}
		bot := telegram.NewBot(c, d.jobs, d.blobs, bc, d.logger)
		return bot.Run, nil
	},
}

// intakeSteps are the fetchers and repliers of the configured intakes, by
// the source of the jobs they serve.
func intakeSteps(cfg config.Config) (map[job.Source]activities.Fetcher, map[job.Source]activities.Replier, error) {
	fetchers, repliers := map[job.Source]activities.Fetcher{}, map[job.Source]activities.Replier{}
	for _, in := range intakes {
		if !in.configured(cfg) || in.steps == nil {
			continue
		}
		f, r, err := in.steps(cfg)
		if err != nil {
			return nil, nil, err
		}
		if f != nil {
			fetchers[in.source] = f
		}
		if r != nil {
			repliers[in.source] = r
		}
	}
	return fetchers, repliers, nil
}

var vaultIntake = intake{
	source:     job.SourceVault,
	configured: func(cfg config.Config) bool { return cfg.VaultDir != "" },
	needs:      "TRANSCRIBER_VAULT_DIR (the notes vault)",
	// The vault's own steps, writing notes, follow each job's state from
	// the intake: a note catches up whenever this machine runs, so the
	// jobs need no step on the vault's machine.
	loop: func(cfg config.Config, d intakeDeps) (func(context.Context) error, error) {
		device, err := vault.Device(cfg.Device, cfg.DataDir)
		if err != nil {
			return nil, err
		}
		engine, fallback := jobEngines(cfg, "", cfg.VaultLanguage)
		if !d.choices.engine {
			engine, fallback = "", ""
		}
		policy := policyFrom(cfg)
		if !d.choices.policy {
			policy = workflows.Policy{}
		}
		in, err := vault.New(vault.Config{
			Dir: cfg.VaultDir, SourceDir: cfg.VaultSource, InboxDir: cfg.VaultInbox, Device: device,
			DataDir: cfg.DataDir, Engine: engine, Fallback: fallback, Language: cfg.VaultLanguage,
			Policy: policy, Concurrency: cfg.VaultConcurrency,
		}, d.jobs, d.blobs, d.logger)
		if err != nil {
			return nil, err
		}
		return in.Run, nil
	},
}
