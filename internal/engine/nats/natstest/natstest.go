// Package natstest runs a real NATS server with JetStream for tests, in
// the process and on a free port, removed when the test ends.
package natstest

import (
	"testing"

	"github.com/transcriber/transcriber/internal/engine/nats/natsserver"
)

// Start runs a server and returns the URL clients dial.
func Start(t testing.TB) string {
	t.Helper()
	srv, err := natsserver.Start("127.0.0.1:0", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.ClientURL()
}
