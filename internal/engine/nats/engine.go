package nats

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/transcriber/transcriber/internal/audio"
	"github.com/transcriber/transcriber/internal/engine"
)

// Config locates the broker and says how services reach the audio.
type Config struct {
	// URL of the NATS server(s), comma-separated; required.
	URL string
	// CredsFile, Token and the TLS files are the usual NATS credentials;
	// all optional.
	CredsFile, Token          string
	TLSCA, TLSCert, TLSKey    string
	Service                   string
	ReplyDeadline             time.Duration
	AudioBaseURL, AudioSecret string
	// EmbedAddr is where "transcriber up" runs its own NATS server when the
	// engine is the default and URL is unset.
	EmbedAddr string
	// RecognizerEngine is the engine "transcriber recognizer" recognises
	// with.
	RecognizerEngine string
	// RecognizerHTTPAddr is where "transcriber recognizer" answers health
	// checks; empty serves nothing.
	RecognizerHTTPAddr string
	// Blobs, set by the wiring rather than a setting, reads the results
	// that services leave in the shared store (result_s3).
	Blobs Opener
}

// Opener reads objects of the blob store.
type Opener interface {
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// Connect dials the broker. It returns at once even when the broker is
// down and keeps trying in the background, so that a worker starts
// without it; publishes fail meanwhile, which the pipeline retries.
func Connect(c Config, name string) (*natsio.Conn, error) {
	opts := []natsio.Option{
		natsio.Name(name),
		natsio.RetryOnFailedConnect(true),
		natsio.MaxReconnects(-1),
		natsio.ReconnectWait(time.Second),
	}
	if c.CredsFile != "" {
		opts = append(opts, natsio.UserCredentials(c.CredsFile))
	}
	if c.Token != "" {
		opts = append(opts, natsio.Token(c.Token))
	}
	if c.TLSCA != "" || c.TLSCert != "" {
		tc, err := tlsConfig(c)
		if err != nil {
			return nil, err
		}
		opts = append(opts, natsio.Secure(tc))
	}
	nc, err := natsio.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", Redact(c.URL), err)
	}
	return nc, nil
}

// Redact hides the credentials a NATS URL may carry (nats://user:pass@host),
// so that the URL can be logged.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

func tlsConfig(c Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("NATS_TLS_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("NATS_TLS_CA holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("NATS_TLS_CERT and NATS_TLS_KEY: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Exchange is the broker's side of the protocol: the streams and the
// results bucket, made when missing.
type Exchange struct {
	JS jetstream.JetStream

	once    sync.Mutex
	results jetstream.KeyValue
}

// NewExchange works over a connection.
func NewExchange(nc *natsio.Conn) (*Exchange, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Exchange{JS: js}, nil
}

// retainFor is how long the streams keep messages and the bucket results:
// beyond the longest wait of a job for its result, and short enough that
// the broker's store does not grow without end.
const retainFor = 7 * 24 * time.Hour

// Ensure creates the streams and the bucket when missing. A failure is
// remembered as nothing, so the next call tries again.
func (x *Exchange) Ensure(ctx context.Context) (jetstream.KeyValue, error) {
	x.once.Lock()
	defer x.once.Unlock()
	if x.results != nil {
		return x.results, nil
	}
	for _, cfg := range []jetstream.StreamConfig{
		{Name: JobsStream, Subjects: []string{JobsSubjectPrefix + ">"}},
		{Name: ResultsStream, Subjects: []string{ResultsSubject}},
	} {
		cfg.Description = "transcriber's recognition exchange"
		cfg.Storage = jetstream.FileStorage
		cfg.MaxAge = retainFor
		cfg.Duplicates = DuplicateWindow
		// Create first and update only when the stream differs: the broker
		// answers a create of an identical stream without touching it,
		// while an update rewrites its store under consumers being added
		// by other services at the same moment (a data race in the broker).
		_, err := x.JS.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			_, err = x.JS.UpdateStream(ctx, cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("nats stream %s: %w", cfg.Name, err)
		}
	}
	kvCfg := jetstream.KeyValueConfig{
		Bucket: ResultsBucket, Description: "the first result of each submission of a recognition job",
		TTL: retainFor, Storage: jetstream.FileStorage,
	}
	kv, err := x.JS.CreateKeyValue(ctx, kvCfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = x.JS.UpdateKeyValue(ctx, kvCfg)
	}
	if err != nil {
		return nil, fmt.Errorf("nats bucket %s: %w", ResultsBucket, err)
	}
	x.results = kv
	return kv, nil
}

// resultKey is the bucket's key of a submission's result. Job ids come
// from outside, so they are encoded into the bucket's key alphabet.
func resultKey(jobID string, n int) string {
	return "r." + base64.RawURLEncoding.EncodeToString([]byte(jobID)) + "." + strconv.Itoa(n)
}

// Engine publishes jobs to a service queue and reads their results.
type Engine struct {
	x        *Exchange
	nc       *natsio.Conn
	service  string
	deadline time.Duration
	signer   *Signer
	blobs    Opener
}

// New connects to the broker and checks the configuration.
func New(c Config) (*Engine, error) {
	if c.URL == "" {
		return nil, errors.New("nats engine: NATS_URL is required")
	}
	if c.AudioBaseURL == "" || c.AudioSecret == "" {
		return nil, errors.New("nats engine: the audio URL base and secret are required")
	}
	signer, err := NewSigner(c.AudioBaseURL, c.AudioSecret)
	if err != nil {
		return nil, fmt.Errorf("nats engine: %w", err)
	}
	nc, err := Connect(c, "transcriber worker")
	if err != nil {
		return nil, fmt.Errorf("nats engine: %w", err)
	}
	x, err := NewExchange(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats engine: %w", err)
	}
	service := c.Service
	if service == "" {
		service = DefaultService
	}
	return &Engine{x: x, nc: nc, service: service, deadline: c.ReplyDeadline, signer: signer, blobs: c.Blobs}, nil
}

// Close hangs up on the broker.
func (e *Engine) Close() { e.nc.Close() }

// Name implements the activities' Recognizer.
func (e *Engine) Name() string { return Name }

// Format is 16 kHz mono WAV: every speech toolkit reads it without a
// decoder of its own.
func (e *Engine) Format() audio.Format { return audio.WAV16kMono }

// TakesAsIs accepts only what conversion would produce: services are
// promised 16 kHz mono WAV, and a recording already in it needs no copy.
func (e *Engine) TakesAsIs(info audio.Info) bool { return audio.WAV16kMono.Matches(info) }

// PollInterval is the check that finds a result whose wake-up was lost;
// the inbox normally wakes the job the moment a result arrives.
func (e *Engine) PollInterval() time.Duration { return pollInterval }

const pollInterval = 30 * time.Second

// publishTimeout bounds one attempt to hand a job to the broker.
const publishTimeout = 10 * time.Second

// ReplyDeadline is how long a service has to answer about audio of
// length d: the configured deadline, else ten minutes plus four times the
// audio, room for a queue in front of a busy service.
func (e *Engine) ReplyDeadline(d time.Duration) time.Duration {
	if e.deadline > 0 {
		return e.deadline
	}
	return 10*time.Minute + 4*d
}

// Submit publishes the job. A retried publish carries the same message id
// and the broker keeps one; the reply deadline starts now.
func (e *Engine) Submit(ctx context.Context, req engine.Request) (engine.Submission, error) {
	if req.JobID == "" || req.AudioKey == "" {
		return engine.Submission{}, engine.Errorf(engine.Rejected, "the nats engine needs the job and its stored audio")
	}
	n := max(req.Submission, 1)
	mimeType := req.MIME
	if mimeType == "" {
		mimeType = e.Format().MIME
	}
	deadline := e.ReplyDeadline(req.Duration)
	expires := time.Now().Add(deadline).UTC().Truncate(time.Second)
	msg := JobMessage{
		SchemaVersion: SchemaVersion, JobID: req.JobID, Submission: n, Service: e.service,
		Language: req.Language, DurationSeconds: req.Duration.Seconds(),
		ReplyDeadline: expires, ReplySubject: ResultsSubject,
		Audio: Audio{URL: e.signer.Sign(req.AudioKey, expires), MIMEType: mimeType, ExpiresAt: expires},
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return engine.Submission{}, fmt.Errorf("nats: encode job message: %w", err)
	}
	// The step's own deadline is sized for recognising audio; a broker
	// that has not acknowledged within seconds is down, and the attempt
	// should end so that the back-off decides about the next.
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if _, err := e.x.Ensure(ctx); err != nil {
		return engine.Submission{}, unreachable("set up the exchange", err)
	}
	m := natsio.NewMsg(JobsSubject(e.service))
	m.Data = body
	m.Header.Set("Content-Type", "application/json")
	if _, err := e.x.JS.PublishMsg(ctx, m, jetstream.WithMsgID(JobMsgID(req.JobID, n)), jetstream.WithExpectStream(JobsStream)); err != nil {
		return engine.Submission{}, unreachable("publish the job", err)
	}
	return engine.Submission{OperationID: OperationID(req.JobID, n), Deadline: deadline}, nil
}

// unreachable is a broker that did not acknowledge: the job was not handed
// over, which is worth another attempt and, after the last, no_ack.
func unreachable(what string, err error) *engine.Error {
	return &engine.Error{Kind: engine.Unreachable, Message: "nats: the broker did not acknowledge: " + what, Err: err}
}

// Check reads the submission's result, if the inbox has kept one.
func (e *Engine) Check(ctx context.Context, operationID string) (engine.Submission, error) {
	jobID, n, err := ParseOperationID(operationID)
	if err != nil {
		return engine.Submission{}, engine.Errorf(engine.Rejected, "%s", err.Error())
	}
	kv, err := e.x.Ensure(ctx)
	if err != nil {
		return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Message: "nats: results bucket", Err: err}
	}
	entry, err := kv.Get(ctx, resultKey(jobID, n))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return engine.Submission{OperationID: operationID}, nil
	}
	if err != nil {
		return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Message: "nats: read the result", Err: err}
	}
	var r ResultMessage
	if err := json.Unmarshal(entry.Value(), &r); err != nil {
		return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Message: "nats: the kept result is not JSON", Err: err}
	}
	return e.settle(ctx, r, entry.Value())
}

// maxResultObject bounds a result a service left in the shared store.
const maxResultObject = 64 << 20

func (e *Engine) settle(ctx context.Context, r ResultMessage, raw []byte) (engine.Submission, error) {
	if r.Status == StatusError {
		code, msg := "", ""
		if r.Error != nil {
			code = engine.Scrub(r.Error.Code, "", maxCode)
			msg = engine.Scrub(r.Error.Message, "", 500)
		}
		who := "the recognition service"
		if r.Service.Name != "" {
			who = "recognition service " + engine.Scrub(r.Service.Name, "", maxName)
		}
		err := &engine.Error{Kind: engine.Unavailable, Final: true, Code: code, Message: who + " gave up: " + msg}
		return engine.Submission{}, err.KeepRaw(raw, "application/json")
	}
	body := struct {
		Text     string    `json:"text"`
		Language string    `json:"language"`
		Segments []Segment `json:"segments"`
	}{Language: r.Language, Segments: r.Segments}
	if r.Text != nil {
		body.Text = *r.Text
	}
	if r.ResultS3 != nil {
		if e.blobs == nil {
			return engine.Submission{}, engine.Errorf(engine.Unavailable, "nats: the result is in the shared store, which this worker cannot read")
		}
		if err := readObject(ctx, e.blobs, r.ResultS3.Key, &body); err != nil {
			return engine.Submission{}, &engine.Error{Kind: engine.Unavailable, Message: "nats: read result_s3", Err: err}
		}
	}
	res := &engine.Result{Text: body.Text, Language: body.Language, Raw: raw, RawType: "application/json",
		Service: r.Service.Name, ServiceVersion: r.Service.Version, NeedsCheck: r.Status == StatusNeedsCheck}
	for _, s := range body.Segments {
		res.Segments = append(res.Segments, engine.Segment{Start: seconds(s.Start), End: seconds(s.End), Text: s.Text})
	}
	return engine.Submission{Result: res}, nil
}

func readObject(ctx context.Context, blobs Opener, key string, v any) error {
	rc, err := blobs.Open(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	data, tooLarge, err := engine.ReadLimited(rc, maxResultObject)
	if err != nil {
		return err
	}
	if tooLarge {
		return fmt.Errorf("%s is larger than %d bytes", key, maxResultObject)
	}
	return json.Unmarshal(data, v)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
