package devserver

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger routes the Temporal server's structured logs into slog, so the
// embedded server logs in the same format and stream as the rest of the
// process. The server is chatty at INFO; the level is set by the caller.
type serverLogger struct {
	log   *slog.Logger
	level *slog.LevelVar
	// secret, when set, keeps a database password out of what is logged.
	secret *redactor
}

var _ log.Logger = serverLogger{}

func newServerLogger(l *slog.Logger, level *slog.LevelVar, secret *redactor) serverLogger {
	return serverLogger{log: l.With("component", "temporal-server"), level: level, secret: secret}
}

func (l serverLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < l.level.Level() || !l.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(tags))
	for _, t := range tags {
		v := t.Value()
		if l.secret != nil {
			if s := fmt.Sprint(v); l.secret.redact(s) != s {
				v = l.secret.redact(s)
			}
		}
		attrs = append(attrs, slog.Any(t.Key(), v))
	}
	l.log.LogAttrs(context.Background(), level, l.secret.redact(msg), attrs...)
}

func (l serverLogger) Debug(msg string, tags ...tag.Tag)  { l.emit(slog.LevelDebug, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)   { l.emit(slog.LevelInfo, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)   { l.emit(slog.LevelWarn, msg, tags) }
func (l serverLogger) Error(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }
func (l serverLogger) Panic(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(msg)
}
func (l serverLogger) Fatal(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError+4, msg, tags)
	panic(msg)
}
