package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/transcriber/transcriber/activities"
	"github.com/transcriber/transcriber/internal/job"
)

// documentAfter is how many messages a transcript may take before it is
// sent as a .txt document instead: a wall of messages is hard to read and
// to forward.
const documentAfter = 3

// previewRunes is the length of the preview sent with a document; captions
// are limited to 1024 characters.
const previewRunes = 700

// Messenger does a job's talking to Telegram: it fetches the recording,
// keeps the status message up to date and delivers the outcome.
type Messenger struct {
	c *Client
}

var (
	_ activities.Replier = (*Messenger)(nil)
	_ activities.Fetcher = (*Messenger)(nil)
)

// NewMessenger returns a messenger using c.
func NewMessenger(c *Client) *Messenger { return &Messenger{c: c} }

// Fetch downloads a file by its id.
func (m *Messenger) Fetch(ctx context.Context, fileID string, w io.Writer) (int64, error) {
	n, err := m.c.Download(ctx, fileID, w)
	var te *Error
	if errors.As(err, &te) {
		return n, &fetchError{te}
	}
	return n, err
}

// fetchError judges a failed download: some answers mean the file will never
// come.
type fetchError struct{ err *Error }

func (e *fetchError) Error() string             { return e.err.Error() }
func (e *fetchError) Unwrap() error             { return e.err }
func (e *fetchError) Temporary() bool           { return e.err.Temporary() }
func (e *fetchError) RetryDelay() time.Duration { return e.err.RetryDelay() }

// Verdict implements the activities' verdictError.
func (e *fetchError) Verdict() (job.Kind, bool) {
	switch {
	case e.err.TooBig():
		return job.FileTooBig, true
	case e.err.Code == http.StatusBadRequest || e.err.Code == http.StatusNotFound:
		return job.SourceFileMissing, true
	}
	return "", false
}

// Acknowledge sends the status message, quoting the recording.
func (m *Messenger) Acknowledge(ctx context.Context, to job.Recipient) (job.Ref, error) {
	c, err := chatOf(to)
	if err != nil {
		return "", err
	}
	msg := tgbotapi.NewMessage(c.chatID, textsFor(to.Language).received)
	msg.ReplyToMessageID = c.messageID
	msg.AllowSendingWithoutReply = true
	msg.DisableNotification = true
	sent, err := m.c.Send(ctx, msg)
	if err != nil {
		return "", err
	}
	return job.Ref(strconv.Itoa(sent.MessageID)), nil
}

// ShowProgress edits the status message to name the job's state.
func (m *Messenger) ShowProgress(ctx context.Context, to job.Recipient, s job.State) error {
	c, err := chatOf(to)
	if err != nil {
		return err
	}
	return m.edit(ctx, c, progressText(to.Language, s))
}

func progressText(lang string, s job.State) string {
	switch s {
	case job.Done:
		return "✅ " + stateText(lang, s)
	case job.Failed, job.Dead, job.Cancelled:
		return "⚠️ " + stateText(lang, s)
	}
	return "⏳ " + stateText(lang, s) + "…"
}

// Deliver sends the outcome as replies to the recording: the transcript in
// as many messages as it needs, or as a document when that would be too
// many; a failure as one notice. An outcome that fits one message goes
// into the status message instead, when the job allows it: Telegram
// answers a repeated edit with "message is not modified", so a retry
// cannot deliver it twice, and the status message already quotes the
// recording. Parts that are sent as messages of their own go through the
// part log.
func (m *Messenger) Deliver(ctx context.Context, o activities.Outcome, log activities.PartLog) (activities.Delivery, error) {
	to := o.Recipient
	c, err := chatOf(to)
	if err != nil {
		return activities.Delivery{}, err
	}
	var texts []string
	var doc *tgbotapi.DocumentConfig
	switch o.State {
	case job.Done:
		texts = split(o.Text, MessageLimit)
		if len(texts) > documentAfter {
			d := tgbotapi.NewDocument(c.chatID, tgbotapi.FileBytes{Name: "transcript.txt", Bytes: []byte(o.Text + "\n")})
			d.Caption = fmt.Sprintf(textsFor(to.Language).documentCaption, preview(o.Text, previewRunes))
			d.ReplyToMessageID = c.messageID
			d.AllowSendingWithoutReply = true
			doc, texts = &d, nil
		}
	default:
		texts = []string{failureNotice(to.Language, o.State, o.Failure, o.Language)}
	}
	if o.UseStatusMessage && c.statusMessageID != 0 && len(texts) == 1 {
		err := m.edit(ctx, c, texts[0])
		var te *Error
		if err == nil || !errors.As(err, &te) || !te.Gone() {
			return activities.Delivery{InStatusMessage: err == nil}, err
		}
		// The sender deleted the status message: the outcome still matters.
	}
	var parts []tgbotapi.Chattable
	if doc != nil {
		parts = append(parts, *doc)
	}
	for _, t := range texts {
		parts = append(parts, reply(c, t))
	}
	for i := log.Sent(); i < len(parts); i++ {
		if err := log.Sending(ctx, i); err != nil {
			return activities.Delivery{}, err
		}
		if _, err := m.c.Send(ctx, parts[i]); err != nil {
			return activities.Delivery{}, err
		}
		if err := log.Delivered(ctx, i); err != nil {
			return activities.Delivery{}, err
		}
	}
	return activities.Delivery{}, nil
}

// edit replaces the status message's text; an edit that changes nothing
// has been made before and succeeds.
func (m *Messenger) edit(ctx context.Context, c chat, text string) error {
	err := m.c.Request(ctx, tgbotapi.NewEditMessageText(c.chatID, c.statusMessageID, text))
	var te *Error
	if errors.As(err, &te) && te.NotModified() {
		return nil
	}
	return err
}

func reply(c chat, text string) tgbotapi.MessageConfig {
	msg := tgbotapi.NewMessage(c.chatID, text)
	msg.ReplyToMessageID = c.messageID
	// The sender may have deleted the recording; the text still matters.
	msg.AllowSendingWithoutReply = true
	return msg
}

func preview(text string, n int) string {
	r := []rune(text)
	if len(r) <= n {
		return text
	}
	cut := string(r[:n])
	return cut + "…"
}

// recipient is how a job addresses a sender of the bot: the chat, and the
// message with the recording that replies quote.
func recipient(chatID int64, messageID int, language string) *job.Recipient {
	return &job.Recipient{
		Address:  job.Ref(strconv.FormatInt(chatID, 10)),
		Message:  job.Ref(strconv.Itoa(messageID)),
		Language: language,
	}
}

// chat is a recipient read back as Telegram's numbers.
type chat struct {
	chatID                     int64
	messageID, statusMessageID int
}

func chatOf(to job.Recipient) (chat, error) {
	var c chat
	var err error
	if c.chatID, err = strconv.ParseInt(string(to.Address), 10, 64); err != nil {
		return c, fmt.Errorf("recipient address %q is not a Telegram chat id", to.Address)
	}
	// The message ids are optional: a reply without a quote still arrives.
	if to.Message != "" {
		if c.messageID, err = strconv.Atoi(string(to.Message)); err != nil {
			return c, fmt.Errorf("recipient message %q is not a Telegram message id", to.Message)
		}
	}
	if to.StatusMessage != "" {
		if c.statusMessageID, err = strconv.Atoi(string(to.StatusMessage)); err != nil {
			return c, fmt.Errorf("status message %q is not a Telegram message id", to.StatusMessage)
		}
	}
	return c, nil
}
