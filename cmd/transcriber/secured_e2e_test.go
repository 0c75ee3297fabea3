package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/devserver"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/internal/testcerts"
	"github.com/transcriber/transcriber/workflows"
)

// startSecuredServer runs an embedded server of this test's own whose
// frontend wants what a secured cluster wants: TLS with conf and, when
// keys are given, an API key.
func startSecuredServer(t *testing.T, conf *tls.Config, keys ...string) string {
	t.Helper()
	srv, err := devserver.Start(devserver.Options{
		Namespace:        "default",
		SearchAttributes: workflows.SearchAttributes(),
		TLS:              conf,
		APIKeys:          keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop secured server: %v", err)
		}
	})
	return srv.FrontendAddr()
}

// Scenario: Roles connect to a cluster that wants mutual TLS
func TestSecuredClusterMutualTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "cluster ca")
	server := ca.Server(t)
	worker := ca.Client(t, "transcriber worker")
	addr := startSecuredServer(t, &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{server.TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	})
	dir := t.TempDir()
	certPath, keyPath := worker.Write(t, dir, "worker")
	caPath := ca.Write(t, dir, "ca")
	paths := []string{"TEMPORAL_ADDRESS", addr, "TRANSCRIBER_DATA_DIR", dir,
		"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_KEY_PATH", keyPath,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH", caPath}
	data := []string{"TEMPORAL_ADDRESS", addr, "TRANSCRIBER_DATA_DIR", dir,
		"TEMPORAL_TLS_CLIENT_CERT_DATA", string(worker.CertPEM), "TEMPORAL_TLS_CLIENT_KEY_DATA", string(worker.KeyPEM),
		"TEMPORAL_TLS_SERVER_CA_CERT_DATA", string(ca.PEM)}

	for name, pairs := range map[string][]string{"paths": paths, "data": data} {
		if r := runCLI(t, env(pairs...), "jobs", "list"); r.code != 0 {
			t.Errorf("jobs list with the %s forms: code %d, stderr:\n%s", name, r.code, r.stderr)
		}
	}

	other := testcerts.NewCA(t, "someone else's ca")
	intruder := other.Client(t, "intruder")
	refused := []struct {
		name string
		env  []string
		want string
	}{
		{"no client certificate", []string{"TEMPORAL_ADDRESS", addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH", caPath},
			"TEMPORAL_TLS_CLIENT_CERT_PATH"},
		{"wrong CA", []string{"TEMPORAL_ADDRESS", addr, "TEMPORAL_TLS_SERVER_CA_CERT_DATA", string(other.PEM),
			"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_KEY_PATH", keyPath}, "TEMPORAL_TLS_SERVER_CA_CERT_PATH"},
		{"certificate of another CA", []string{"TEMPORAL_ADDRESS", addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH", caPath,
			"TEMPORAL_TLS_CLIENT_CERT_DATA", string(intruder.CertPEM), "TEMPORAL_TLS_CLIENT_KEY_DATA", string(intruder.KeyPEM)},
			"a client certificate it trusts"},
		{"plain gRPC", []string{"TEMPORAL_ADDRESS", addr}, "TEMPORAL_TLS"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, env(tc.env...), "jobs", "list")
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("code %d; want a failure that mentions %s, stderr:\n%s", r.code, tc.want, r.stderr)
			}
			t.Logf("stderr: %s", r.stderr)
			if r.took > 20*time.Second {
				t.Errorf("took %v to fail; a refusal should be told at once", r.took)
			}
			if strings.Contains(r.stderr, "PRIVATE KEY") {
				t.Error("stderr holds key material")
			}
		})
	}

	// A worker and a transcribe, both over mutual TLS, do a job end to end.
	if testing.Short() {
		return
	}
	requireSpeechTools(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	stop, _ := startRole(t, env(append(paths, "TRANSCRIBER_HTTP_ADDR", httpAddr)...), httpAddr, "worker")
	defer stop()
	note := testaudio.VoiceNote(t, t.TempDir())
	r := runCLI(t, env(data...), "transcribe", note)
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("transcribe over mutual TLS: code %d, out %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// Scenario: Roles connect to a cluster that wants an API key
func TestSecuredClusterAPIKey(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "cloud ca")
	const key = "tmprl-key-0123456789abcdef"
	addr := startSecuredServer(t, &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{ca.Server(t).TLS(t)},
	}, key)
	base := []string{"TEMPORAL_ADDRESS", addr, "TEMPORAL_TLS_SERVER_CA_CERT_DATA", string(ca.PEM)}

	// The server insists on the key: a command that gets in sent it as
	// the bearer token.
	if r := runCLI(t, env(append(base, "TEMPORAL_API_KEY", key)...), "jobs", "list"); r.code != 0 {
		t.Errorf("jobs list with the key: code %d, stderr:\n%s", r.code, r.stderr)
	}
	// A worker that runs with the key at debug level never logs it.
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	stop, logs := startRole(t, env(append(base, "TEMPORAL_API_KEY", key, "TRANSCRIBER_HTTP_ADDR", httpAddr,
		"TRANSCRIBER_DATA_DIR", t.TempDir(), "TRANSCRIBER_LOG_LEVEL", "debug")...), httpAddr, "worker")
	stop()
	if strings.Contains(logs.String(), key) {
		t.Errorf("the worker's log holds the API key:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "transcriber is running") {
		t.Errorf("the worker did not run:\n%s", logs.String())
	}

	const wrong = "tmprl-key-stolen-or-stale"
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"wrong key", append(base, "TEMPORAL_API_KEY", wrong), "refused TEMPORAL_API_KEY"},
		{"no key", base, "set TEMPORAL_API_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, env(tc.env...), "jobs", "list")
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("code %d; want a failure that says %q, stderr:\n%s", r.code, tc.want, r.stderr)
			}
			if strings.Contains(r.stderr, wrong) || strings.Contains(r.stderr, key) {
				t.Errorf("stderr quotes the key:\n%s", r.stderr)
			}
		})
	}
}

// startRole runs a serving role until the returned stop, once it answers
// /readyz on httpAddr.
func startRole(t *testing.T, getenv func(string) string, httpAddr string, role string) (stop func(), logs *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{role}, getenv, nil, io.Discard, logs) }()
	stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", role, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s", role)
		}
		if t.Failed() {
			t.Logf("%s logs:\n%s", role, logs.String())
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, logs
			}
		}
		select {
		case err := <-done:
			t.Fatalf("%s exited: %v\n%s", role, err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("%s not ready: %v", role, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
