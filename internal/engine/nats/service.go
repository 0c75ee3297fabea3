package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/transcriber/transcriber/internal/engine"
)

// Recognize recognises the audio file at path for job. An *engine.Error
// whose Kind is a verdict (or Final) is the service's answer "error"; any
// other error is trouble worth another delivery.
type Recognize func(ctx context.Context, path string, job JobMessage) (engine.Result, error)

// Putter keeps the raw answers and large results in the shared store.
type Putter interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
}

// Service is the reference recognition service: it takes jobs from one
// queue, fetches each job's audio from its signed URL, recognises it, and
// publishes the result with the raw answer. Any number of them share a
// queue through one durable consumer, which hands each job to one.
type Service struct {
	X         *Exchange
	Queue     string
	Name      string
	Version   string
	Recognize Recognize
	// Store, when set, keeps the raw answers (raw_s3_key) and results too
	// large for a message (result_s3); it must be the store the workers
	// read. Keys follow KeyOf.
	Store Putter
	// KeyOf names a job's object in Store.
	KeyOf   func(jobID, name string) string
	HTTP    *http.Client
	WorkDir string
	Logger  *slog.Logger
}

// ConsumerName is the durable consumer the services of a queue share.
func ConsumerName(queue string) string { return "recognizer-" + queue }

// Largest audio a service downloads, and the inline text beyond which a
// result goes to the store instead of the message (the broker's default
// payload limit is 1 MiB).
const (
	maxAudio  = 2 << 30
	maxInline = 256 << 10
)

// workAckWait is how long the broker waits for a service to finish a job
// before handing it to another; a service at work says it is busy well
// within it.
const workAckWait = time.Minute

// Run takes jobs until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	var cons jetstream.Consumer
	for {
		_, err := s.X.Ensure(ctx)
		if err == nil {
			cons, err = s.X.JS.CreateOrUpdateConsumer(ctx, JobsStream, jetstream.ConsumerConfig{
				Durable: ConsumerName(s.Queue), Description: "recognition services of queue " + s.Queue,
				AckPolicy: jetstream.AckExplicitPolicy, AckWait: workAckWait, FilterSubject: JobsSubject(s.Queue),
				MaxAckPending: 64,
			})
		}
		if err == nil {
			break
		}
		s.Logger.Warn("recognizer waits for the broker", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryIn):
		}
	}
	s.Logger.Info("recognizer is taking jobs", "subject", JobsSubject(s.Queue), "service", s.Name)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, natsio.ErrTimeout) {
				s.Logger.Warn("recognizer fetch", "error", err)
				time.Sleep(time.Second)
			}
			continue
		}
		for msg := range batch.Messages() {
			s.handle(ctx, msg)
		}
	}
	return nil
}

func (s *Service) handle(ctx context.Context, msg jetstream.Msg) {
	msgID := msg.Headers().Get(jetstream.MsgIDHeader)
	var job JobMessage
	if err := json.Unmarshal(msg.Data(), &job); err != nil || job.SchemaVersion != SchemaVersion || job.JobID == "" || job.Submission < 1 || job.Audio.URL == "" {
		s.Logger.Warn("job message refused: not a version 1 job", "msg_id", msgID)
		_ = msg.Term()
		return
	}
	log := s.Logger.With("job_id", job.JobID, "submission", job.Submission)
	if time.Now().After(job.ReplyDeadline) {
		log.Info("job skipped: its reply deadline has passed")
		_ = msg.Ack()
		return
	}
	// The broker would hand the job to another service after its ack wait;
	// telling it we are at work keeps the job ours while we are.
	workCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(workAckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-workCtx.Done():
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	if err := s.publish(ctx, ResultMessage{Status: StatusProcessing}, job); err != nil {
		log.Warn("processing report not published", "error", err)
	}
	start := time.Now()
	res, err := s.work(workCtx, job)
	out := ResultMessage{Status: StatusDone, Metrics: map[string]float64{"seconds": time.Since(start).Seconds()}}
	if job.DurationSeconds > 0 {
		out.Metrics["real_time_factor"] = time.Since(start).Seconds() / job.DurationSeconds
	}
	if err != nil {
		e, ok := engine.AsError(err)
		if !ok || !(e.Kind.Verdict() || e.Final) {
			if ctx.Err() != nil {
				_ = msg.Nak()
				return
			}
			log.Warn("job handed back: recognition met temporary trouble", "error", err)
			_ = msg.NakWithDelay(10 * time.Second)
			return
		}
		code := e.Code
		if code == "" {
			code = strings.ToUpper(string(e.Kind))
		}
		out = ResultMessage{Status: StatusError, Error: &ErrorInfo{Code: code, Message: engine.Scrub(e.Message, "", 500)}}
		if len(e.Raw) > 0 {
			out.RawS3Key = s.keep(ctx, job, "raw.json", e.Raw, log)
		}
	} else {
		out.Language = res.Language
		for _, seg := range res.Segments {
			out.Segments = append(out.Segments, Segment{Start: seg.Start.Seconds(), End: seg.End.Seconds(), Text: seg.Text})
		}
		if len(res.Raw) > 0 {
			out.RawS3Key = s.keep(ctx, job, "raw"+rawExt(res.RawType), res.Raw, log)
		}
		text := res.Text
		out.Text = &text
		if len(text) > maxInline && s.Store != nil {
			big, _ := json.Marshal(map[string]any{"text": text, "language": out.Language, "segments": out.Segments})
			if key := s.keep(ctx, job, "result.json", big, log); key != "" {
				out.Text, out.Segments, out.ResultS3 = nil, nil, &ObjectRef{Key: key}
			}
		}
	}
	if err := s.publish(ctx, out, job); err != nil {
		log.Warn("job handed back: result not published", "error", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	if err := msg.Ack(); err != nil {
		log.Warn("job not acknowledged; the broker may hand it out again, and the repeat result changes nothing", "error", err)
	}
	log.Info("job answered", "status", out.Status)
}

func rawExt(mediaType string) string {
	if strings.HasPrefix(mediaType, "text/plain") {
		return ".txt"
	}
	if strings.HasPrefix(mediaType, "application/json") {
		return ".json"
	}
	return ".bin"
}

// keep stores a job's object and returns its key, or "" when there is no
// store or it failed: the result goes out without it.
func (s *Service) keep(ctx context.Context, job JobMessage, name string, data []byte, log *slog.Logger) string {
	if s.Store == nil || s.KeyOf == nil {
		return ""
	}
	key := s.KeyOf(job.JobID, fmt.Sprintf("recognizer-%d-%s", job.Submission, name))
	if _, err := s.Store.Put(ctx, key, bytes.NewReader(data)); err != nil {
		log.Warn("raw answer not stored", "key", key, "error", err)
		return ""
	}
	return key
}

// work fetches the audio and recognises it.
func (s *Service) work(ctx context.Context, job JobMessage) (engine.Result, error) {
	dir, err := os.MkdirTemp(s.WorkDir, "recognizer-*")
	if err != nil {
		return engine.Result{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary copy
	path := filepath.Join(dir, "audio"+extOf(job.Audio.MIMEType))
	if err := s.download(ctx, job.Audio.URL, path); err != nil {
		return engine.Result{}, err
	}
	return s.Recognize(ctx, path, job)
}

func extOf(mimeType string) string {
	switch mimeType {
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/flac":
		return ".flac"
	case "audio/ogg":
		return ".ogg"
	}
	return ".bin"
}

func (s *Service) download(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return engine.Errorf(engine.Rejected, "the audio URL is unusable")
	}
	client := s.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return &engine.Error{Kind: engine.Unreachable, Message: "fetch the audio", Err: err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound:
		// Expired, forged or removed: asking again gets the same.
		return &engine.Error{Kind: engine.Rejected, Status: resp.StatusCode, Code: "AUDIO_UNAVAILABLE", Message: "the audio URL was refused"}
	case resp.StatusCode != http.StatusOK:
		return &engine.Error{Kind: engine.Unavailable, Status: resp.StatusCode, Message: "fetch the audio"}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, maxAudio+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &engine.Error{Kind: engine.Unreachable, Message: "fetch the audio", Err: err}
	}
	if n > maxAudio {
		return &engine.Error{Kind: engine.Rejected, Code: "AUDIO_TOO_LARGE", Message: "the audio is larger than the service takes"}
	}
	return nil
}

// publish sends a result or report of the service's for job.
func (s *Service) publish(ctx context.Context, r ResultMessage, job JobMessage) error {
	r.SchemaVersion, r.JobID, r.Submission = SchemaVersion, job.JobID, job.Submission
	r.Service = ServiceInfo{Name: s.Name, Version: s.Version}
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	id := ResultMsgID(job.JobID, job.Submission)
	if !r.Final() {
		id += processingSuffix
	}
	m := natsio.NewMsg(ResultsSubject)
	m.Data = body
	m.Header.Set("Content-Type", "application/json")
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = s.X.JS.PublishMsg(pctx, m, jetstream.WithMsgID(id), jetstream.WithExpectStream(ResultsStream))
	return err
}
