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
	"slices"
	"strconv"
	"syscall"

	"github.com/transcriber/transcriber/internal/config"
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
		{"vault", "transcribe the voice recordings of a notes vault into their notes", runVault},
		{"recognizer", "run the reference recognition service of the nats engine", runRecognizer},
		{"version", "print the version and the Temporal versions it embeds", runVersion},
	}
}

func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 && args[1] == "settings" {
			printSettings(stdout)
			return nil
		}
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
Run "transcriber <command> --help" for a command's flags, and
"transcriber help settings" for the settings every command takes, each an
environment variable and a flag of the same meaning; the flag wins.
`)
}

// printSettings lists every setting once, with its variable, flag, default
// and meaning; the commands' help shows only the few each needs most.
func printSettings(w io.Writer) {
	fmt.Fprint(w, `Settings: every command takes each of them, as an environment variable or
as the flag (which wins). Variables marked "environment only" hold secrets
and have no flag, so they never show in process lists.

`)
	for _, s := range config.Settings() {
		env, fl, def, usage := s[0], s[1], s[2], s[3]
		if def == "" {
			def = "unset"
		} else {
			def = strconv.Quote(def)
		}
		if fl == "" {
			fmt.Fprintf(w, "  %s\n", env)
		} else {
			fmt.Fprintf(w, "  %s, %s\n", env, fl)
		}
		fmt.Fprintf(w, "      %s (default %s)\n", usage, def)
	}
}

// focusHelp makes fs's help show the command's own flags, then only the
// shared settings named in shown. The other settings still parse; they
// are listed once by "transcriber help settings", so that a command that a
// person runs by hand is not buried under the server's fifty settings.
func focusHelp(fs *flag.FlagSet, usage string, stderr io.Writer, shown ...string) {
	fs.Usage = func() {
		own, settings := flag.NewFlagSet("", flag.ContinueOnError), flag.NewFlagSet("", flag.ContinueOnError)
		fs.VisitAll(func(f *flag.Flag) {
			into := own
			if config.IsSettingFlag(f.Name) {
				if !slices.Contains(shown, f.Name) {
					return
				}
				into = settings
			}
			into.Var(f.Value, f.Name, f.Usage)
			// Var takes the default from the value now, which parsing
			// may have changed.
			into.Lookup(f.Name).DefValue = f.DefValue
		})
		fmt.Fprintf(stderr, "%s\n\nFlags:\n", usage)
		own.SetOutput(stderr)
		own.PrintDefaults()
		fmt.Fprint(stderr, "\nSettings (also environment variables; every other setting, such as the\nengines' own, is listed by \"transcriber help settings\" and works here too):\n")
		settings.SetOutput(stderr)
		settings.PrintDefaults()
	}
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
