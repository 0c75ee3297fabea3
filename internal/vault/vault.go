// Package vault is the intake of a notes vault (an Obsidian vault: a
// folder of Markdown notes with YAML frontmatter, synced between a
// person's devices). A recording is an audio file in the vault's source
// folder; its note carries the recording's state in its frontmatter and
// receives the transcript. Each recording is one job of the pipeline; the
// intake starts it, and mirrors the job's state into the note on every
// pass, so a note catches up with its job whenever this machine runs,
// whatever happened while it did not.
package vault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/internal/transcript"
	"github.com/transcriber/transcriber/workflows"
)

// Jobs is what the intake needs of job control.
type Jobs interface {
	Start(ctx context.Context, req jobctl.StartRequest) (existing bool, err error)
	Get(ctx context.Context, id string) (workflows.Status, []jobctl.Pending, error)
	Revive(ctx context.Context, id string) (jobctl.Revival, error)
	Cancel(ctx context.Context, id string) error
	ListOpen(ctx context.Context, prefix string) ([]jobctl.Summary, error)
}

// Blobs keeps the recordings the jobs read and holds their transcripts.
type Blobs interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// Config is one vault and how its recordings become jobs.
type Config struct {
	// Dir is the vault; SourceDir (audio) and InboxDir (new notes) are
	// inside it, as the vault names them.
	Dir, SourceDir, InboxDir string
	// Device is this machine's id; only its recordings are sent
	// automatically.
	Device string
	// DataDir keeps what must not sync with the vault.
	DataDir string
	// Engine and Fallback recognise the recordings; Language is theirs
	// (empty: the engine's choice) and the language of the intake's
	// messages in notes.
	Engine, Fallback, Language string
	Policy                     workflows.Policy
	// Concurrency is how many recordings of this device are in flight at
	// once; 1 sends them strictly one after another.
	Concurrency int
	// Settle is how long a new audio file must stay the same size and
	// time before it is taken: until then it is still being written or
	// synced.
	Settle time.Duration
	// Poll is the wait between passes while recordings are under way;
	// Idle while none is, when only the vault's changes start a pass.
	Poll, Idle time.Duration
	// DeleteGrace is how long a note must be missing before its job is
	// cancelled: a move made by a sync tool deletes before it creates.
	DeleteGrace time.Duration
}

// Defaults of a Config.
const (
	DefaultSourceDir   = "voice/source"
	DefaultInboxDir    = "voice/inbox"
	DefaultSettle      = 2 * time.Second
	DefaultPoll        = 2 * time.Second
	DefaultIdle        = 30 * time.Second
	DefaultDeleteGrace = time.Second
	// StaleSent is how long a recording may stay sent before another
	// device may take it over: its request is then surely not running.
	StaleSent = 10 * time.Minute
)

// parkedPoll is how many polls apart the intake looks at the vault while
// its only open jobs are parked.
const parkedPoll = 5

// JobPrefix starts the ids of a device's vault jobs.
func JobPrefix(device string) string { return "vault-" + device + "-" }

// JobID is the job of a device's recording.
func JobID(device, voiceID string) string { return JobPrefix(device) + voiceID }

// Intake runs one vault.
type Intake struct {
	cfg   Config
	jobs  Jobs
	blobs Blobs
	log   *slog.Logger
	now   func() time.Time

	trigger chan struct{}
	// passes counts the passes made; BeforePass, when set, runs before
	// each (tests hold a pass with it).
	passes     atomic.Int64
	BeforePass func()

	// What one pass leaves to the next.
	ledger  *ledger
	cache   map[string]cached
	seen    map[string]sighting
	missing map[string]time.Time
	told    map[string]bool
	// parked are the failed notes whose jobs wait for a revive; checked
	// the failed notes whose jobs were asked about since the start.
	parked, checked map[string]bool
}

// sighting is an audio file as a pass saw it, and since when it is so.
type sighting struct {
	stamp
	since time.Time
}

// New makes the intake of the vault cfg names.
func New(cfg Config, jobs Jobs, blobs Blobs, logger *slog.Logger) (*Intake, error) {
	if cfg.Dir == "" {
		return nil, errors.New("no vault directory")
	}
	fi, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("vault %s: %w", cfg.Dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("vault %s is not a directory", cfg.Dir)
	}
	if err := CheckDevice(cfg.Device); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.SourceDir, cfg.InboxDir} {
		if d == "" || filepath.IsAbs(d) || !filepath.IsLocal(d) {
			return nil, fmt.Errorf("vault folder %q must be a relative path inside the vault", d)
		}
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	for p, d := range map[*time.Duration]time.Duration{&cfg.Settle: DefaultSettle, &cfg.Poll: DefaultPoll,
		&cfg.Idle: DefaultIdle, &cfg.DeleteGrace: DefaultDeleteGrace} {
		if *p <= 0 {
			*p = d
		}
	}
	l, err := openLedger(cfg.DataDir, cfg.Dir)
	if err != nil {
		return nil, err
	}
	return &Intake{cfg: cfg, jobs: jobs, blobs: blobs, log: logger, now: time.Now,
		trigger: make(chan struct{}, 1), ledger: l, cache: map[string]cached{}, seen: map[string]sighting{},
		missing: map[string]time.Time{}, told: map[string]bool{}, parked: map[string]bool{}, checked: map[string]bool{}}, nil
}

// Passes is how many passes the intake has made.
func (in *Intake) Passes() int64 { return in.passes.Load() }

// poke asks for a pass. A pass already asked for is enough: however many
// changes arrive while a pass runs, exactly one more follows it.
func (in *Intake) poke() {
	select {
	case in.trigger <- struct{}{}:
	default:
	}
}

// Run watches the vault and makes passes until ctx ends.
func (in *Intake) Run(ctx context.Context) error {
	for _, d := range []string{in.cfg.SourceDir, in.cfg.InboxDir} {
		if err := os.MkdirAll(filepath.Join(in.cfg.Dir, d), 0o755); err != nil {
			return err
		}
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch the vault: %w", err)
	}
	defer func() { _ = w.Close() }() // nothing to flush
	in.watchTree(w, in.cfg.Dir)
	go in.forward(ctx, w)
	in.log.Info("vault intake running", "vault", in.cfg.Dir, "device", in.cfg.Device,
		"source", in.cfg.SourceDir, "inbox", in.cfg.InboxDir)

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-in.trigger:
		case <-timer.C:
		}
		next := in.Pass(ctx)
		timer.Reset(next)
	}
}

// watchTree watches dir and every folder under it that is not hidden:
// the watcher sees one folder, not a tree.
func (in *Intake) watchTree(w *fsnotify.Watcher, dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if path != dir && hidden(d.Name()) {
			return filepath.SkipDir
		}
		if err := w.Add(path); err != nil {
			in.log.Warn("vault: cannot watch a folder; its changes are seen at the next pass",
				"folder", in.rel(path), "error", err)
		}
		return nil
	})
}

// forward turns the watcher's events into pokes, and watches new folders.
func (in *Intake) forward(ctx context.Context, w *fsnotify.Watcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if hidden(filepath.Base(ev.Name)) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					in.watchTree(w, ev.Name)
				}
			}
			in.poke()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events, not changes: a pass sees them all.
			in.log.Warn("vault: watching the vault", "error", err)
			in.poke()
		}
	}
}

// Pass makes one pass over the vault: new audio gets its note, notes are
// brought in step with their jobs, due recordings are sent, and jobs whose
// note is gone are cancelled. It returns when the next pass is due at the
// latest.
func (in *Intake) Pass(ctx context.Context) time.Duration {
	if in.BeforePass != nil {
		in.BeforePass()
	}
	in.passes.Add(1)
	next, err := in.pass(ctx)
	if err != nil && ctx.Err() == nil {
		in.log.Warn("vault pass", "error", err)
		return in.cfg.Poll
	}
	if err := in.ledger.save(); err != nil {
		in.log.Warn("vault: cannot save what recordings had notes", "error", err)
	}
	return next
}

func (in *Intake) pass(ctx context.Context) (time.Duration, error) {
	now := in.now()
	next := in.cfg.Idle
	soon := func(d time.Duration) { next = max(min(next, d), 100*time.Millisecond) }

	s, err := in.scan()
	if err != nil {
		return 0, err
	}
	if wait := in.capture(s, now); wait > 0 {
		soon(wait)
	}
	open, err := in.openJobs(ctx)
	if err != nil {
		return 0, err
	}
	for _, j := range open {
		// An operator may revive a parked job at any time; its note
		// follows within a few polls.
		if j.State == job.Failed || j.State == job.Dead {
			soon(parkedPoll * in.cfg.Poll)
		} else {
			soon(in.cfg.Poll)
		}
	}
	own := in.ownNotes(s)
	if wait := in.cancelOrphans(ctx, open, own, now); wait > 0 {
		soon(wait)
	}

	var inFlight int
	var due []Note
	for _, n := range own {
		j, isOpen := open[n.ID]
		action, err := in.reconcile(ctx, n, j, isOpen)
		if err != nil {
			if errors.Is(err, errNoteChanged) {
				in.poke()
				continue
			}
			if !errors.Is(err, ErrNoteGone) {
				in.log.Warn("vault: a note cannot be brought in step with its job", "note", in.rel(n.Path), "error", err)
			}
			continue
		}
		switch action.status {
		case Sent:
			inFlight++
			soon(in.cfg.Poll)
		case Retry:
			soon(in.cfg.Poll)
		}
		if action.send {
			due = append(due, action.note)
		}
	}
	// The oldest recordings go first; one in flight already (sent, with no
	// job yet) before anything new.
	slices.SortStableFunc(due, func(a, b Note) int {
		if (a.Status == Sent) != (b.Status == Sent) {
			if a.Status == Sent {
				return -1
			}
			return 1
		}
		return in.audioTime(a).Compare(in.audioTime(b))
	})
	for _, n := range due {
		if n.Status == Retry && n.NextAttempt.After(now) {
			soon(n.NextAttempt.Sub(now))
			continue
		}
		if n.Status != Sent && inFlight >= in.cfg.Concurrency {
			soon(in.cfg.Poll)
			continue
		}
		sent, wait, err := in.send(ctx, n, now)
		switch {
		case errors.Is(err, errNoteChanged):
			in.poke()
		case err != nil && !errors.Is(err, ErrNoteGone):
			in.log.Warn("vault: a recording cannot be sent", "note", in.rel(n.Path), "error", err)
			soon(in.cfg.Poll)
		}
		if wait > 0 {
			soon(wait)
		}
		if sent && n.Status != Sent {
			inFlight++
		}
		if sent {
			soon(in.cfg.Poll)
		}
	}
	return next, nil
}

// openJobs are this device's jobs that have not closed, by voice-id.
func (in *Intake) openJobs(ctx context.Context) (map[string]jobctl.Summary, error) {
	prefix := JobPrefix(in.cfg.Device)
	list, err := in.jobs.ListOpen(ctx, prefix)
	if err != nil {
		return nil, err
	}
	open := make(map[string]jobctl.Summary, len(list))
	for _, j := range list {
		open[strings.TrimPrefix(j.ID, prefix)] = j
	}
	return open, nil
}

// ownNotes are the notes of this device's recordings, one per voice-id: a
// person's copy of a note (a second note with the id) is left alone and
// said once.
func (in *Intake) ownNotes(s scanned) []Note {
	var own []Note
	for _, n := range s.notes {
		if n.Device == "" && n.Status != Inserted {
			if key := "nodevice:" + n.Path; !in.told[key] {
				in.told[key] = true
				in.log.Info("vault: a note has no voice-device, so no device sends it; vault take-over sends it from here",
					"note", in.rel(n.Path), "voice_id", n.ID)
			}
		}
		if n.Device != in.cfg.Device {
			continue
		}
		if first := s.byID[n.ID][0]; first.Path != n.Path {
			if key := "dup:" + n.Path; !in.told[key] {
				in.told[key] = true
				in.log.Warn("vault: two notes have one voice-id; the second is left alone",
					"voice_id", n.ID, "note", in.rel(first.Path), "copy", in.rel(n.Path))
			}
			continue
		}
		own = append(own, n)
	}
	return own
}

// cancelOrphans cancels the open jobs whose note is gone (deleted, moved
// to the trash, or taken over by another device), once it has been gone
// for DeleteGrace. The audio stays; a result that comes later finds no
// note and is dropped. It returns when a missing note's grace ends.
func (in *Intake) cancelOrphans(ctx context.Context, open map[string]jobctl.Summary, own []Note, now time.Time) (wait time.Duration) {
	have := make(map[string]bool, len(own))
	for _, n := range own {
		have[n.ID] = true
	}
	for id := range in.missing {
		if _, ok := open[id]; !ok || have[id] {
			delete(in.missing, id)
		}
	}
	for id, j := range open {
		if have[id] {
			continue
		}
		since, ok := in.missing[id]
		if !ok {
			in.missing[id], since = now, now
		}
		if left := in.cfg.DeleteGrace - now.Sub(since); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		err := in.jobs.Cancel(ctx, j.ID)
		if err != nil && !errors.Is(err, jobctl.ErrClosed) && !errors.Is(err, jobctl.ErrNotFound) {
			in.log.Warn("vault: cannot cancel the job of a deleted note", "job_id", j.ID, "error", err)
			continue
		}
		delete(in.missing, id)
		in.log.Info("vault: the note is gone, its job is cancelled; the audio stays", "job_id", j.ID, "voice_id", id)
	}
	return wait
}

// action is what reconcile found a note needs.
type action struct {
	note Note
	// status is the note's status after reconcile.
	status Status
	// send: the recording has no job under way and is to be sent.
	send bool
}

// reconcile brings one note of this device in step with its job.
func (in *Intake) reconcile(ctx context.Context, n Note, j jobctl.Summary, isOpen bool) (action, error) {
	keep := action{note: n, status: n.Status}
	switch n.Status {
	case Inserted:
		return keep, nil
	case Failed:
		// A failed note waits for a person; only a revive of its job by an
		// operator moves it on. Its job is asked once after the intake
		// starts (it may have been revived meanwhile), then only when the
		// list shows it running again or closed after it was parked.
		parked := isOpen && (j.State == job.Failed || j.State == job.Dead)
		wasParked, checked := in.parked[n.ID], in.checked[n.ID]
		in.checked[n.ID] = true
		if parked {
			in.parked[n.ID] = true
			return keep, nil
		}
		delete(in.parked, n.ID)
		if !isOpen && !wasParked && checked {
			return keep, nil
		}
	case Saved, Sent, Retry:
	default:
		if key := "status:" + n.Path; !in.told[key] {
			in.told[key] = true
			in.log.Warn("vault: a note has a voice-status the lifecycle does not know; it is left alone",
				"note", in.rel(n.Path), "status", n.Status)
		}
		return keep, nil
	}
	id := JobID(in.cfg.Device, n.ID)
	st, pending, err := in.jobs.Get(ctx, id)
	if errors.Is(err, jobctl.ErrNotFound) {
		if n.Status == Failed {
			return keep, nil
		}
		keep.send = true
		return keep, nil
	}
	if err != nil {
		return keep, err
	}
	settled := st.State == job.Failed || st.State == job.Dead || st.State == job.Cancelled
	if n.Status == Saved {
		// A saved note whose job is parked or waits out a back-off is a
		// person's retry: the job resumes with fresh attempts.
		if st.State == job.Failed || st.State == job.Dead || backingOff(pending) {
			if isOpen {
				return in.revive(ctx, n, id)
			}
		}
		if settled && !isOpen {
			keep.send = true
			return keep, nil
		}
	}
	// A job cancelled by an operator while its note stayed makes the note
	// failed: the person decides (vault retry sends it again).
	return in.follow(n, st, pending)
}

func backingOff(pending []jobctl.Pending) bool {
	return slices.ContainsFunc(pending, jobctl.Pending.BackingOff)
}

// revive resumes a parked job, or runs its backing-off steps now, for a
// person who asked to retry the recording.
func (in *Intake) revive(ctx context.Context, n Note, id string) (action, error) {
	f := n.Fields
	f.Status, f.SentAt, f.NextAttempt, f.Error = Sent, in.now(), time.Time{}, ""
	if err := in.update(n, f, nil); err != nil {
		return action{note: n, status: n.Status}, err
	}
	r, err := in.jobs.Revive(ctx, id)
	if err != nil {
		var nr *jobctl.NotRevivableError
		if errors.As(err, &nr) {
			// It moved on by itself meanwhile: the next pass follows it.
			in.poke()
			return action{note: n, status: Sent}, nil
		}
		return action{note: n, status: Sent}, err
	}
	in.log.Info("vault: retrying a recording", "job_id", id, "resumes_at", r.ResumesAt, "steps_retried", len(r.Retried))
	return action{note: n, status: Sent}, nil
}

// follow writes the job's state into the note.
func (in *Intake) follow(n Note, st workflows.Status, pending []jobctl.Pending) (action, error) {
	f := n.Fields
	var body func([]byte) []byte
	switch st.State {
	case job.Done:
		doc, err := transcript.Load(context.Background(), in.blobs, st.TranscriptKey)
		if err != nil {
			return action{note: n, status: n.Status}, err
		}
		f.Status, f.Error, f.NextAttempt = Inserted, "", time.Time{}
		text := doc.Text
		body = func(c []byte) []byte { return insertAfterEmbed(dropNoSpeech(c), in.embeds(n), text) }
	case job.Failed, job.Dead:
		f.Status, f.NextAttempt = Failed, time.Time{}
		f.Error = reason(st.Failure)
		if st.Failure != nil && st.Failure.Attempts > 0 {
			f.Attempts = st.Failure.Attempts
		}
		if st.Failure != nil && st.Failure.Kind == job.NoSpeech && n.Status != Failed {
			msg := messagesFor(in.cfg.Language).noSpeech
			body = func(c []byte) []byte { return insertAfterEmbed(c, in.embeds(n), msg) }
		}
	case job.Cancelled:
		f.Status, f.NextAttempt, f.Error = Failed, time.Time{}, "cancelled: the job was cancelled"
	default:
		f.Status, f.Error, f.NextAttempt = Sent, "", time.Time{}
		var started time.Time
		attempts := -1
		for _, p := range pending {
			if p.BackingOff() {
				f.Status, f.NextAttempt, f.Error = Retry, p.NextAttempt, p.LastError
				attempts = max(attempts, p.Attempt-1)
				continue
			}
			attempts = max(attempts, p.Attempt-1)
			if p.Running && p.LastStarted.After(started) {
				started = p.LastStarted
			}
		}
		if attempts >= 0 {
			f.Attempts = attempts
		}
		if f.Status == Sent && !started.IsZero() && f.Attempts > 0 {
			// Each attempt is a new request: the note says when the one in
			// flight began.
			f.SentAt = started
		}
		if f.Status == Retry {
			f.SentAt = n.SentAt
		}
	}
	if f.normalised() == n.Fields.normalised() && body == nil {
		return action{note: n, status: n.Status}, nil
	}
	if err := in.update(n, f, body); err != nil {
		return action{note: n, status: n.Status}, err
	}
	return action{note: n, status: f.Status}, nil
}

// reason is a failure in the words of voice-error.
func reason(f *job.Failure) string {
	if f == nil {
		return "the job failed"
	}
	r := string(f.Kind)
	if f.Code != "" {
		r += " (" + f.Code + ")"
	}
	if f.Message != "" {
		r += ": " + f.Message
	}
	return r
}

// embeds are the ways a note may embed its recording: the full path the
// intake writes, or the file name alone that Obsidian writes by default.
func (in *Intake) embeds(n Note) []string {
	var out []string
	if p, ok := in.audioOf(n); ok {
		rel := in.rel(p)
		out = append(out, "[["+rel, "[["+filepath.Base(p))
	}
	return out
}

// audioOf finds the recording of a note in the source folder: the file
// named after its voice-id.
func (in *Intake) audioOf(n Note) (string, bool) {
	dir := filepath.Join(in.cfg.Dir, in.cfg.SourceDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() && isAudioName(name) && strings.TrimSuffix(name, filepath.Ext(name)) == n.ID {
			return filepath.Join(dir, name), true
		}
	}
	return "", false
}

// audioTime orders recordings: when the audio was made.
func (in *Intake) audioTime(n Note) time.Time {
	if p, ok := in.audioOf(n); ok {
		if fi, err := os.Stat(p); err == nil {
			return fi.ModTime()
		}
	}
	return time.Time{}
}

// update writes f (and, when body is not nil, a change of the body) into
// the note, if the lifecycle allows it and the note is still as it was
// read.
func (in *Intake) update(n Note, f Fields, body func([]byte) []byte) error {
	if err := checkTransition(n.Status, f.Status); err != nil {
		return err
	}
	out, err := setFields(n.content, f)
	if err != nil {
		return fmt.Errorf("note %s: %w", in.rel(n.Path), err)
	}
	if body != nil {
		out = body(out)
	}
	if err := writeNote(n.Path, n.content, out); err != nil {
		return err
	}
	if f.Status != n.Status {
		in.log.Info("vault: recording "+string(f.Status), "note", in.rel(n.Path), "voice_id", n.ID,
			"job_id", JobID(f.Device, n.ID), "attempts", f.Attempts)
	}
	return nil
}

// send starts the job of a recording: the note says sent first, then the
// audio is kept in the blob store and the job starts. A crash in between
// leaves a sent note without a job, which the next pass sends again.
func (in *Intake) send(ctx context.Context, n Note, now time.Time) (sent bool, wait time.Duration, err error) {
	path, ok := in.audioOf(n)
	if !ok {
		if key := "noaudio:" + n.ID; !in.told[key] {
			in.told[key] = true
			in.log.Info("vault: a note's recording is not in the source folder yet; it is sent once it is there",
				"note", in.rel(n.Path), "voice_id", n.ID)
		}
		return false, 0, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, 0, err
	}
	if wait := in.settling(path, fi, now); wait > 0 {
		return false, wait, nil
	}
	if fi.Size() == 0 {
		return false, 0, nil
	}
	f := n.Fields
	f.Status, f.SentAt, f.NextAttempt, f.Error = Sent, now, time.Time{}, ""
	if err := in.update(n, f, nil); err != nil {
		return false, 0, err
	}
	id := JobID(in.cfg.Device, n.ID)
	key := blob.JobKey(id, "original"+strings.ToLower(filepath.Ext(path)))
	a, err := os.Open(path)
	if err != nil {
		return true, 0, err
	}
	defer func() { _ = a.Close() }() // only read
	size, err := in.blobs.Put(ctx, key, a)
	if err != nil {
		return true, 0, fmt.Errorf("keep the recording: %w", err)
	}
	_, err = in.jobs.Start(ctx, jobctl.StartRequest{ID: id, Policy: jobctl.JoinRunning, Input: workflows.Input{
		Source:     job.SourceVault,
		Original:   workflows.Original{Key: key, Name: filepath.Base(path), Size: size},
		Engine:     in.cfg.Engine,
		Fallback:   in.cfg.Fallback,
		Language:   in.cfg.Language,
		Title:      n.ID,
		Policy:     in.cfg.Policy,
		AcceptedAt: now,
		Owner:      job.VaultOwner(in.cfg.Device),
	}})
	if err != nil {
		return true, 0, err
	}
	return true, 0, nil
}

// settling is how much longer an audio file must stay as it is before it
// counts as complete; zero once it has.
func (in *Intake) settling(path string, fi fs.FileInfo, now time.Time) time.Duration {
	s := stampOf(fi)
	seen, ok := in.seen[path]
	if !ok || seen.stamp != s {
		in.seen[path] = sighting{stamp: s, since: now}
		return in.cfg.Settle
	}
	if left := in.cfg.Settle - now.Sub(seen.since); left > 0 {
		return left
	}
	return 0
}

// capture gives a note to every complete audio file of the source folder
// that has none, before anything is sent anywhere. It returns how soon a
// file still being written should be looked at again.
func (in *Intake) capture(s scanned, now time.Time) time.Duration {
	dir := filepath.Join(in.cfg.Dir, in.cfg.SourceDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var wait time.Duration
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !isAudioName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		present[path] = true
		fi, err := e.Info()
		if err != nil {
			continue
		}
		id := strings.TrimSuffix(name, filepath.Ext(name))
		if notes := s.byID[id]; len(notes) > 0 || s.linked[in.rel(path)] || s.linked[name] {
			in.ledger.noted(name, stampOf(fi))
			continue
		}
		if in.ledger.hadNote(name, stampOf(fi)) {
			if key := "deleted:" + name; !in.told[key] {
				in.told[key] = true
				in.log.Info("vault: the note of a recording was deleted; the audio stays without one",
					"audio", in.rel(path))
			}
			continue
		}
		if w := in.settling(path, fi, now); w > 0 {
			if wait == 0 || w < wait {
				wait = w
			}
			continue
		}
		if fi.Size() == 0 {
			if key := "empty:" + path; !in.told[key] {
				in.told[key] = true
				in.log.Info("vault: an empty recording gets no note and no job", "audio", in.rel(path))
			}
			continue
		}
		n, err := in.makeNote(s, path, id, now)
		if err != nil {
			in.log.Warn("vault: cannot make the note of a recording", "audio", in.rel(path), "error", err)
			continue
		}
		s.byID[n.ID] = append(s.byID[n.ID], n)
		s.notes = append(s.notes, n)
	}
	for path := range in.seen {
		if !present[path] && filepath.Dir(path) == dir {
			delete(in.seen, path)
		}
	}
	return wait
}

// makeNote writes the note of a new recording into the inbox, state saved.
// Its voice-id is the file's name, made unique (and the file renamed to
// match) only if another note already has it.
func (in *Intake) makeNote(s scanned, path, id string, now time.Time) (Note, error) {
	ext := filepath.Ext(path)
	if len(s.byID[id]) > 0 || in.idTaken(id) {
		base := id
		for i := 2; ; i++ {
			id = fmt.Sprintf("%s-%d", base, i)
			target := filepath.Join(filepath.Dir(path), id+ext)
			if len(s.byID[id]) > 0 || in.idTaken(id) {
				continue
			}
			if _, err := os.Lstat(target); err == nil {
				continue
			}
			if err := os.Rename(path, target); err != nil {
				return Note{}, err
			}
			path = target
			break
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Note{}, err
	}
	f := Fields{ID: id, Status: Saved, Device: in.cfg.Device}
	var extra string
	if info, cut, ok := audio.Sniff(path); ok && cut {
		extra = "> [!warning]\n> " + fmt.Sprintf(messagesFor(in.cfg.Language).cutShort, clock(info.Duration))
	}
	content := newNote(f, "![["+in.rel(path)+"]]", extra)
	inbox := filepath.Join(in.cfg.Dir, in.cfg.InboxDir)
	notePath := filepath.Join(inbox, id+".md")
	for i := 2; ; i++ {
		err = createNote(notePath, content)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
		notePath = filepath.Join(inbox, fmt.Sprintf("%s %d.md", id, i))
	}
	if err != nil {
		return Note{}, err
	}
	in.ledger.noted(filepath.Base(path), stampOf(fi))
	in.log.Info("vault: recording saved", "note", in.rel(notePath), "voice_id", id, "cut_short", extra != "")
	n, err := parseNote(notePath, content)
	return n, err
}

// idTaken reports whether an earlier recording of the source folder had
// the id, though its note is gone.
func (in *Intake) idTaken(id string) bool {
	for name := range in.ledger.files {
		if strings.TrimSuffix(name, filepath.Ext(name)) == id {
			return true
		}
	}
	return false
}
