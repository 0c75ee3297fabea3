package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/vault"
)

func runVault(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "take-over":
			return runVaultTakeOver(args[1:], env, stdout, stderr)
		case "retry":
			return runVaultRetry(args[1:], env, stdout, stderr)
		}
	}
	return serve(ctx, args, env, stderr, role{name: "vault", mode: dialLocal, intakes: true, only: job.SourceVault, vaultArg: true,
		help: vaultSettings},
		`Usage: transcriber vault [flags] DIR
       transcriber vault take-over [flags]
       transcriber vault retry [flags] NOTE

Transcribes the voice recordings of the notes vault DIR (an Obsidian vault)
into their notes, through the Temporal server at TEMPORAL_ADDRESS (default:
the "transcriber up" on this machine, which can run the vault itself with
TRANSCRIBER_VAULT_DIR). An audio file put into $TRANSCRIBER_VAULT_SOURCE
gets a note in $TRANSCRIBER_VAULT_INBOX; the note's voice-status follows its
job (saved, sent, retry, failed, inserted) and the transcript is written
under the recording. Only this device's recordings are sent (its id is
TRANSCRIBER_DEVICE, else one kept in the data directory). Workers elsewhere
need the recordings: give every role one TRANSCRIBER_BLOB_URL (S3) when
they run on other machines. The HTTP server for /healthz and /metrics
listens on TRANSCRIBER_HTTP_ADDR: give it another port when up runs here.

  take-over    give this device every other device's recording that waits
               (saved, retry, or sent more than 10 minutes ago) and send
               them now
  retry NOTE   send a failed recording, or one waiting for a retry, again
               with its attempts counted from zero (NOTE is the note's path
               or its voice-id)`)
}

// vaultSettings are the shared settings the vault commands' help shows.
var vaultSettings = []string{"vault-dir", "vault-source", "vault-inbox", "vault-language", "vault-concurrency", "device",
	"data-dir", "engine", "temporal-address", "http-addr", "blob-url"}

// vaultCommand loads the settings of a vault command that edits notes.
func vaultCommand(name, usage string, args []string, env func(string) string, stderr io.Writer) (config.Config, []string, error) {
	cfg, err := config.Load(env)
	if err != nil {
		return cfg, nil, &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet("vault "+name, usage, stderr)
	cfg.RegisterFlags(fs)
	focusHelp(fs, usage, stderr, vaultSettings...)
	if err := loadConfig(fs, &cfg, args); err != nil {
		return cfg, nil, err
	}
	if cfg.VaultDir == "" {
		return cfg, nil, usageError("vault %s needs the vault: set TRANSCRIBER_VAULT_DIR or --vault-dir", name)
	}
	return cfg, fs.Args(), nil
}

func runVaultTakeOver(args []string, env func(string) string, stdout, stderr io.Writer) error {
	cfg, rest, err := vaultCommand("take-over", `Usage: transcriber vault take-over [flags]

Gives this device every recording of another device that waits to be sent
(saved, retry, or sent more than 10 minutes ago) and makes it due now; the
vault intake of this device (up or vault) sends them. Failed, inserted and
recently sent recordings are left alone.`, args, env, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("vault take-over takes no arguments, got %q", rest)
	}
	device, err := vault.Device(cfg.Device, cfg.DataDir)
	if err != nil {
		return err
	}
	v, err := vault.Open(cfg.VaultDir, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	taken, err := v.TakeOver(device, time.Now())
	for _, n := range taken {
		fmt.Fprintf(stdout, "taken over: %s\n", n)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d recording(s) taken over by device %s; its vault intake sends them now\n", len(taken), device)
	return nil
}

func runVaultRetry(args []string, env func(string) string, stdout, stderr io.Writer) error {
	cfg, rest, err := vaultCommand("retry", `Usage: transcriber vault retry [flags] NOTE

Sends a failed recording, or one waiting for its next attempt, again with
its attempts counted from zero; NOTE is the note's path (from here or from
the vault's top) or its voice-id. A recording in any other state is left
as it is.`, args, env, stderr)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageError("vault retry takes one note, got %q", rest)
	}
	v, err := vault.Open(cfg.VaultDir, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	n, err := v.Retry(rest[0])
	if errors.Is(err, vault.ErrNotRetryable) {
		return &exitError{code: 1, msg: err.Error()}
	}
	if err != nil {
		return err
	}
	device, err := vault.Device(cfg.Device, cfg.DataDir)
	if err != nil {
		return err
	}
	if n.Device != device {
		fmt.Fprintf(stdout, "%s is saved again; it belongs to device %s, whose vault intake sends it (vault take-over sends it from here)\n", n.ID, n.Device)
		return nil
	}
	fmt.Fprintf(stdout, "%s is saved again, attempts from zero; the vault intake sends it now\n", n.ID)
	return nil
}
