package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"time"
)

// Client sends the requests of one HTTP engine the way every engine must:
// one request per call, redirects not followed, answers read within a
// bound, and every failure classified the same way whatever the provider.
type Client struct {
	// HTTP has no overall timeout unless the caller gave one: a long
	// recording can take minutes, and the caller's context bounds each call.
	HTTP *http.Client
	// Service names the provider in messages ("AssemblyAI").
	Service string
	// Prefix starts errors that are not the provider's ("assemblyai").
	Prefix string
	// Secret is redacted from the provider's messages, which often echo it.
	Secret string
	// Header is sent with every request: credentials, Accept, User-Agent.
	Header http.Header
	// MaxResponse bounds an answer's body; the limit only protects the
	// worker from a misbehaving server.
	MaxResponse int64
	// Adjust, when set, refines the classified error of an answer other
	// than 2xx with what only this provider means: its own retry hints,
	// what a status says about one of its requests. detail is the
	// provider's message, scrubbed.
	Adjust func(err *Error, resp *http.Response, body []byte, what, detail string)
}

// UserAgent is what engines call themselves.
const UserAgent = "transcriber"

// DefaultMaxResponse is far above any transcript with timed words of hours
// of audio.
const DefaultMaxResponse = 64 << 20

// NewClient copies c (nil is a zero client) so that it does not follow
// redirects: following one would be a second request, and for 307/308 it
// cannot resend a streamed body anyway; surfacing the 3xx tells the
// operator to fix the base URL instead.
func NewClient(c *http.Client, service, prefix string) *Client {
	var hc http.Client
	if c != nil {
		hc = *c
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{
		HTTP: &hc, Service: service, Prefix: prefix, MaxResponse: DefaultMaxResponse,
		Header: http.Header{"Accept": {"application/json"}, "User-Agent": {UserAgent}},
	}
}

// NewRequest builds a request with the client's headers.
func (c *Client) NewRequest(ctx context.Context, method, target string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		// The error would repeat the URL, which may carry credentials.
		return nil, errors.New(c.Prefix + ": cannot build the request")
	}
	// A copy: a caller's Add must not reach the next request.
	req.Header = c.Header.Clone()
	return req, nil
}

// UploadRequest builds a request whose body is up, with its length
// announced: a provider can refuse a too large file before it arrives, and
// servers that do not take chunked bodies get one they can read.
func (c *Client) UploadRequest(ctx context.Context, method, target string, up *Upload) (*http.Request, error) {
	req, err := c.NewRequest(ctx, method, target, nil)
	if err != nil {
		return nil, err
	}
	req.Body = up.start()
	req.ContentLength = up.Length()
	return req, nil
}

// Do sends one request and returns the body of a 2xx answer. Anything else
// is a classified *Error or, on cancellation, the context's error. what
// names the request in messages ("upload"), empty for an engine that makes
// only one; up is the upload the request carries, nil for none.
func (c *Client) Do(ctx context.Context, req *http.Request, what string, up *Upload) (*http.Response, []byte, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, nil, c.requestError(ctx, err, what, up)
	}
	defer resp.Body.Close()
	body, ok, err := ReadAnswer(ctx, resp, c.MaxResponse, c.label(what), c.Service, what)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, c.statusError(resp, body, what, time.Now())
	}
	return resp, body, nil
}

// label starts a context error about the request what.
func (c *Client) label(what string) string {
	if what == "" {
		return c.Prefix + ": send request"
	}
	return c.Prefix + ": " + what
}

// requestError classifies a failure to get any answer. Cancellation stays a
// plain context error so that the caller can tell it from engine faults.
func (c *Client) requestError(ctx context.Context, err error, what string, up *Upload) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", c.label(what), ctx.Err())
	}
	// A failing local disk aborts the upload too, but says nothing about
	// the provider.
	if up != nil {
		if readErr := up.Close(); readErr != nil {
			return fmt.Errorf("%s: read audio: %w", c.Prefix, readErr)
		}
	}
	msg := "could not reach " + c.Service
	if what != "" {
		msg += " for the " + what
	}
	return &Error{Kind: Unreachable, Message: msg, Err: err}
}

// statusError classifies an answer other than 2xx by its status.
func (c *Client) statusError(resp *http.Response, body []byte, what string, now time.Time) *Error {
	code := resp.StatusCode
	if code >= 300 && code <= 399 {
		return &Error{Kind: Rejected, Status: code, Message: RedirectMessage(c.Service, resp)}
	}
	detail := ErrorDetail(body, code, c.Secret)
	kind := ClassifyHTTP(code)
	err := (&Error{Kind: kind, Status: code, Code: ProviderCode(body, c.Secret)}).KeepRaw(body, resp.Header.Get("Content-Type"))
	the, request := "", "request"
	if what != "" {
		the, request = " the "+what, what
	}
	switch kind {
	case Unauthorized:
		if what != "" {
			the = " for" + the
		}
		err.Message = c.Service + " refused the credentials" + the + ": " + detail
	case Rejected:
		err.Message = c.Service + " rejected the " + request + ": " + detail
	default:
		err.Message = c.Service + " cannot serve" + the + " now: " + detail
		err.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	if c.Adjust != nil {
		c.Adjust(err, resp, body, what, detail)
	}
	return err
}

// Upload streams a local file as a request body, between a fixed prefix
// and suffix (a form's fields, a JSON document around the audio), through
// a pipe: memory use does not depend on the size of the recording, and a
// late read by the transport never touches a closed file.
type Upload struct {
	file           *os.File
	size           int64
	prefix, suffix []byte
	base64         bool

	body *io.PipeReader
	src  *trackingReader
	done chan struct{}
}

// Encoding is how an upload writes the file between its prefix and suffix.
type Encoding int

const (
	// Raw sends the bytes as they are.
	Raw Encoding = iota
	// Base64 sends them in standard base64, for providers that take audio
	// inside a JSON document.
	Base64
)

// OpenUpload opens the file at path; Close releases it.
func OpenUpload(path string, prefix, suffix []byte, enc Encoding) (*Upload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open audio: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close() // only read, and the stat error is the news
		return nil, fmt.Errorf("stat audio: %w", err)
	}
	return &Upload{file: f, size: info.Size(), prefix: prefix, suffix: suffix, base64: enc == Base64}, nil
}

// Size is the file's size.
func (u *Upload) Size() int64 { return u.size }

// Length is the size of the whole body.
func (u *Upload) Length() int64 {
	n := u.size
	if u.base64 {
		n = int64(base64.StdEncoding.EncodedLen(int(n)))
	}
	return int64(len(u.prefix)) + n + int64(len(u.suffix))
}

func (u *Upload) start() io.ReadCloser {
	pr, pw := io.Pipe()
	u.body, u.src, u.done = pr, &trackingReader{r: u.file}, make(chan struct{})
	go func() {
		defer close(u.done)
		pw.CloseWithError(u.write(pw))
	}()
	return pr
}

func (u *Upload) write(w io.Writer) error {
	if _, err := w.Write(u.prefix); err != nil {
		return err
	}
	if u.base64 {
		enc := base64.NewEncoder(base64.StdEncoding, w)
		if _, err := io.Copy(enc, u.src); err != nil {
			return err
		}
		// Close writes the last, padded quantum.
		if err := enc.Close(); err != nil {
			return err
		}
	} else if _, err := io.Copy(w, u.src); err != nil {
		return err
	}
	_, err := w.Write(u.suffix)
	return err
}

// Close ends the upload if the transport has not consumed it, waits for
// the goroutine that writes it, closes the file and reports a failure to
// read it. It may be called more than once.
func (u *Upload) Close() error {
	if u.body != nil {
		_ = u.body.Close() // a pipe reader's Close always succeeds
		<-u.done
	}
	if u.file != nil {
		// The file was only read; a read failure is src.err below.
		_ = u.file.Close()
		u.file = nil
	}
	if u.src == nil {
		return nil
	}
	return u.src.err
}

// trackingReader remembers a read error of the source, which the pipe would
// otherwise present to the caller as a network failure.
type trackingReader struct {
	r   io.Reader
	err error
}

func (t *trackingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// switchWriter writes where w points now, so one multipart writer can put
// a form's head and its tail in separate buffers around a streamed file.
type switchWriter struct{ w io.Writer }

func (s *switchWriter) Write(p []byte) (int, error) { return s.w.Write(p) }

// FormParts are the bytes of a multipart form before and after its one
// file, whose content is streamed between them.
type FormParts struct {
	Head, Tail  []byte
	ContentType string
}

// Form lays out a multipart form: its fields in order, then one file.
func Form(fields [][2]string, fileField, fileName, fileType string) (FormParts, error) {
	var head, tail bytes.Buffer
	sw := &switchWriter{w: &head}
	mw := multipart.NewWriter(sw)
	// Options come before the file so that a server parsing the stream
	// knows them before the audio arrives.
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return FormParts{}, err
		}
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, fileField, fileName))
	h.Set("Content-Type", fileType)
	if _, err := mw.CreatePart(h); err != nil {
		return FormParts{}, err
	}
	sw.w = &tail
	if err := mw.Close(); err != nil {
		return FormParts{}, err
	}
	return FormParts{Head: head.Bytes(), Tail: tail.Bytes(), ContentType: mw.FormDataContentType()}, nil
}
