package main

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/engine/openai"
	"github.com/transcriber/transcriber/internal/httpapi"
	"github.com/transcriber/transcriber/internal/jobctl"
)

func runAPI(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return serve(ctx, args, env, stderr, role{name: "api", mode: dialLocal, api: true}, `Usage: transcriber api [flags]

Serves the HTTP job API alone against the Temporal server at
TEMPORAL_ADDRESS (default: the "transcriber up" on this machine), on
$TRANSCRIBER_HTTP_ADDR with /healthz, /readyz and /metrics: POST /v1/jobs,
GET /v1/jobs/{id}, its transcript, revive and cancel, and the
OpenAI-compatible POST /v1/audio/transcriptions and translations and
GET /v1/models, and the web page at / that people sign in to with their
account's token. Clients authenticate with a bearer token from
TRANSCRIBER_API_TOKENS; without one the job endpoints are off. Uploads are
stored under TRANSCRIBER_DATA_DIR, which the workers must see too. Workers
do the jobs it starts.`)
}

// newAPI builds the job API of a role that serves one, and says in the log
// whether it is on and, when it is not, how to turn it on. Tokens are
// never logged, only how many there are. webUI is the address of the
// Temporal Web UI when this process knows it (it embeds it), for the page
// to link jobs to.
func newAPI(cfg config.Config, jobs *jobctl.Service, blobs blob.Store, webUI string, logger *slog.Logger) (*httpapi.API, error) {
	jobLink := ""
	if webUI != "" {
		jobLink = webUI + "/namespaces/" + url.PathEscape(cfg.TemporalNamespace) + "/workflows/"
	}
	api, err := httpapi.NewAPI(httpapi.APIOptions{
		Tokens:               cfg.APITokens,
		Admins:               cfg.Admins,
		Jobs:                 jobs,
		Blobs:                blobs,
		SpoolDir:             filepath.Join(cfg.DataDir, "spool"),
		MaxUploadBytes:       cfg.MaxUploadBytes,
		Wait:                 cfg.APIWait,
		Engines:              config.Engines,
		Translators:          translators(config.Engines),
		Engine:               func(named, language string) (string, string) { return jobEngines(cfg, named, language) },
		Policy:               policyFrom(cfg),
		Webhooks:             cfg.WebhookSecret != "",
		WebhookAllowLoopback: cfg.WebhookAllowLoopback,
		WebUIJobURL:          jobLink,
		Logger:               logger,
	})
	if err != nil {
		return nil, err
	}
	if !api.Enabled() {
		logger.Info("the job API is off: set TRANSCRIBER_API_TOKENS to one or more comma-separated bearer tokens to serve /v1/jobs and /v1/audio/transcriptions")
	} else {
		logger.Info("the job API is on", "accounts", len(cfg.APITokens), "admins", len(cfg.Admins), "max_upload_bytes", cfg.MaxUploadBytes,
			"webhooks", cfg.WebhookSecret != "")
	}
	return api, nil
}

// translators are the engines that translate into English: the
// OpenAI-compatible engine forwards to its server's translations endpoint;
// the others recognise speech in the language it was spoken in.
func translators(engines []string) []string {
	if slices.Contains(engines, openai.Name) {
		return []string{openai.Name}
	}
	return nil
}

// newNotifier is the webhook step of a worker; without a secret it sends
// nothing, and the API refuses webhook URLs.
func newNotifier(cfg config.Config) *activities.Notifier {
	return &activities.Notifier{Secret: []byte(cfg.WebhookSecret), AllowLoopback: cfg.WebhookAllowLoopback}
}
