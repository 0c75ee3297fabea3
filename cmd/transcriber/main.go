// Command transcriber turns voice recordings into text through Temporal
// workflows. Run "transcriber help" for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// exitError ends the process with a code and, unless it is empty, a message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "transcriber:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "transcriber:", err)
	return 1
}

func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"up", "run everything in one process: embedded Temporal server and Web UI, worker, HTTP server", runUp},
		{"server", "run only the Temporal server and its Web UI, on SQLite or PostgreSQL, for the other roles", runServer},
		{"worker", "run a worker that executes jobs from an existing Temporal server", runWorker},
		{"bot", "run the Telegram bot alone against an existing Temporal server", runBot},
		{"api", "serve the HTTP job API alone against an existing Temporal server", runAPI},
		{"transcribe", "transcribe files and print the transcripts", runTranscribe},
		{"jobs", "list, show, revive and cancel jobs", runJobs},
		{"version", "print the version and the Temporal versions it embeds", runVersion},
	}
}

func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, env, stdin, stdout, stderr)
		}
		printUsage(stdout)
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(ctx, args[1:], env, stdin, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], env, stdin, stdout, stderr)
		}
	}
	printUsage(stderr)
	return usageError("unknown command %q", args[0])
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `transcriber turns voice recordings into text. Every recording is a durable
Temporal workflow: converted with ffmpeg, recognised by a speech engine,
retried with back-off, parked as dead for an operator when it cannot finish.

Usage: transcriber <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "transcriber <command> --help" for a command's flags. Every flag has an
environment variable of the same meaning; the flag wins.
`)
}

// newFlagSet returns a flag set that prints its usage to stderr and returns
// errors instead of exiting.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}
