package main

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// Scenario: The server listens on the address TRANSCRIBER_TEMPORAL_HOST names
func TestServerListensOnConfiguredHost(t *testing.T) {
	// 127.0.0.2 is this machine too, but not the default address: a
	// frontend there and not on 127.0.0.1 shows the setting is used.
	const host = "127.0.0.2"
	if ln, err := net.Listen("tcp", host+":0"); err != nil {
		t.Skipf("cannot listen on %s here: %v", host, err)
	} else {
		ln.Close()
	}
	port := strconv.Itoa(freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() {
		done <- run(ctx, []string{"server"}, env("TRANSCRIBER_DATA_DIR", t.TempDir(), "TRANSCRIBER_UI_ADDR", "off",
			"TRANSCRIBER_TEMPORAL_HOST", host, "TRANSCRIBER_TEMPORAL_PORT", port), nil, io.Discard, logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	waitFor(t, "the server ready", func() bool { return strings.Contains(logs.String(), "temporal server is running") })
	var c client.Client
	waitFor(t, "the frontend on "+host, func() bool {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		var err error
		c, err = client.DialContext(dctx, client.Options{HostPort: net.JoinHostPort(host, port)})
		return err == nil
	})
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		t.Fatalf("frontend on %s: %v\n%s", host, err, logs.String())
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second); err == nil {
		_ = conn.Close() // only a probe
		t.Errorf("the frontend also answers on 127.0.0.1:%s; want only %s", port, host)
	}
}
