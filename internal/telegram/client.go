// Package telegram is transcriber's Telegram intake and courier: the bot
// that accepts voice notes and starts jobs, and the parts of a job that talk
// to Telegram — fetching the recording, keeping a status message up to date
// and replying with the transcript.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// DefaultEndpoint is the cloud Bot API.
const DefaultEndpoint = "https://api.telegram.org"

// CloudDownloadLimit is the largest file the cloud Bot API lets a bot
// download; a local Bot API server (telegram-bot-api --local) has none.
const CloudDownloadLimit = 20 << 20

// Client calls the Bot API of one bot at a configurable endpoint: methods at
// <endpoint>/bot<token>/<method>, files at <endpoint>/file/bot<token>/<path>,
// as both the cloud and the local Bot API servers serve them.
type Client struct {
	token    string
	endpoint string
	http     *http.Client
	api      *tgbotapi.BotAPI
}

// NewClient prepares a client; it makes no request.
func NewClient(token, endpoint string, hc *http.Client) (*Client, error) {
	if token == "" {
		return nil, errors.New("telegram: bot token is empty")
	}
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("telegram: TELEGRAM_API_ENDPOINT must be an http(s) URL such as https://api.telegram.org")
	}
	if hc == nil {
		hc = &http.Client{}
	}
	endpoint = strings.TrimRight(endpoint, "/")
	// The library would call getMe here and fail start-up while Telegram is
	// unreachable; the intake checks the token itself, with retries.
	api := &tgbotapi.BotAPI{Token: token, Client: hc, Buffer: 100}
	api.SetAPIEndpoint(endpoint + "/bot%s/%s")
	return &Client{token: token, endpoint: endpoint, http: hc, api: api}, nil
}

// Official reports whether the client talks to the cloud Bot API, whose
// download limit applies.
func (c *Client) Official() bool { return c.endpoint == DefaultEndpoint }

// with returns a copy of the library's client whose requests carry ctx: the
// library itself makes requests without a context.
func (c *Client) with(ctx context.Context) *tgbotapi.BotAPI {
	api := *c.api
	api.Client = ctxDoer{ctx: ctx, hc: c.http}
	return &api
}

type ctxDoer struct {
	ctx context.Context
	hc  *http.Client
}

func (d ctxDoer) Do(r *http.Request) (*http.Response, error) { return d.hc.Do(r.WithContext(d.ctx)) }

// GetMe checks the token and returns the bot's identity.
func (c *Client) GetMe(ctx context.Context) (tgbotapi.User, error) {
	u, err := c.with(ctx).GetMe()
	return u, c.wrap(ctx, "getMe", err)
}

// GetUpdates long-polls for updates from offset on. Calling it with a
// higher offset confirms the updates before it, and Telegram then forgets
// them.
func (c *Client) GetUpdates(ctx context.Context, offset int, timeout time.Duration) ([]tgbotapi.Update, error) {
	cfg := tgbotapi.NewUpdate(offset)
	cfg.Timeout = int(timeout / time.Second)
	cfg.AllowedUpdates = []string{"message"}
	updates, err := c.with(ctx).GetUpdates(cfg)
	return updates, c.wrap(ctx, "getUpdates", err)
}

// Send sends a message or document and returns what Telegram made of it.
func (c *Client) Send(ctx context.Context, m tgbotapi.Chattable) (tgbotapi.Message, error) {
	msg, err := c.with(ctx).Send(m)
	return msg, c.wrap(ctx, "send", err)
}

// Request calls a method whose result is not a message (edits, chat actions).
func (c *Client) Request(ctx context.Context, m tgbotapi.Chattable) error {
	_, err := c.with(ctx).Request(m)
	return c.wrap(ctx, "request", err)
}

// Download writes the file with fileID to w. A local Bot API server
// answers getFile with an absolute path on its own disk, which is read
// directly; otherwise the file is fetched from the configured endpoint (the
// library would always use the cloud's).
func (c *Client) Download(ctx context.Context, fileID string, w io.Writer) (int64, error) {
	f, err := c.with(ctx).GetFile(tgbotapi.FileConfig{FileID: fileID})
	if err != nil {
		return 0, c.wrap(ctx, "getFile", err)
	}
	if filepath.IsAbs(f.FilePath) {
		src, err := os.Open(f.FilePath)
		if err != nil {
			return 0, &Error{Description: "the local Bot API server's file is not readable here: " + err.Error(), Err: err}
		}
		defer func() { _ = src.Close() }() // only read
		n, err := io.Copy(w, src)
		if err != nil {
			return n, fmt.Errorf("read %s: %w", filepath.Base(f.FilePath), err)
		}
		return n, nil
	}
	u := c.endpoint + "/file/bot" + c.token + "/" + strings.TrimLeft(f.FilePath, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, errors.New("telegram: bad file path")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, c.wrap(ctx, "download", scrubURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, &Error{Code: resp.StatusCode, Description: "download answered " + resp.Status}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, c.wrap(ctx, "download", scrubURL(err))
	}
	return n, nil
}

// Error is a failure of a Bot API call.
type Error struct {
	// Code is the Bot API's error_code (an HTTP status), 0 when the request
	// got no answer.
	Code        int
	Description string
	RetryAfter  time.Duration
	Err         error
}

func (e *Error) Error() string {
	if e.Code == 0 {
		return "telegram: " + e.Description
	}
	return fmt.Sprintf("telegram: %d %s", e.Code, e.Description)
}

func (e *Error) Unwrap() error { return e.Err }

// Temporary reports whether the same call may succeed later.
func (e *Error) Temporary() bool {
	return e.Code == 0 || e.Code == http.StatusTooManyRequests || e.Code >= 500
}

// RetryDelay is how long Telegram asked to wait (429 retry_after).
func (e *Error) RetryDelay() time.Duration { return e.RetryAfter }

// TooBig reports the cloud Bot API's refusal to hand out a large file.
func (e *Error) TooBig() bool {
	return strings.Contains(strings.ToLower(e.Description), "file is too big")
}

// NotModified reports an edit that would not change the message.
func (e *Error) NotModified() bool {
	return strings.Contains(strings.ToLower(e.Description), "message is not modified")
}

// Gone reports an edit of a message that is not there to edit any more
// (the sender deleted it) or can no longer be edited.
func (e *Error) Gone() bool {
	d := strings.ToLower(e.Description)
	return e.Code == http.StatusBadRequest &&
		(strings.Contains(d, "message to edit not found") || strings.Contains(d, "message can't be edited"))
}

// wrap classifies an error of the library. Cancellation stays the
// context's error. URLs in transport errors carry the token, so they are
// removed.
func (c *Client) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("telegram %s: %w", op, ctx.Err())
	}
	var apiErr *tgbotapi.Error
	if errors.As(err, &apiErr) {
		return &Error{Code: apiErr.Code, Description: apiErr.Message, RetryAfter: time.Duration(apiErr.RetryAfter) * time.Second}
	}
	err = scrubURL(err)
	return &Error{Description: op + ": " + strings.ReplaceAll(err.Error(), c.token, "<token>"), Err: err}
}

// scrubURL drops the request URL from a transport error: it contains the
// bot token.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}
