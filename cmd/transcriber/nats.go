package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	natsengine "github.com/transcriber/transcriber/internal/engine/nats"
	"github.com/transcriber/transcriber/internal/engine/nats/natsserver"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/workflows"
)

// natsSettings are the nats engine's settings inside cfg, which the
// wiring completes before the engines are built.
func natsSettings(cfg config.Config) *natsengine.Config {
	return cfg.EngineSettings[natsengine.Name].(*natsengine.Config)
}

// natsWanted reports whether a role deals with the recognition exchange:
// the engine is the default or its broker is named.
func natsWanted(cfg config.Config) bool {
	return cfg.Engine == natsengine.Name || natsSettings(cfg).URL != ""
}

// prepareNats completes the engine's settings: the audio URLs' base and
// secret, and for "up" without NATS_URL, a NATS server of its own with its
// store in the data directory. stop ends that server.
func prepareNats(cfg config.Config, embed, needBroker bool, logger *slog.Logger) (stop func(), err error) {
	stop = func() {}
	if !natsWanted(cfg) {
		return stop, nil
	}
	nc := natsSettings(cfg)
	if nc.AudioBaseURL == "" {
		nc.AudioBaseURL = "http://" + cfg.HTTPAddr
	}
	if nc.AudioSecret == "" {
		if nc.AudioSecret, err = keptSecret(filepath.Join(cfg.DataDir, "nats-audio-secret")); err != nil {
			return stop, fmt.Errorf("TRANSCRIBER_NATS_AUDIO_SECRET unset and none kept in the data directory: %w", err)
		}
	}
	if nc.URL != "" || (!embed && !needBroker) {
		return stop, nil
	}
	if !embed {
		return stop, errors.New("TRANSCRIBER_ENGINE=nats needs NATS_URL here; only transcriber up embeds a NATS server")
	}
	srv, err := natsserver.Start(nc.EmbedAddr, filepath.Join(cfg.DataDir, "nats"), logger)
	if err != nil {
		return stop, err
	}
	nc.URL = srv.ClientURL()
	logger.Info("embedded nats server is running", "nats", nc.URL, "store", filepath.Join(cfg.DataDir, "nats"))
	return srv.Stop, nil
}

// keptSecret reads the secret kept at path, making one the first time, so
// that the roles of one machine sign and check the same URLs across
// restarts.
func keptSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	secret := hex.EncodeToString(buf)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	// O_EXCL: of two roles starting at once, the second reads the first's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		b, rerr := os.ReadFile(path)
		if rerr != nil || len(strings.TrimSpace(string(b))) < 16 {
			return "", fmt.Errorf("%s holds no usable secret; remove it", path)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		_ = f.Close() // the write's error is the news
		return "", err
	}
	return secret, f.Close()
}

// natsAudioRoute serves the signed audio URLs beside the rest of the HTTP
// server, when the role deals with the exchange.
func natsAudioRoute(cfg config.Config, h http.Handler, blobs blob.Store, logger *slog.Logger) http.Handler {
	nc := natsSettings(cfg)
	if !natsWanted(cfg) || nc.AudioSecret == "" {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle(natsengine.AudioPath, natsengine.AudioHandler(nc.AudioSecret, blobs, logger))
	mux.Handle("/", h)
	return mux
}

// natsInbox is the inbox of a worker with the engine; nil when it has not.
func natsInbox(cfg config.Config, jobs *jobctl.Service, logger *slog.Logger) (run func(ctx context.Context) error, closeConn func(), err error) {
	nc := natsSettings(cfg)
	if nc.URL == "" {
		return nil, func() {}, nil
	}
	conn, err := natsengine.Connect(*nc, "transcriber inbox")
	if err != nil {
		return nil, func() {}, err
	}
	x, err := natsengine.NewExchange(conn)
	if err != nil {
		conn.Close()
		return nil, func() {}, err
	}
	in := &natsengine.Inbox{X: x, Jobs: inboxJobs{jobs}, Logger: logger.With("component", "recognition inbox")}
	return in.Run, conn.Close, nil
}

// inboxJobs lets the inbox find and wake jobs through the one door.
type inboxJobs struct{ jobs *jobctl.Service }

func (j inboxJobs) Lookup(ctx context.Context, id string) (natsengine.Job, error) {
	st, err := j.jobs.Status(ctx, id)
	if errors.Is(err, jobctl.ErrNotFound) {
		return natsengine.Job{}, natsengine.ErrUnknownJob
	}
	if err != nil {
		return natsengine.Job{}, err
	}
	return natsengine.Job{State: string(st.State), Settled: st.State.Settled(),
		OperationID: st.OperationID, Deadline: st.OperationDeadline}, nil
}

func (j inboxJobs) Wake(ctx context.Context, id, op, status string) error {
	return j.jobs.NotifyEngineCallback(ctx, id, workflows.EngineCallback{OperationID: op, Status: status})
}
