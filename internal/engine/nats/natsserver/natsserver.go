// Package natsserver runs a NATS server with JetStream inside the process:
// "transcriber up" embeds one when its engine is nats and no NATS_URL is
// set, so the whole recognition exchange runs on one machine, and tests use
// it as the real broker.
package natsserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a running embedded server.
type Server struct {
	ns *server.Server
}

// Start listens on addr (host:port; port 0 picks a free one) and keeps
// JetStream's store under storeDir.
func Start(addr, storeDir string, logger *slog.Logger) (*Server, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded nats address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("embedded nats address %q: the port is not a number", addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "transcriber", Host: host, Port: port,
		JetStream: true, StoreDir: storeDir,
		NoSigs: true, NoLog: logger == nil,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if logger != nil {
		ns.SetLoggerV2(&slogAdapter{logger}, false, false, false)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats: not ready after 10s (is " + addr + " taken?)")
	}
	return &Server{ns: ns}, nil
}

// ClientURL is the URL clients dial.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// slogAdapter hands the server's log to ours; its notices are details of
// the broker's life, so they go at debug, its warnings and errors as such.
type slogAdapter struct{ l *slog.Logger }

func (a *slogAdapter) Noticef(format string, v ...any) {
	a.l.Debug("nats: " + fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Warnf(format string, v ...any) { a.l.Warn("nats: " + fmt.Sprintf(format, v...)) }
func (a *slogAdapter) Fatalf(format string, v ...any) {
	a.l.Error("nats: " + fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Errorf(format string, v ...any) {
	a.l.Error("nats: " + fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Debugf(format string, v ...any) {
	a.l.Debug("nats: " + fmt.Sprintf(format, v...))
}
func (a *slogAdapter) Tracef(format string, v ...any) {
	a.l.Debug("nats: " + fmt.Sprintf(format, v...))
}
