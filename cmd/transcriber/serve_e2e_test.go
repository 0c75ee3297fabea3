package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scenario: A busy HTTP port stops start-up before anything runs
func TestBusyHTTPPortStopsStartUp(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, role := range []string{"up", "worker"} {
		// Nothing listens at TEMPORAL_ADDRESS: a role that dialed before
		// binding the port would fail with another error.
		r := runCLI(t, env("TRANSCRIBER_HTTP_ADDR", l.Addr().String(), "TEMPORAL_ADDRESS", "127.0.0.1:1",
			"TRANSCRIBER_DATA_DIR", t.TempDir()), role)
		if r.code == 0 || !strings.Contains(r.stderr, "http server") || !strings.Contains(r.stderr, "address already in use") {
			t.Errorf("%s on a busy port: code %d, stderr:\n%s", role, r.code, r.stderr)
		}
		if r.took > 5*time.Second {
			t.Errorf("%s took %v to refuse a busy port", role, r.took)
		}
	}
}

// Scenario: The first part to fail stops up with its error
func TestUpStopsWhenAPartFails(t *testing.T) {
	t.Parallel()
	telegram := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"ok":false,"error_code":401,"description":"Unauthorized"}`))
	}))
	defer telegram.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := &syncBuffer{}
	start := time.Now()
	err := run(ctx, []string{"up"}, env(
		"TRANSCRIBER_DATA_DIR", t.TempDir(),
		"TRANSCRIBER_HTTP_ADDR", "127.0.0.1:0",
		"TRANSCRIBER_UI_ADDR", "off",
		"TRANSCRIBER_TEMPORAL_PORT", strconv.Itoa(freePort(t)),
		"TELEGRAM_BOT_TOKEN", "123:revoked",
		"TELEGRAM_API_ENDPOINT", telegram.URL,
	), nil, &syncBuffer{}, logs)
	if err == nil || !strings.Contains(err.Error(), "telegram intake") || !strings.Contains(err.Error(), "TELEGRAM_BOT_TOKEN") {
		t.Fatalf("up = %v; want the bot's error\n%s", err, logs.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("up ran until the test's deadline")
	}
	t.Logf("up stopped %v after start with: %v", time.Since(start).Round(time.Millisecond), err)
}

// Scenario: An idle up stops within seconds
func TestIdleUpStopsPromptly(t *testing.T) {
	t.Parallel()
	u := startUp(t, t.TempDir())
	// Nothing runs that the drain timeouts would wait for. The embedded
	// Temporal server's own stop takes up to about five seconds on a busy
	// machine; a drain that waited out the workers' 10 s stop timeout on
	// top of it would show.
	start := time.Now()
	u.stop()
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("up took %v to stop; want a few seconds", took)
	}
	if !strings.Contains(u.logs.String(), "stopping: letting running steps finish") {
		t.Errorf("up did not say it was stopping:\n%s", u.logs.String())
	}
}
