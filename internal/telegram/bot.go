package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/transcriber/transcriber/internal/blob"
	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/internal/jobctl"
	"github.com/transcriber/transcriber/workflows"
)

// Jobs is what the bot asks of the job-control layer (*jobctl.Service).
type Jobs interface {
	Start(ctx context.Context, req jobctl.StartRequest) (existing bool, err error)
	Status(ctx context.Context, id string) (workflows.Status, error)
	Revive(ctx context.Context, id string) (jobctl.Revival, error)
}

// Store keeps small per-chat settings.
type Store interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// BotConfig is what the intake needs besides its connections.
type BotConfig struct {
	// Allowed lists numeric user ids and @usernames; empty lets nobody in.
	Allowed []string
	// Engine and Policy of the jobs the bot starts.
	Engine string
	Policy workflows.Policy
	// Route, when set, picks the engine and its fallback by the chat's
	// language instead: people who write in Russian mostly speak it too.
	Route func(language string) (engine, fallback string)
	// MaxDuration is shown in /help.
	MaxDuration time.Duration
	// PollTimeout is how long one getUpdates waits for news.
	PollTimeout time.Duration
}

// Bot is the Telegram intake: it long-polls for messages, starts a job for
// every recording from an allowed user, and answers commands. An update is
// confirmed to Telegram only after it was handled — its job started — so a
// crash or restart makes Telegram deliver it again, and the job id derived
// from chat and message makes that second delivery find the same job.
type Bot struct {
	c     *Client
	jobs  Jobs
	store Store
	cfg   BotConfig
	log   *slog.Logger
}

// NewBot returns an intake; Run starts it.
func NewBot(c *Client, jobs Jobs, store Store, cfg BotConfig, log *slog.Logger) *Bot {
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	return &Bot{c: c, jobs: jobs, store: store, cfg: cfg, log: log.With("component", "telegram")}
}

// Run polls until ctx ends. It returns early only when Telegram rejects the
// token.
func (b *Bot) Run(ctx context.Context) error {
	me, err := b.identify(ctx)
	if err != nil {
		return err
	}
	if len(b.cfg.Allowed) == 0 {
		b.log.Warn("nobody may use the bot: set TELEGRAM_ALLOWED_USERS to numeric user ids or @usernames, comma-separated; strangers are told their id", "bot", "@"+me.UserName)
	} else {
		b.log.Info("telegram bot is running", "bot", "@"+me.UserName, "allowed_users", len(b.cfg.Allowed))
	}
	offset, wait := 0, time.Second
	for ctx.Err() == nil {
		updates, err := b.c.GetUpdates(ctx, offset, b.cfg.PollTimeout)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			b.log.Warn("getUpdates failed; retrying", "error", err, "retry_in", wait.String())
			sleep(ctx, wait)
			wait = min(wait*2, 30*time.Second)
			continue
		}
		wait = time.Second
		for _, u := range updates {
			if err := b.handle(ctx, u); err != nil {
				if ctx.Err() != nil {
					break
				}
				// Not confirmed: Telegram hands it over again next time.
				b.log.Warn("update not handled; it will be retried", "update_id", u.UpdateID, "error", err)
				sleep(ctx, 2*time.Second)
				break
			}
			offset = u.UpdateID + 1
		}
	}
	return nil
}

// identify checks the token, waiting out a Telegram that cannot be reached.
func (b *Bot) identify(ctx context.Context) (tgbotapi.User, error) {
	wait := time.Second
	for {
		me, err := b.c.GetMe(ctx)
		if err == nil {
			return me, nil
		}
		var te *Error
		if errors.As(err, &te) && te.Code == 401 {
			return me, errors.New("telegram rejected TELEGRAM_BOT_TOKEN (401 Unauthorized); check it with @BotFather")
		}
		if ctx.Err() != nil {
			return me, ctx.Err()
		}
		b.log.Warn("telegram unreachable; retrying", "error", err, "retry_in", wait.String())
		sleep(ctx, wait)
		wait = min(wait*2, time.Minute)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// handle acts on one update. An error means it was not handled and must
// come again.
func (b *Bot) handle(ctx context.Context, u tgbotapi.Update) error {
	m := u.Message
	if m == nil || m.From == nil || m.Chat == nil {
		return nil
	}
	lang := b.language(ctx, m)
	if !b.allowed(m.From) {
		// Nothing of a stranger's is downloaded or stored.
		b.log.Info("refused a stranger", "user_id", m.From.ID)
		return b.say(ctx, m, fmt.Sprintf(textsFor(lang).stranger, m.From.ID))
	}
	if m.IsCommand() {
		return b.command(ctx, m, lang)
	}
	media, ok := recording(m)
	if !ok {
		return b.say(ctx, m, textsFor(lang).notMedia)
	}
	// Telegram gives every file it holds a size, and refuses to store an
	// empty one; a recording of no bytes has nothing to transcribe, and
	// the empty capture starts no job.
	if media.size == 0 {
		b.log.Info("refused an empty recording", "chat_id", m.Chat.ID, "kind", media.kind)
		return b.say(ctx, m, textsFor(lang).empty)
	}
	if media.size > CloudDownloadLimit && b.c.Official() {
		return b.say(ctx, m, fmt.Sprintf(textsFor(lang).tooBig, humanSize(media.size)))
	}
	return b.start(ctx, m, media, lang)
}

// start starts the recording's job. A job that exists already — the update
// came twice — is left as it is.
func (b *Bot) start(ctx context.Context, m *tgbotapi.Message, media media, lang string) error {
	id := workflows.TelegramJobID(m.Chat.ID, m.MessageID)
	// The speech language, not the language the bot speaks here, picks the
	// engine and travels with the job, so that an engine that cannot hear
	// it refuses the job at once instead of answering in the wrong words.
	speech := b.speechLanguage(ctx, m)
	engine, fallback := b.cfg.Engine, ""
	if b.cfg.Route != nil {
		engine, fallback = b.cfg.Route(speech)
	}
	in := workflows.Input{
		Source:     job.SourceTelegram,
		Original:   workflows.Original{FileID: media.fileID, Name: media.name, MIME: media.mime, Size: media.size, Ext: media.ext},
		Engine:     engine,
		Fallback:   fallback,
		Language:   speech,
		Recipient:  recipient(m.Chat.ID, m.MessageID, lang),
		Policy:     b.cfg.Policy,
		AcceptedAt: time.Unix(int64(m.Date), 0),
		Owner:      job.TelegramOwner(m.From.ID),
	}
	// A message has one job ever, so a redelivered update finds the job
	// it started before.
	existing, err := b.jobs.Start(ctx, jobctl.StartRequest{ID: id, Input: in, Policy: jobctl.OnePerID})
	if err != nil {
		return err
	}
	if existing {
		b.log.Info("recording seen again; its job exists", "job_id", id)
		return nil
	}
	b.log.Info("recording accepted", "job_id", id, "kind", media.kind, "size", media.size)
	return nil
}

func (b *Bot) command(ctx context.Context, m *tgbotapi.Message, lang string) error {
	t := textsFor(lang)
	switch m.Command() {
	case "lang":
		arg := strings.ToLower(strings.TrimSpace(m.CommandArguments()))
		if arg != "en" && arg != "ru" {
			return b.say(ctx, m, t.langUsage)
		}
		s := b.settings(ctx, m.Chat.ID)
		s.Language = arg
		if err := b.saveSettings(ctx, m.Chat.ID, s); err != nil {
			return err
		}
		return b.say(ctx, m, textsFor(arg).langSet)
	case "speech":
		arg := strings.ToLower(strings.TrimSpace(m.CommandArguments()))
		if arg == "" || job.CheckLanguage(arg) != nil {
			return b.say(ctx, m, fmt.Sprintf(t.speechUsage, languageName(lang, b.speechLanguage(ctx, m))))
		}
		s := b.settings(ctx, m.Chat.ID)
		s.Speech = arg
		if err := b.saveSettings(ctx, m.Chat.ID, s); err != nil {
			return err
		}
		return b.say(ctx, m, fmt.Sprintf(t.speechSet, languageName(lang, arg)))
	case "status", "retry":
		if m.ReplyToMessage == nil {
			return b.say(ctx, m, t.replyToRecording)
		}
		id := workflows.TelegramJobID(m.Chat.ID, m.ReplyToMessage.MessageID)
		if m.Command() == "status" {
			st, err := b.jobs.Status(ctx, id)
			if errors.Is(err, jobctl.ErrNotFound) {
				return b.say(ctx, m, t.noJob)
			}
			if err != nil {
				return err
			}
			text := fmt.Sprintf(t.statusOf, id, stateText(lang, st.State))
			if st.Failure != nil {
				text += "\n" + failureNotice(lang, st.State, st.Failure, st.Language)
			}
			return b.say(ctx, m, text)
		}
		_, err := b.jobs.Revive(ctx, id)
		var refused *jobctl.NotRevivableError
		switch {
		case errors.As(err, &refused):
			return b.say(ctx, m, fmt.Sprintf(t.notRetriable, stateText(lang, refused.State)))
		case errors.Is(err, jobctl.ErrNotFound):
			return b.say(ctx, m, t.noJob)
		case err != nil:
			return err
		}
		return b.say(ctx, m, t.retried)
	default: // start, help and anything unknown
		return b.say(ctx, m, helpText(lang, b.c.Official(), b.cfg.MaxDuration))
	}
}

// helpText is the answer to /start and /help. Only the cloud Bot API
// limits downloads to 20 MB; a local Bot API server hands out files of any
// size.
func helpText(lang string, official bool, maxDuration time.Duration) string {
	t := textsFor(lang)
	limit := ""
	if official {
		limit = t.cloudLimit
	}
	return fmt.Sprintf(t.help, limit, maxDuration)
}

// say answers a message.
func (b *Bot) say(ctx context.Context, m *tgbotapi.Message, text string) error {
	msg := tgbotapi.NewMessage(m.Chat.ID, text)
	msg.ReplyToMessageID = m.MessageID
	msg.AllowSendingWithoutReply = true
	_, err := b.c.Send(ctx, msg)
	var te *Error
	if errors.As(err, &te) && !te.Temporary() {
		// The chat cannot be answered (the bot was blocked); trying again
		// cannot help, so the update counts as handled.
		b.log.Warn("answer undelivered", "chat_id", m.Chat.ID, "error", err)
		return nil
	}
	return err
}

func (b *Bot) allowed(u *tgbotapi.User) bool {
	for _, a := range b.cfg.Allowed {
		if name, ok := strings.CutPrefix(a, "@"); ok {
			if u.UserName != "" && strings.EqualFold(name, u.UserName) {
				return true
			}
		} else if a == strconv.FormatInt(u.ID, 10) {
			return true
		}
	}
	return false
}

// chatSettings are a chat's choices, kept in the blob store.
type chatSettings struct {
	Language string `json:"language,omitempty"`
	// Speech is the language people speak in this chat's recordings.
	Speech string `json:"speech,omitempty"`
}

func settingsKey(chatID int64) string {
	return "chats/" + strconv.FormatInt(chatID, 10) + "/settings.json"
}

// settings are the chat's choices; none when it made none or they cannot
// be read (which is logged, and the defaults serve).
func (b *Bot) settings(ctx context.Context, chatID int64) chatSettings {
	var s chatSettings
	r, err := b.store.Open(ctx, settingsKey(chatID))
	if err != nil {
		if !errors.Is(err, blob.ErrNotFound) {
			b.log.Warn("chat settings unreadable", "chat_id", chatID, "error", err)
		}
		return s
	}
	defer r.Close()
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		b.log.Warn("chat settings unreadable", "chat_id", chatID, "error", err)
		return chatSettings{}
	}
	return s
}

func (b *Bot) saveSettings(ctx context.Context, chatID int64, s chatSettings) error {
	body, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("save chat settings: %w", err)
	}
	if _, err := b.store.Put(ctx, settingsKey(chatID), strings.NewReader(string(body))); err != nil {
		return fmt.Errorf("save chat settings: %w", err)
	}
	return nil
}

// language is the chat's /lang choice, else the sender's app language.
func (b *Bot) language(ctx context.Context, m *tgbotapi.Message) string {
	if s := b.settings(ctx, m.Chat.ID); s.Language != "" {
		return s.Language
	}
	return Language(m.From.LanguageCode)
}

// speechLanguage is the chat's /speech choice, else the primary subtag of
// the sender's app language (people mostly speak the language their phone
// is set to), else empty: the engine decides.
func (b *Bot) speechLanguage(ctx context.Context, m *tgbotapi.Message) string {
	if s := b.settings(ctx, m.Chat.ID); s.Speech != "" {
		return s.Speech
	}
	code, _, _ := strings.Cut(strings.ToLower(m.From.LanguageCode), "-")
	if !job.IsLanguageCode(code) {
		return ""
	}
	return code
}

// media is a recording found in a message.
type media struct {
	kind, fileID, name, mime, ext string
	size                          int64
}

// recording finds what can be transcribed in a message: a voice note, an
// audio file, a video note, a video, or a document that is audio or video
// by its type or name.
func recording(m *tgbotapi.Message) (media, bool) {
	switch {
	case m.Voice != nil:
		// Voice notes are OGG/Opus; ".oga" confuses some tools.
		return media{kind: "voice", fileID: m.Voice.FileID, mime: m.Voice.MimeType, ext: ".ogg", size: int64(m.Voice.FileSize)}, true
	case m.Audio != nil:
		return media{kind: "audio", fileID: m.Audio.FileID, name: m.Audio.FileName, mime: m.Audio.MimeType,
			ext: extension(m.Audio.FileName, m.Audio.MimeType, ".mp3"), size: int64(m.Audio.FileSize)}, true
	case m.VideoNote != nil:
		return media{kind: "video_note", fileID: m.VideoNote.FileID, ext: ".mp4", size: int64(m.VideoNote.FileSize)}, true
	case m.Video != nil:
		return media{kind: "video", fileID: m.Video.FileID, name: m.Video.FileName, mime: m.Video.MimeType,
			ext: extension(m.Video.FileName, m.Video.MimeType, ".mp4"), size: int64(m.Video.FileSize)}, true
	case m.Document != nil:
		d := m.Document
		if !isMedia(d.MimeType, d.FileName) {
			return media{}, false
		}
		return media{kind: "document", fileID: d.FileID, name: d.FileName, mime: d.MimeType,
			ext: extension(d.FileName, d.MimeType, ".bin"), size: int64(d.FileSize)}, true
	}
	return media{}, false
}

var mediaExtensions = map[string]bool{
	".mp3": true, ".m4a": true, ".ogg": true, ".oga": true, ".opus": true, ".wav": true, ".flac": true, ".aac": true,
	".amr": true, ".wma": true, ".aiff": true, ".aif": true, ".caf": true, ".webm": true, ".mp4": true, ".mkv": true,
	".mov": true, ".avi": true, ".3gp": true, ".mpeg": true, ".mpg": true, ".m4v": true, ".wmv": true, ".spx": true,
}

func isMedia(mimeType, name string) bool {
	mt, _, _ := mime.ParseMediaType(mimeType)
	if strings.HasPrefix(mt, "audio/") || strings.HasPrefix(mt, "video/") {
		return true
	}
	return mediaExtensions[strings.ToLower(filepath.Ext(name))]
}

// extension picks a short, safe extension from the file name or the media
// type; the stored file's name means nothing to ffmpeg but helps people.
func extension(name, mimeType, fallback string) string {
	ext := strings.ToLower(filepath.Ext(name))
	if ext == ".oga" {
		return ".ogg"
	}
	if mediaExtensions[ext] {
		return ext
	}
	mt, _, _ := mime.ParseMediaType(mimeType)
	switch mt {
	case "audio/ogg", "audio/opus":
		return ".ogg"
	case "audio/mpeg", "audio/mp3":
		return ".mp3"
	case "audio/mp4", "audio/x-m4a", "audio/m4a":
		return ".m4a"
	case "audio/wav", "audio/x-wav", "audio/wave":
		return ".wav"
	case "audio/flac", "audio/x-flac":
		return ".flac"
	case "video/mp4":
		return ".mp4"
	case "video/webm", "audio/webm":
		return ".webm"
	case "video/quicktime":
		return ".mov"
	}
	return fallback
}
