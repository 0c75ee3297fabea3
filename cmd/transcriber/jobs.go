package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

const jobsUsage = `Usage: transcriber jobs <list|show|revive|cancel> [flags] [ID]

Operator commands over the jobs of TEMPORAL_ADDRESS (default: the
"transcriber up" on this machine).

  list [--state S]   jobs, newest first; S is accepted, converting,
                     transcribing, replying, done, failed, dead or cancelled
  show ID            a job's state, failure, attempts and transcript
  revive ID          resume a failed or dead job from the step that stopped it
  cancel ID          cancel a job; its recording is kept

The same is possible in the Temporal Web UI (search TranscriptionState="dead",
signal "revive") and with the temporal CLI.`

func runJobs(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, jobsUsage)
		if len(args) == 0 {
			return usageError("jobs needs a subcommand")
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	cfg, err := config.Load(env)
	if err != nil {
		return &exitError{code: 2, msg: "configuration: " + err.Error()}
	}
	fs := newFlagSet("jobs "+sub, jobsUsage, stderr)
	cfg.RegisterFlags(fs)
	state := ""
	asJSON := false
	format := "txt"
	switch sub {
	case "list":
		fs.StringVar(&state, "state", "", "only jobs in this state")
	case "show":
		fs.BoolVar(&asJSON, "json", false, "print the status as JSON")
		fs.StringVar(&format, "format", "txt", "transcript format: "+strings.Join(transcript.Formats, ", "))
	case "revive", "cancel":
	default:
		return usageError("unknown jobs subcommand %q (want list, show, revive or cancel)", sub)
	}
	if err := loadConfig(fs, &cfg, rest); err != nil {
		return err
	}
	var id string
	if sub != "list" {
		if fs.NArg() != 1 {
			return usageError("jobs %s needs exactly one job ID", sub)
		}
		id = fs.Arg(0)
	} else if fs.NArg() != 0 {
		return usageError("jobs list takes no arguments")
	}
	logger := newLogger(cfg, stderr)
	conn, err := connect(ctx, cfg, dialLocal, logger, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	c := conn.client
	switch sub {
	case "list":
		return listJobs(ctx, c, cfg.TemporalNamespace, state, stdout)
	case "show":
		return showJob(ctx, c, cfg, env, id, asJSON, format, stdout)
	case "revive":
		return reviveJob(ctx, c, id, stdout)
	default:
		return cancelJob(ctx, c, id, stdout)
	}
}

func listJobs(ctx context.Context, c client.Client, namespace, state string, w io.Writer) error {
	st, err := jobctl.ParseState(state)
	if err != nil {
		return usageError("--state: %v", err)
	}
	svc := &jobctl.Service{Client: c, Namespace: namespace}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSOURCE\tENGINE\tSTARTED")
	or := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	var token []byte
	for {
		page, next, err := svc.List(ctx, st, 500, token)
		if err != nil {
			return err
		}
		for _, j := range page {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.ID, or(string(j.State)), or(string(j.Source)), or(j.Engine),
				j.Started.Local().Format(time.DateTime))
		}
		if token = next; len(token) == 0 {
			break
		}
	}
	return tw.Flush()
}

func showJob(ctx context.Context, c client.Client, cfg config.Config, getenv func(string) string, id string, asJSON bool, format string, w io.Writer) error {
	st, err := queryStatus(ctx, c, id)
	if err != nil {
		return notFound(id, err)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", st.JobID)
	row("state", string(st.State))
	row("source", string(st.Source))
	row("engine", st.Engine)
	if st.FallbackFrom != "" {
		row("fallback from", st.FallbackFrom)
	}
	row("language", st.Language)
	row("detected language", st.DetectedLanguage)
	row("title", st.Title)
	row("note", st.Note)
	row("original", st.Original.Name)
	if st.Duration > 0 {
		row("duration", st.Duration.Round(time.Millisecond).String())
	}
	if n := len(st.Chunks); n > 0 {
		row("progress", fmt.Sprintf("%d of %d chunks recognised", st.ChunksDone, n))
	}
	row("accepted", st.AcceptedAt.Local().Format(time.DateTime))
	switch {
	case !st.RemovedAt.IsZero():
		row("recordings", "removed "+st.RemovedAt.Local().Format(time.DateTime)+" after the retention period")
	case !st.RemoveAt.IsZero():
		row("recordings", "kept until "+st.RemoveAt.Local().Format(time.DateTime))
	}
	if !st.FinishedAt.IsZero() {
		row("finished", st.FinishedAt.Local().Format(time.DateTime))
	}
	if st.Revivals > 0 {
		row("revivals", fmt.Sprint(st.Revivals))
	}
	if f := st.Failure; f != nil {
		row("failure", fmt.Sprintf("%s at %s: %s", f.Kind, f.Step, f.Message))
		if f.Attempts > 0 {
			row("attempts", fmt.Sprint(f.Attempts))
		}
	}
	// A step that is retrying shows its attempt and last error, which the
	// workflow itself does not see until the step gives up.
	if desc, err := c.DescribeWorkflowExecution(ctx, id, ""); err == nil {
		for _, pa := range desc.GetPendingActivities() {
			row("step", fmt.Sprintf("%s, attempt %d", pa.GetActivityType().GetName(), pa.GetAttempt()))
			if lf := pa.GetLastFailure(); lf != nil {
				row("last error", lf.GetMessage())
			}
			if t := pa.GetNextAttemptScheduleTime(); t != nil {
				row("next attempt", t.AsTime().Local().Format(time.DateTime))
			}
		}
	}
	if st.TranscriptKey != "" {
		row("transcript key", st.TranscriptKey)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.State == job.Done && st.TranscriptKey != "" && st.RemovedAt.IsZero() {
		blobs, err := blob.OpenStore(ctx, cfg.BlobURL, cfg.DataDir, getenv)
		if err != nil {
			return err
		}
		doc, err := transcript.Load(ctx, blobs, st.TranscriptKey)
		if err != nil {
			return fmt.Errorf("transcript of job %s is not in %s (a worker on another machine may hold it): %w", id, blobs, err)
		}
		fmt.Fprintln(w, "transcript:")
		return transcript.Render(w, doc, format)
	}
	return nil
}

func reviveJob(ctx context.Context, c client.Client, id string, w io.Writer) error {
	st, err := queryStatus(ctx, c, id)
	if err != nil {
		return notFound(id, err)
	}
	if st.State != job.Failed && st.State != job.Dead {
		return &exitError{code: 1, msg: fmt.Sprintf("job %s is %s; only failed or dead jobs can be revived", id, st.State)}
	}
	if err := c.SignalWorkflow(ctx, id, "", workflows.SignalRevive, nil); err != nil {
		return fmt.Errorf("revive job %s: %w", id, err)
	}
	fmt.Fprintf(w, "job %s revived: it resumes at %s\n", id, stepOf(st))
	return nil
}

func stepOf(st workflows.Status) job.State {
	if st.Failure != nil {
		return st.Failure.Step
	}
	return st.State
}

func cancelJob(ctx context.Context, c client.Client, id string, w io.Writer) error {
	if err := c.CancelWorkflow(ctx, id, ""); err != nil {
		return notFound(id, err)
	}
	fmt.Fprintf(w, "job %s cancelled; its recording is kept\n", id)
	return nil
}

func notFound(id string, err error) error {
	if isNotFound(err) {
		return &exitError{code: 1, msg: fmt.Sprintf("no job %s", id)}
	}
	return err
}
