package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/transcript"
)

const jobsUsage = `Usage: transcriber jobs <list|show|revive|cancel|retry-pending> [flags] [ID]

Operator commands over the jobs of TEMPORAL_ADDRESS (default: the
"transcriber up" on this machine).

  list [--state S] [--owner O]
                     jobs, newest first; S is accepted, converting,
                     transcribing, replying, done, failed, dead or cancelled;
                     O is an owner: an API account, telegram:USER_ID,
                     vault:DEVICE or cli
  show ID            a job's state, owner, failure, attempts and transcript
  revive ID          resume a failed or dead job from the step that stopped it,
                     or run a step waiting out a back-off now, attempts from 1
  cancel ID          cancel a job; its recording is kept
  retry-pending [--owner O]
                     run every step waiting out a back-off now, in every job
                     (of owner O)

The same is possible in the Temporal Web UI (search TranscriptionState="dead",
signal "revive") and with the temporal CLI.`

func runJobs(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
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
	state, owner := "", ""
	asJSON := false
	format := "txt"
	switch sub {
	case "list":
		fs.StringVar(&state, "state", "", "only jobs in this state")
		fs.StringVar(&owner, "owner", "", "only jobs of this owner (TranscriptionOwner)")
	case "show":
		fs.BoolVar(&asJSON, "json", false, "print the status as JSON")
		fs.StringVar(&format, "format", "txt", "transcript format: "+strings.Join(transcript.Formats, ", "))
	case "retry-pending":
		fs.StringVar(&owner, "owner", "", "only jobs of this owner (TranscriptionOwner)")
	case "revive", "cancel":
	default:
		return usageError("unknown jobs subcommand %q (want list, show, revive, cancel or retry-pending)", sub)
	}
	if err := loadConfig(fs, &cfg, rest); err != nil {
		return err
	}
	var id string
	if sub != "list" && sub != "retry-pending" {
		if fs.NArg() != 1 {
			return usageError("jobs %s needs exactly one job ID", sub)
		}
		id = fs.Arg(0)
	} else if fs.NArg() != 0 {
		return usageError("jobs %s takes no arguments", sub)
	}
	logger := newLogger(cfg, stderr)
	conn, err := connect(ctx, cfg, dialLocal, logger, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	jobs := conn.jobs(cfg)
	switch sub {
	case "list":
		return listJobs(ctx, jobs, state, owner, stdout)
	case "show":
		return showJob(ctx, jobs, cfg, env, id, asJSON, format, stdout)
	case "revive":
		return reviveJob(ctx, jobs, id, stdout)
	case "retry-pending":
		return retryPending(ctx, jobs, owner, stdout)
	default:
		return cancelJob(ctx, jobs, id, stdout)
	}
}

func listJobs(ctx context.Context, svc *jobctl.Service, state, owner string, w io.Writer) error {
	st, err := jobctl.ParseState(state)
	if err != nil {
		return usageError("--state: %v", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSOURCE\tENGINE\tOWNER\tSTARTED")
	or := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	var token []byte
	for {
		page, next, err := svc.List(ctx, jobctl.Filter{State: st, Owner: owner}, 500, token)
		if err != nil {
			return err
		}
		for _, j := range page {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, or(string(j.State)), or(string(j.Source)), or(j.Engine),
				or(j.Owner), j.Started.Local().Format(time.DateTime))
		}
		if token = next; len(token) == 0 {
			break
		}
	}
	return tw.Flush()
}

func showJob(ctx context.Context, jobs *jobctl.Service, cfg config.Config, getenv func(string) string, id string, asJSON bool, format string, w io.Writer) error {
	st, pending, err := jobs.Get(ctx, id)
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
	if st.Owner != "" {
		row("owner", st.Owner)
	} else {
		row("owner", "none (older than owners; only admins see it over the API)")
	}
	if st.FallbackFrom != "" {
		row("fallback from", st.FallbackFrom)
	}
	row("service", strings.TrimSpace(st.Service+" "+st.ServiceVersion))
	if st.NeedsCheck {
		row("review", "needs check: the recognition service asks for a person to review the transcript")
	}
	row("language", st.Language)
	row("detected language", st.DetectedLanguage)
	row("title", st.Title)
	row("note", st.Note)
	row("original", st.Original.Name)
	if r := st.Recognition; r.Speakers {
		asked := "labelled where the engine can"
		if r.SpeakersExpected > 0 {
			asked += fmt.Sprintf(", %d expected", r.SpeakersExpected)
		}
		row("speakers", asked)
	}
	if st.Recognition.Translate {
		row("translation", "into English")
	}
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
		row("error code", f.Code)
		row("failure raw key", f.RawKey)
	}
	// A step that is retrying shows its attempt and last error, which the
	// workflow itself does not see until the step gives up.
	for _, p := range pending {
		row("step", fmt.Sprintf("%s, attempt %d", p.Activity, p.Attempt))
		row("last error", p.LastError)
		if !p.NextAttempt.IsZero() {
			row("next attempt", p.NextAttempt.Local().Format(time.DateTime))
		}
	}
	if st.TranscriptKey != "" {
		row("transcript key", st.TranscriptKey)
	}
	row("raw key", st.RawKey)
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
		if len(doc.Words) > 0 {
			fmt.Fprintf(w, "timed words:\t%d\n", len(doc.Words))
		}
		fmt.Fprintln(w, "transcript:")
		if format == "txt" && doc.Speakers() {
			// Who said what reads better one turn a line than as one
			// paragraph with the names lost.
			for _, seg := range doc.Segments {
				name := "?"
				if seg.Speaker != "" {
					name = transcript.SpeakerName(seg.Speaker)
				}
				if _, err := fmt.Fprintf(w, "%s: %s\n", name, seg.Text); err != nil {
					return err
				}
			}
			return nil
		}
		return transcript.Render(w, doc, format)
	}
	return nil
}

func reviveJob(ctx context.Context, jobs *jobctl.Service, id string, w io.Writer) error {
	r, err := jobs.Revive(ctx, id)
	var refused *jobctl.NotRevivableError
	if errors.As(err, &refused) {
		msg := refused.Error()
		if len(refused.Running) == 0 {
			msg += notRevivableWhy(refused.State)
		}
		return &exitError{code: 1, msg: msg}
	}
	if err != nil {
		return notFound(id, err)
	}
	printRevival(w, id, r)
	return nil
}

func retryPending(ctx context.Context, jobs *jobctl.Service, owner string, w io.Writer) error {
	revived, err := jobs.RetryPending(ctx, owner)
	for _, r := range revived {
		printRevival(w, r.Status.JobID, r)
	}
	if err != nil {
		return err
	}
	if len(revived) == 0 {
		fmt.Fprintln(w, "no job waits out a back-off")
	}
	return nil
}

func printRevival(w io.Writer, id string, r jobctl.Revival) {
	if r.ResumesAt != "" {
		fmt.Fprintf(w, "job %s revived: it resumes at %s\n", id, r.ResumesAt)
		return
	}
	for _, p := range r.Retried {
		fmt.Fprintf(w, "job %s: step %s runs again now, its attempts counted from 1 (it had failed %d times)\n", id, p.Activity, p.Attempt-1)
	}
}

// notRevivableWhy says what a refused revive means for the job.
func notRevivableWhy(s job.State) string {
	switch {
	case s == job.Done:
		return " (it finished; its transcript is kept)"
	case s == job.Cancelled:
		return " (it was cancelled; submit the recording again to start anew)"
	case !s.Settled():
		return " (it is still running and no step waits out a back-off)"
	}
	return ""
}

func cancelJob(ctx context.Context, jobs *jobctl.Service, id string, w io.Writer) error {
	err := jobs.Cancel(ctx, id)
	if errors.Is(err, jobctl.ErrClosed) {
		return &exitError{code: 1, msg: fmt.Sprintf("job %s has closed; there is nothing to cancel", id)}
	}
	if err != nil {
		return notFound(id, err)
	}
	fmt.Fprintf(w, "job %s cancelled; its recording is kept\n", id)
	return nil
}

func notFound(id string, err error) error {
	if errors.Is(err, jobctl.ErrNotFound) {
		return &exitError{code: 1, msg: fmt.Sprintf("no job %s", id)}
	}
	return err
}

// jobs is the door to the jobs of the configured namespace.
func (t *temporalConn) jobs(cfg config.Config) *jobctl.Service {
	return &jobctl.Service{Client: t.client, Namespace: cfg.TemporalNamespace}
}
