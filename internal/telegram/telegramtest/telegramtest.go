// Package telegramtest is a local HTTP server that speaks the Telegram Bot API
// wire format (https://core.telegram.org/bots/api), for tests of a bot that must
// not reach the real Telegram.
//
// Methods are served at /bot<token>/<method> (method names are case-insensitive,
// as on Telegram) and files at /file/bot<token>/<file_path>. Parameters are read
// from the query string and from application/x-www-form-urlencoded,
// multipart/form-data and application/json bodies. Every answer is
// {"ok":true,"result":...} or {"ok":false,"error_code":N,"description":"..."}
// with the HTTP status equal to error_code.
//
// Supported methods: getMe, getUpdates, sendMessage, editMessageText,
// sendDocument, sendChatAction, getFile, setMyCommands, getMyCommands,
// deleteWebhook and getWebhookInfo. Anything else answers 404 "Not Found", as
// Telegram does for an unknown method.
//
// Text and captions are checked the way Telegram checks them: the length limit
// (4096 UTF-16 code units for a message, 1024 for a caption) applies to the
// text left after parse_mode markup is removed, and malformed HTML, MarkdownV2
// or Markdown markup answers 400 "Bad Request: can't parse entities: ...".
package telegramtest

//lint:file-ignore ST1005 error texts reproduce the Bot API's own wording, capitals included

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

// Limits of the cloud Bot API.
const (
	maxMessageLen    = 4096
	maxCaptionLen    = 1024
	maxCloudDownload = 20 << 20   // getFile refuses bigger files
	maxLocalDownload = 2000 << 20 // with --local
	maxUpload        = 50 << 20   // sendDocument
)

const (
	botID        = 1000
	botFirstName = "Transcriber Test Bot"
)

// User is a Telegram user who sends messages to the bot. Its private chat with
// the bot has the same id.
type User struct {
	ID           int64
	Username     string
	FirstName    string
	LanguageCode string
}

// Message identifies a message pushed as an update.
type Message struct {
	MessageID int
	ChatID    int64
	UpdateID  int64
}

// Sent is one recorded outgoing call of the bot.
type Sent struct {
	Method    string // "sendMessage", "editMessageText", "sendDocument", "sendChatAction"
	ChatID    int64
	MessageID int    // id assigned to a sent message, or the edited message's id
	ReplyTo   int    // reply_to_message_id (or reply_parameters.message_id), 0 if none
	Text      string // text as the bot sent it, the caption for documents, the action for sendChatAction
	ParseMode string
	FileName  string // sendDocument: uploaded file name
	File      []byte // sendDocument: uploaded bytes
	At        time.Time
}

// Server is a fake Telegram Bot API server. Its methods are safe for
// concurrent use.
type Server struct {
	t     testing.TB
	token string
	srv   *httptest.Server

	closeOnce sync.Once
	closed    chan struct{}

	mu           sync.Mutex
	botUsername  string
	nextUpdateID int64
	updates      map[int64]*update // every update ever pushed
	queue        []*queued         // pending deliveries, sorted by update_id
	confirmed    int64
	getUpdates   int
	wake         chan struct{} // closed and replaced when the queue grows
	chats        map[int64]*chat
	files        map[string]*file // by file_id
	filesByPath  map[string]*file // by relative file_path
	nextFile     int
	localDir     string
	sent         []Sent
	sentCh       chan struct{} // closed and replaced when sent grows
	downloads    []string
	getFileCalls []string
	faults       map[string][]*fault // by lower-case method name
	holds        []*hold
	delays       []delay
	commands     json.RawMessage
}

type queued struct {
	u           *update
	redelivered bool // queued by Redeliver
	delivered   bool // returned by getUpdates since it was queued
}

type chat struct {
	id     int64
	user   User
	nextID int
	msgs   map[int]*message
}

type file struct {
	id, uniqueID string
	path         string // relative, e.g. "voice/file_3.oga"
	content      []byte
	size         int64
	tooBig       bool // registered by AddTooBigFile: no content
}

type fault struct {
	n          int
	status     int
	desc       string
	retryAfter int
}

// New starts a server for the bot token; it is closed by t.Cleanup.
func New(t testing.TB, token string) *Server {
	t.Helper()
	s := &Server{
		t:            t,
		token:        token,
		closed:       make(chan struct{}),
		botUsername:  "transcriber_test_bot",
		nextUpdateID: 1,
		updates:      make(map[int64]*update),
		wake:         make(chan struct{}),
		chats:        make(map[int64]*chat),
		files:        make(map[string]*file),
		filesByPath:  make(map[string]*file),
		sentCh:       make(chan struct{}),
		faults:       make(map[string][]*fault),
		commands:     json.RawMessage("[]"),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	return s
}

// URL is the server's base URL, e.g. "http://127.0.0.1:PORT". Methods are at
// URL()+"/bot<token>/<method>", files at URL()+"/file/bot<token>/<file_path>".
func (s *Server) URL() string { return s.srv.URL }

// Close wakes pending long polls and shuts the server down. It may be called
// more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// SetBotUsername sets the username getMe answers.
func (s *Server) SetBotUsername(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botUsername = name
}

// AddFile stores content under a new file_id and file_unique_id and returns
// the file_id. The server chooses the file_path from pathHint: its directory
// and extension are kept and the name becomes file_N, so "voice/a.oga" gives
// "voice/file_N.oga", "voice" gives "voice/file_N" and "a.pdf" gives
// "documents/file_N.pdf".
func (s *Server) AddFile(content []byte, pathHint string) (fileID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.newFileLocked(pathHint)
	f.content = bytes.Clone(content)
	f.size = int64(len(content))
	return f.id
}

// AddTooBigFile registers a file_id of the given size without content. getFile
// on it answers 400 "Bad Request: file is too big", as the cloud Bot API does
// for files over 20 MB. In local mode (SetLocalMode) it succeeds instead, as
// telegram-bot-api --local does for files up to 2000 MB: a sparse file of the
// size is written.
func (s *Server) AddTooBigFile(size int64) (fileID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.newFileLocked("documents/big")
	f.size = size
	f.tooBig = true
	return f.id
}

func (s *Server) newFileLocked(pathHint string) *file {
	s.nextFile++
	n := s.nextFile
	hint := strings.Trim(path.Clean("/"+pathHint), "/")
	ext := path.Ext(hint)
	dir := path.Dir(hint)
	switch {
	case hint == "":
		dir = "documents"
	case dir == "." && ext == "":
		dir = hint
	case dir == ".":
		dir = "documents"
	}
	f := &file{
		id:       fmt.Sprintf("BQACAgIAAxkBAAI%06dtgtest", n),
		uniqueID: fmt.Sprintf("AgAD%06d", n),
		path:     fmt.Sprintf("%s/file_%d%s", dir, n, ext),
	}
	s.files[f.id] = f
	s.filesByPath[f.path] = f
	return f
}

// SetLocalMode makes getFile answer an absolute local path, as
// telegram-bot-api --local does: the file is written under dir (at
// dir/<relative file_path>) and file_path is its absolute path. The /file/
// route then answers 404.
func (s *Server) SetLocalMode(dir string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		s.t.Errorf("telegramtest: SetLocalMode(%q): %v", dir, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.localDir = abs
}

// ---- updates ----

// PushVoice queues a message carrying message.voice.
func (s *Server) PushVoice(from User, fileID string, duration int, size int64) Message {
	return s.push(from, nil, func(m *message) {
		m.Voice = &voice{FileID: fileID, Duration: duration, MimeType: "audio/ogg", FileSize: size}
	})
}

// PushAudio queues a message carrying message.audio (duration 0).
func (s *Server) PushAudio(from User, fileID, fileName, mimeType string, size int64) Message {
	return s.push(from, nil, func(m *message) {
		m.Audio = &audio{FileID: fileID, FileName: fileName, MimeType: mimeType, FileSize: size}
	})
}

// PushVideoNote queues a message carrying message.video_note (length 384,
// duration 0).
func (s *Server) PushVideoNote(from User, fileID string, size int64) Message {
	return s.push(from, nil, func(m *message) {
		m.VideoNote = &videoNote{FileID: fileID, Length: 384, FileSize: size}
	})
}

// PushVideo queues a message carrying message.video (640x360, duration 0).
func (s *Server) PushVideo(from User, fileID, mimeType string, size int64) Message {
	return s.push(from, nil, func(m *message) {
		m.Video = &video{FileID: fileID, Width: 640, Height: 360, MimeType: mimeType, FileSize: size}
	})
}

// PushDocument queues a message carrying message.document.
func (s *Server) PushDocument(from User, fileID, fileName, mimeType string, size int64) Message {
	return s.push(from, nil, func(m *message) {
		m.Document = &document{FileID: fileID, FileName: fileName, MimeType: mimeType, FileSize: size}
	})
}

// PushText queues a text message. A text starting with "/" carries a
// bot_command entity over its first word. When replyTo is not nil the message
// replies to that message of the same chat.
func (s *Server) PushText(from User, text string, replyTo *Message) Message {
	return s.push(from, replyTo, func(m *message) {
		m.Text = text
		if strings.HasPrefix(text, "/") {
			word := text
			if i := strings.IndexAny(text, " \t\n\r"); i >= 0 {
				word = text[:i]
			}
			m.Entities = []entity{{Type: "bot_command", Offset: 0, Length: utf16Len(word)}}
		}
	})
}

// push appends an update carrying a new message from the user, filled in by
// fill, and wakes long polls.
func (s *Server) push(from User, replyTo *Message, fill func(m *message)) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(from)
	c.nextID++
	m := &message{
		MessageID: c.nextID,
		From:      userJSON(from),
		Chat:      chatJSON(c),
		Date:      time.Now().Unix(),
	}
	if replyTo != nil {
		m.ReplyToMessage = replyCopy(c, replyTo.MessageID)
	}
	fill(m)
	if fid := fileIDOf(m); fid != nil {
		s.setUniqueIDLocked(m, *fid)
	}
	c.msgs[m.MessageID] = m
	u := &update{UpdateID: s.nextUpdateID, Message: m}
	s.nextUpdateID++
	s.updates[u.UpdateID] = u
	s.enqueueLocked(&queued{u: u})
	return Message{MessageID: m.MessageID, ChatID: c.id, UpdateID: u.UpdateID}
}

func fileIDOf(m *message) *string {
	switch {
	case m.Voice != nil:
		return &m.Voice.FileID
	case m.Audio != nil:
		return &m.Audio.FileID
	case m.VideoNote != nil:
		return &m.VideoNote.FileID
	case m.Video != nil:
		return &m.Video.FileID
	case m.Document != nil:
		return &m.Document.FileID
	}
	return nil
}

// setUniqueIDLocked fills file_unique_id of the media in m from the registered
// file, or derives one for a file_id the server does not know.
func (s *Server) setUniqueIDLocked(m *message, fileID string) {
	uniq := "AgADx" + strconv.FormatUint(uint64(hash32(fileID)), 36)
	if f, ok := s.files[fileID]; ok {
		uniq = f.uniqueID
	}
	switch {
	case m.Voice != nil:
		m.Voice.FileUniqueID = uniq
	case m.Audio != nil:
		m.Audio.FileUniqueID = uniq
	case m.VideoNote != nil:
		m.VideoNote.FileUniqueID = uniq
	case m.Video != nil:
		m.Video.FileUniqueID = uniq
	case m.Document != nil:
		m.Document.FileUniqueID = uniq
	}
}

func hash32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func (s *Server) chatLocked(u User) *chat {
	c, ok := s.chats[u.ID]
	if !ok {
		c = &chat{id: u.ID, msgs: make(map[int]*message)}
		s.chats[u.ID] = c
	}
	c.user = u
	return c
}

// replyCopy is the reply_to_message for a reply to message id in c: a copy
// without its own reply_to_message, as Telegram sends it.
func replyCopy(c *chat, id int) *message {
	orig, ok := c.msgs[id]
	if !ok {
		return &message{MessageID: id, Chat: chatJSON(c), Date: time.Now().Unix()}
	}
	cp := *orig
	cp.ReplyToMessage = nil
	return &cp
}

// Redeliver queues the update with updateID again, with the same update_id and
// content, as Telegram does when an offset was not confirmed. The redelivered
// copy is returned by the next getUpdates whatever its offset, and dropped by
// an offset above its update_id only once it has been returned.
func (s *Server) Redeliver(updateID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.updates[updateID]
	if !ok {
		s.t.Errorf("telegramtest: Redeliver(%d): no such update", updateID)
		return
	}
	s.enqueueLocked(&queued{u: u, redelivered: true})
}

func (s *Server) enqueueLocked(q *queued) {
	i := sort.Search(len(s.queue), func(i int) bool { return s.queue[i].u.UpdateID > q.u.UpdateID })
	s.queue = append(s.queue, nil)
	copy(s.queue[i+1:], s.queue[i:])
	s.queue[i] = q
	close(s.wake)
	s.wake = make(chan struct{})
}

// Confirmed reports the highest confirmed update_id: offset-1 of the getUpdates
// call with the highest offset so far (0 when none was confirmed).
func (s *Server) Confirmed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// GetUpdatesCalls reports how many getUpdates calls the server received.
func (s *Server) GetUpdatesCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getUpdates
}

// ---- records ----

// Sent returns a copy of the recorded outgoing calls, in order. Only calls
// that succeeded are recorded.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneSent(s.sent)
}

// SentTo returns the recorded outgoing calls to chatID, in order.
func (s *Server) SentTo(chatID int64) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, x := range s.sent {
		if x.ChatID == chatID {
			x.File = bytes.Clone(x.File)
			out = append(out, x)
		}
	}
	return out
}

func cloneSent(in []Sent) []Sent {
	out := make([]Sent, len(in))
	copy(out, in)
	for i := range out {
		out[i].File = bytes.Clone(out[i].File)
	}
	return out
}

// WaitSent waits until at least n outgoing calls are recorded and returns them.
// It fails the test (t.Fatalf) on timeout, so call it from the test goroutine.
func (s *Server) WaitSent(t testing.TB, n int, timeout time.Duration) []Sent {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if len(s.sent) >= n {
			out := cloneSent(s.sent)
			s.mu.Unlock()
			return out
		}
		ch := s.sentCh
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			got := s.Sent()
			t.Fatalf("telegramtest: waited %v for %d sent calls; got %d: %s", timeout, n, len(got), describeSent(got))
			return got
		}
	}
}

func describeSent(sent []Sent) string {
	var b strings.Builder
	b.WriteString("[")
	for i, x := range sent {
		if i > 0 {
			b.WriteString(", ")
		}
		text := x.Text
		if r := []rune(text); len(r) > 40 {
			text = string(r[:40]) + "…"
		}
		fmt.Fprintf(&b, "%s(chat %d, msg %d, %q)", x.Method, x.ChatID, x.MessageID, text)
	}
	b.WriteString("]")
	return b.String()
}

// Downloads returns the file_paths fetched through /file/bot<token>/..., in order.
func (s *Server) Downloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.downloads...)
}

// GetFileCalls returns the file_ids asked with getFile, in order.
func (s *Server) GetFileCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.getFileCalls...)
}

// ---- faults ----

// RateLimitNext makes the next n calls of method answer 429 "Too Many
// Requests: retry after N" with parameters.retry_after N. Such a call has no
// effect and is not recorded as sent.
func (s *Server) RateLimitNext(method string, n int, retryAfter int) {
	s.addFault(method, &fault{n: n, status: http.StatusTooManyRequests,
		desc: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), retryAfter: retryAfter})
}

// FailNext makes the next n calls of method answer the error status with
// description, e.g. FailNext("sendMessage", 1, 403, "Forbidden: bot was
// blocked by the user"). Such a call has no effect and is not recorded as sent.
func (s *Server) FailNext(method string, n int, status int, description string) {
	s.addFault(method, &fault{n: n, status: status, desc: description})
}

func (s *Server) addFault(method string, f *fault) {
	if f.n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	s.faults[key] = append(s.faults[key], f)
}

func (s *Server) takeFault(method string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.faults[method]
	if len(fs) == 0 {
		return nil
	}
	f := fs[0]
	f.n--
	if f.n <= 0 {
		s.faults[method] = fs[1:]
	}
	return &apiError{code: f.status, desc: f.desc, retryAfter: f.retryAfter}
}

// hold is a call that takes effect but whose answer waits.
type hold struct {
	match    func(Sent) bool
	accepted chan Sent
	release  chan struct{}
}

// HoldAnswer makes the next successful call that match accepts take
// effect and be recorded as usual, and then keeps its answer until
// release is called: Telegram has the message, the bot does not know it
// yet. accepted receives the call's record once it took effect. A client
// that goes away meanwhile (a process killed) never gets an answer.
func (s *Server) HoldAnswer(match func(Sent) bool) (accepted <-chan Sent, release func()) {
	h := &hold{match: match, accepted: make(chan Sent, 1), release: make(chan struct{})}
	s.mu.Lock()
	s.holds = append(s.holds, h)
	s.mu.Unlock()
	var once sync.Once
	return h.accepted, func() { once.Do(func() { close(h.release) }) }
}

type delay struct {
	match func(Sent) bool
	d     time.Duration
}

// DelayAnswers makes every successful call that match accepts take effect
// at once and answer d later, as over a slow network: for that long the
// message is sent and the bot does not know it.
func (s *Server) DelayAnswers(match func(Sent) bool, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delays = append(s.delays, delay{match: match, d: d})
}

// holdAnswer waits as a matching hold or delay says, and reports whether
// the answer is still wanted.
func (s *Server) holdAnswer(r *http.Request, x Sent) bool {
	s.mu.Lock()
	var h *hold
	for i, c := range s.holds {
		if c.match(x) {
			h = c
			s.holds = append(s.holds[:i:i], s.holds[i+1:]...)
			break
		}
	}
	var wait time.Duration
	for _, d := range s.delays {
		if d.match(x) {
			wait = max(wait, d.d)
		}
	}
	s.mu.Unlock()
	if h != nil {
		h.accepted <- x
		select {
		case <-h.release:
		case <-r.Context().Done():
			return false
		case <-s.closed:
			return false
		}
	}
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return false
		case <-s.closed:
			return false
		}
	}
	return true
}

// Shown is a message of the bot as the chat shows it now, after its
// edits.
type Shown struct {
	MessageID int
	ReplyTo   int    // the message it quotes, 0 if none
	Text      string // the text, or a document's caption
	FileName  string // a document's file name
	Edited    bool
}

// BotMessages returns the bot's messages in chatID as they read now, in
// the order they were sent: what the sender sees, however many calls made
// it so.
func (s *Server) BotMessages(chatID int64) []Shown {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.chats[chatID]
	if !ok {
		return nil
	}
	var out []Shown
	for id := 1; id <= c.nextID; id++ {
		m, ok := c.msgs[id]
		if !ok || !m.byBot {
			continue
		}
		x := Shown{MessageID: id, Text: m.rawText, Edited: m.EditDate != 0}
		if m.ReplyToMessage != nil {
			x.ReplyTo = m.ReplyToMessage.MessageID
		}
		if m.Document != nil {
			x.Text, x.FileName = m.Caption, m.Document.FileName
		}
		out = append(out, x)
	}
	return out
}

// ---- HTTP ----

type apiError struct {
	code       int
	desc       string
	retryAfter int
}

func badRequest(desc string) *apiError {
	return &apiError{code: http.StatusBadRequest, desc: "Bad Request: " + desc}
}

type response struct {
	Ok          bool            `json:"ok"`
	Result      json.RawMessage `json:"result,omitempty"`
	ErrorCode   int             `json:"error_code,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  *respParams     `json:"parameters,omitempty"`
}

type respParams struct {
	RetryAfter int `json:"retry_after,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, r response) {
	b, err := json.Marshal(r)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, e *apiError) {
	r := response{Ok: false, ErrorCode: e.code, Description: e.desc}
	if e.retryAfter > 0 {
		r.Parameters = &respParams{RetryAfter: e.retryAfter}
	}
	writeJSON(w, e.code, r)
}

var (
	errNotFound     = &apiError{code: http.StatusNotFound, desc: "Not Found"}
	errUnauthorized = &apiError{code: http.StatusUnauthorized, desc: "Unauthorized"}
)

type handler func(s *Server, r *http.Request, p *params) (json.RawMessage, *apiError)

// methods maps lower-case method names to their canonical name and handler.
var methods = map[string]struct {
	name string
	h    handler
}{
	"getme":           {"getMe", (*Server).getMe},
	"getupdates":      {"getUpdates", (*Server).getUpdatesMethod},
	"sendmessage":     {"sendMessage", (*Server).sendMessage},
	"editmessagetext": {"editMessageText", (*Server).editMessageText},
	"senddocument":    {"sendDocument", (*Server).sendDocument},
	"sendchataction":  {"sendChatAction", (*Server).sendChatAction},
	"getfile":         {"getFile", (*Server).getFile},
	"setmycommands":   {"setMyCommands", (*Server).setMyCommands},
	"getmycommands":   {"getMyCommands", (*Server).getMyCommands},
	"deletewebhook":   {"deleteWebhook", (*Server).deleteWebhook},
	"getwebhookinfo":  {"getWebhookInfo", (*Server).getWebhookInfo},
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/file/bot"):
		s.serveFile(w, r, strings.TrimPrefix(p, "/file/bot"))
	case strings.HasPrefix(p, "/bot"):
		token, method, ok := strings.Cut(strings.TrimPrefix(p, "/bot"), "/")
		if !ok || token == "" {
			writeError(w, errNotFound)
			return
		}
		if token != s.token {
			writeError(w, errUnauthorized)
			return
		}
		s.serveMethod(w, r, strings.ToLower(method))
	default:
		writeError(w, errNotFound)
	}
}

func (s *Server) serveMethod(w http.ResponseWriter, r *http.Request, method string) {
	m, ok := methods[method]
	if !ok {
		writeError(w, errNotFound)
		return
	}
	p, perr := readParams(r)
	if method == "getupdates" {
		s.mu.Lock()
		s.getUpdates++
		s.mu.Unlock()
	}
	if f := s.takeFault(method); f != nil {
		writeError(w, f)
		return
	}
	if perr != nil {
		writeError(w, perr)
		return
	}
	res, aerr := m.h(s, r, p)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if res == nil { // the client went away during a long poll
		return
	}
	if p.recorded != nil && !s.holdAnswer(r, *p.recorded) {
		return
	}
	writeJSON(w, http.StatusOK, response{Ok: true, Result: res})
}

// params are the request parameters, from the query string and the body.
type params struct {
	v     map[string]string
	files map[string]*multipart.FileHeader
	// recorded is the call's record once it took effect.
	recorded *Sent
}

func (p *params) get(k string) string { return p.v[k] }

func readParams(r *http.Request) (*params, *apiError) {
	p := &params{v: make(map[string]string)}
	for k, vs := range r.URL.Query() {
		if len(vs) > 0 {
			p.v[k] = vs[0]
		}
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return p, badRequest("can't read request body")
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return p, nil
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body, &obj); err != nil {
			return p, badRequest("can't parse JSON object")
		}
		for k, raw := range obj {
			var str string
			if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &str) == nil {
				p.v[k] = str
			} else if string(raw) != "null" {
				p.v[k] = string(raw)
			}
		}
	case "multipart/form-data":
		r.Body = http.MaxBytesReader(nil, r.Body, maxUpload+1<<20)
		if err := r.ParseMultipartForm(8 << 20); err != nil {
			if strings.Contains(err.Error(), "too large") {
				return p, &apiError{code: http.StatusRequestEntityTooLarge, desc: "Request Entity Too Large"}
			}
			return p, badRequest("can't parse multipart/form-data request")
		}
		for k, vs := range r.MultipartForm.Value {
			if len(vs) > 0 {
				p.v[k] = vs[0]
			}
		}
		p.files = make(map[string]*multipart.FileHeader)
		for k, fs := range r.MultipartForm.File {
			if len(fs) > 0 {
				p.files[k] = fs[0]
			}
		}
	default:
		if err := r.ParseForm(); err != nil {
			return p, badRequest("can't parse request parameters")
		}
		for k, vs := range r.PostForm {
			if len(vs) > 0 {
				p.v[k] = vs[0]
			}
		}
	}
	return p, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- wire types ----

type update struct {
	UpdateID int64    `json:"update_id"`
	Message  *message `json:"message,omitempty"`
}

type userObj struct {
	ID                      int64  `json:"id"`
	IsBot                   bool   `json:"is_bot"`
	FirstName               string `json:"first_name"`
	Username                string `json:"username,omitempty"`
	LanguageCode            string `json:"language_code,omitempty"`
	CanJoinGroups           *bool  `json:"can_join_groups,omitempty"`
	CanReadAllGroupMessages *bool  `json:"can_read_all_group_messages,omitempty"`
	SupportsInlineQueries   *bool  `json:"supports_inline_queries,omitempty"`
}

type chatObj struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
}

type entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

type voice struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type audio struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type videoNote struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Length       int    `json:"length"`
	Duration     int    `json:"duration"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type video struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	Duration     int    `json:"duration"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type document struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

type message struct {
	MessageID      int             `json:"message_id"`
	From           *userObj        `json:"from,omitempty"`
	Chat           chatObj         `json:"chat"`
	Date           int64           `json:"date"`
	EditDate       int64           `json:"edit_date,omitempty"`
	ReplyToMessage *message        `json:"reply_to_message,omitempty"`
	Text           string          `json:"text,omitempty"`
	Entities       []entity        `json:"entities,omitempty"`
	Audio          *audio          `json:"audio,omitempty"`
	Document       *document       `json:"document,omitempty"`
	Video          *video          `json:"video,omitempty"`
	VideoNote      *videoNote      `json:"video_note,omitempty"`
	Voice          *voice          `json:"voice,omitempty"`
	Caption        string          `json:"caption,omitempty"`
	ReplyMarkup    json.RawMessage `json:"reply_markup,omitempty"`

	byBot     bool
	rawText   string // text as the bot sent it, before parse_mode
	parseMode string
}

func userJSON(u User) *userObj {
	first := u.FirstName
	if first == "" {
		first = "User"
	}
	return &userObj{ID: u.ID, FirstName: first, Username: u.Username, LanguageCode: u.LanguageCode}
}

func chatJSON(c *chat) chatObj {
	first := c.user.FirstName
	if first == "" {
		first = "User"
	}
	return chatObj{ID: c.id, Type: "private", Username: c.user.Username, FirstName: first}
}

func (s *Server) botUserLocked() *userObj {
	return &userObj{ID: botID, IsBot: true, FirstName: botFirstName, Username: s.botUsername}
}

// ---- methods ----

func (s *Server) getMe(_ *http.Request, _ *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.botUserLocked()
	t, f := true, false
	u.CanJoinGroups, u.CanReadAllGroupMessages, u.SupportsInlineQueries = &t, &f, &f
	return mustJSON(u), nil
}

func (s *Server) getUpdatesMethod(r *http.Request, p *params) (json.RawMessage, *apiError) {
	offset, err := intParam(p, "offset")
	if err != nil {
		return nil, err
	}
	limit, err := intParam(p, "limit")
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, err := intParam(p, "timeout")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Duration(min(max(timeout, 0), 86400)) * time.Second)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyOffsetLocked(offset)
	for len(s.queue) == 0 {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		wake := s.wake
		s.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-wake:
		case <-timer.C:
		case <-s.closed:
		case <-r.Context().Done():
		}
		timer.Stop()
		s.mu.Lock()
		select {
		case <-r.Context().Done():
			return nil, nil
		case <-s.closed:
			return json.RawMessage("[]"), nil
		default:
		}
	}
	out := make([]*update, 0, limit)
	for _, q := range s.queue {
		if len(out) == int(limit) {
			break
		}
		q.delivered = true
		out = append(out, q.u)
	}
	return mustJSON(out), nil
}

// applyOffsetLocked confirms updates below a positive offset and, for a
// negative one, forgets all but the last -offset pending updates.
func (s *Server) applyOffsetLocked(offset int64) {
	switch {
	case offset > 0:
		kept := s.queue[:0]
		for _, q := range s.queue {
			if q.u.UpdateID < offset && (!q.redelivered || q.delivered) {
				continue
			}
			kept = append(kept, q)
		}
		clear(s.queue[len(kept):])
		s.queue = kept
		s.confirmed = max(s.confirmed, offset-1)
	case offset < 0:
		n := int(-offset)
		if len(s.queue) > n {
			drop := s.queue[:len(s.queue)-n]
			for _, q := range drop {
				s.confirmed = max(s.confirmed, q.u.UpdateID)
			}
			s.queue = append([]*queued(nil), s.queue[len(s.queue)-n:]...)
		}
	}
}

func intParam(p *params, name string) (int64, *apiError) {
	v := strings.TrimSpace(p.get(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badRequest(fmt.Sprintf("invalid %s specified", name))
	}
	return n, nil
}

// chatParamLocked resolves chat_id to a chat that pushed something.
func (s *Server) chatParamLocked(p *params) (*chat, *apiError) {
	v := strings.TrimSpace(p.get("chat_id"))
	if v == "" {
		return nil, badRequest("chat_id is empty")
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, badRequest("chat not found")
	}
	c, ok := s.chats[id]
	if !ok {
		return nil, badRequest("chat not found")
	}
	return c, nil
}

// replyParamLocked reads reply_to_message_id or reply_parameters.message_id.
func replyParamLocked(c *chat, p *params) (int, *apiError) {
	id := 0
	allowMissing := p.get("allow_sending_without_reply") == "true"
	if v := strings.TrimSpace(p.get("reply_to_message_id")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, badRequest("invalid reply_to_message_id specified")
		}
		id = n
	}
	if v := strings.TrimSpace(p.get("reply_parameters")); v != "" {
		var rp struct {
			MessageID                int   `json:"message_id"`
			AllowSendingWithoutReply *bool `json:"allow_sending_without_reply"`
		}
		if err := json.Unmarshal([]byte(v), &rp); err != nil {
			return 0, badRequest("can't parse reply parameters JSON object")
		}
		id = rp.MessageID
		if rp.AllowSendingWithoutReply != nil {
			allowMissing = *rp.AllowSendingWithoutReply
		}
	}
	if id == 0 {
		return 0, nil
	}
	if _, ok := c.msgs[id]; !ok {
		if allowMissing {
			return 0, nil
		}
		return 0, badRequest("message to be replied not found")
	}
	return id, nil
}

func markupParam(p *params) (json.RawMessage, *apiError) {
	v := strings.TrimSpace(p.get("reply_markup"))
	if v == "" {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(v)); err != nil || v[0] != '{' {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	return buf.Bytes(), nil
}

func (s *Server) sendMessage(_ *http.Request, p *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.chatParamLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	raw, mode := p.get("text"), p.get("parse_mode")
	text, aerr := checkText(raw, mode, maxMessageLen, "message is too long")
	if aerr != nil {
		return nil, aerr
	}
	if text == "" {
		return nil, badRequest("message text is empty")
	}
	replyTo, aerr := replyParamLocked(c, p)
	if aerr != nil {
		return nil, aerr
	}
	markup, aerr := markupParam(p)
	if aerr != nil {
		return nil, aerr
	}
	m := s.newBotMessageLocked(c, replyTo)
	m.Text, m.rawText, m.parseMode, m.ReplyMarkup = text, raw, mode, markup
	s.recordLocked(p, Sent{Method: "sendMessage", ChatID: c.id, MessageID: m.MessageID, ReplyTo: replyTo, Text: raw, ParseMode: mode})
	return mustJSON(m), nil
}

func (s *Server) newBotMessageLocked(c *chat, replyTo int) *message {
	c.nextID++
	m := &message{
		MessageID: c.nextID,
		From:      s.botUserLocked(),
		Chat:      chatJSON(c),
		Date:      time.Now().Unix(),
		byBot:     true,
	}
	if replyTo != 0 {
		m.ReplyToMessage = replyCopy(c, replyTo)
	}
	c.msgs[m.MessageID] = m
	return m
}

func (s *Server) recordLocked(p *params, x Sent) {
	x.At = time.Now()
	p.recorded = &x
	s.sent = append(s.sent, x)
	close(s.sentCh)
	s.sentCh = make(chan struct{})
}

func (s *Server) editMessageText(_ *http.Request, p *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.get("inline_message_id") != "" {
		return nil, badRequest("message to edit not found")
	}
	c, aerr := s.chatParamLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	id, err := strconv.Atoi(strings.TrimSpace(p.get("message_id")))
	if err != nil || id == 0 {
		return nil, badRequest("message to edit not found")
	}
	m, ok := c.msgs[id]
	if !ok || !m.byBot {
		return nil, badRequest("message to edit not found")
	}
	if m.Text == "" {
		return nil, badRequest("there is no text in the message to edit")
	}
	raw, mode := p.get("text"), p.get("parse_mode")
	text, aerr := checkText(raw, mode, maxMessageLen, "MESSAGE_TOO_LONG")
	if aerr != nil {
		return nil, aerr
	}
	if text == "" {
		return nil, badRequest("message text is empty")
	}
	markup, aerr := markupParam(p)
	if aerr != nil {
		return nil, aerr
	}
	if text == m.Text && markupSig(raw, text) == markupSig(m.rawText, m.Text) && bytes.Equal(markup, m.ReplyMarkup) {
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	m.Text, m.rawText, m.parseMode, m.ReplyMarkup = text, raw, mode, markup
	m.EditDate = time.Now().Unix()
	s.recordLocked(p, Sent{Method: "editMessageText", ChatID: c.id, MessageID: id, Text: raw, ParseMode: mode})
	return mustJSON(m), nil
}

// markupSig stands for the entities of a text: the raw text when markup was
// removed from it, "" when it had none.
func markupSig(raw, text string) string {
	if strings.TrimSpace(raw) == text {
		return ""
	}
	return raw
}

func (s *Server) sendDocument(_ *http.Request, p *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	c, aerr := s.chatParamLocked(p)
	s.mu.Unlock()
	if aerr != nil {
		return nil, aerr
	}
	rawCaption, mode := p.get("caption"), p.get("parse_mode")
	caption, aerr := checkText(rawCaption, mode, maxCaptionLen, "message caption is too long")
	if aerr != nil {
		return nil, aerr
	}
	markup, aerr := markupParam(p)
	if aerr != nil {
		return nil, aerr
	}

	var (
		name    string
		content []byte
		known   *file
	)
	if fh, ok := p.files["document"]; ok {
		f, err := fh.Open()
		if err != nil {
			return nil, badRequest("can't read the document")
		}
		content, err = io.ReadAll(f)
		_ = f.Close() // only read
		if err != nil {
			return nil, badRequest("can't read the document")
		}
		name = fh.Filename
		if len(content) == 0 {
			return nil, badRequest("file must be non-empty")
		}
	} else if v := p.get("document"); v != "" {
		if strings.HasPrefix(v, "attach://") {
			fh, ok := p.files[strings.TrimPrefix(v, "attach://")]
			if !ok {
				return nil, badRequest("there is no document in the request")
			}
			p.files["document"] = fh
			return s.sendDocument(nil, p)
		}
		s.mu.Lock()
		known = s.files[v]
		s.mu.Unlock()
		if known == nil || known.tooBig {
			return nil, badRequest("wrong file identifier/HTTP URL specified")
		}
		content, name = known.content, path.Base(known.path)
	} else {
		return nil, badRequest("there is no document in the request")
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	replyTo, aerr := replyParamLocked(c, p)
	if aerr != nil {
		return nil, aerr
	}
	if known == nil {
		known = s.newFileLocked("documents/" + name)
		known.content = content
		known.size = int64(len(content))
	}
	mimeType := mime.TypeByExtension(path.Ext(name))
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	if i := strings.Index(mimeType, ";"); i >= 0 {
		mimeType = mimeType[:i]
	}
	m := s.newBotMessageLocked(c, replyTo)
	m.Document = &document{FileID: known.id, FileUniqueID: known.uniqueID, FileName: name, MimeType: mimeType, FileSize: known.size}
	m.Caption, m.ReplyMarkup = caption, markup
	s.recordLocked(p, Sent{Method: "sendDocument", ChatID: c.id, MessageID: m.MessageID, ReplyTo: replyTo,
		Text: rawCaption, ParseMode: mode, FileName: name, File: bytes.Clone(content)})
	return mustJSON(m), nil
}

var chatActions = map[string]bool{
	"typing": true, "upload_photo": true, "record_video": true, "upload_video": true,
	"record_voice": true, "upload_voice": true, "record_audio": true, "upload_audio": true,
	"upload_document": true, "choose_sticker": true, "find_location": true,
	"record_video_note": true, "upload_video_note": true,
}

func (s *Server) sendChatAction(_ *http.Request, p *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.chatParamLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	action := p.get("action")
	if action == "" {
		return nil, badRequest("action is empty")
	}
	if !chatActions[action] {
		return nil, badRequest("wrong parameter action in request")
	}
	s.recordLocked(p, Sent{Method: "sendChatAction", ChatID: c.id, Text: action})
	return json.RawMessage("true"), nil
}

type fileObj struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileSize     int64  `json:"file_size,omitempty"`
	FilePath     string `json:"file_path,omitempty"`
}

func (s *Server) getFile(_ *http.Request, p *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := p.get("file_id")
	s.getFileCalls = append(s.getFileCalls, id)
	if strings.TrimSpace(id) == "" {
		return nil, badRequest("file_id is empty")
	}
	f, ok := s.files[id]
	if !ok {
		return nil, badRequest("invalid file_id")
	}
	if s.localDir == "" {
		if f.tooBig || f.size > maxCloudDownload {
			return nil, badRequest("file is too big")
		}
		return mustJSON(fileObj{FileID: f.id, FileUniqueID: f.uniqueID, FileSize: f.size, FilePath: f.path}), nil
	}
	if f.size > maxLocalDownload {
		return nil, badRequest("file is too big")
	}
	abs := filepath.Join(s.localDir, filepath.FromSlash(f.path))
	if err := writeLocal(abs, f); err != nil {
		s.t.Errorf("telegramtest: local mode: %v", err)
		return nil, &apiError{code: http.StatusInternalServerError, desc: "Internal Server Error: " + err.Error()}
	}
	return mustJSON(fileObj{FileID: f.id, FileUniqueID: f.uniqueID, FileSize: f.size, FilePath: abs}), nil
}

func writeLocal(abs string, f *file) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	if !f.tooBig {
		return os.WriteFile(abs, f.content, 0o644)
	}
	// A sparse file of the registered size.
	out, err := os.Create(abs)
	if err != nil {
		return err
	}
	if err := out.Truncate(f.size); err != nil {
		_ = out.Close() // the Truncate error is the one to report
		return err
	}
	return out.Close()
}

func (s *Server) setMyCommands(_ *http.Request, p *params) (json.RawMessage, *apiError) {
	v := strings.TrimSpace(p.get("commands"))
	var cmds []struct {
		Command     string `json:"command"`
		Description string `json:"description"`
	}
	if v == "" || json.Unmarshal([]byte(v), &cmds) != nil {
		return nil, badRequest("can't parse BotCommand array JSON object")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = mustJSON(cmds)
	return json.RawMessage("true"), nil
}

func (s *Server) getMyCommands(_ *http.Request, _ *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands, nil
}

func (s *Server) deleteWebhook(_ *http.Request, _ *params) (json.RawMessage, *apiError) {
	return json.RawMessage("true"), nil
}

func (s *Server) getWebhookInfo(_ *http.Request, _ *params) (json.RawMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return mustJSON(map[string]any{"url": "", "has_custom_certificate": false, "pending_update_count": len(s.queue)}), nil
}

// serveFile answers /file/bot<token>/<file_path>.
func (s *Server) serveFile(w http.ResponseWriter, _ *http.Request, rest string) {
	token, filePath, ok := strings.Cut(rest, "/")
	if !ok || token == "" {
		writeError(w, errNotFound)
		return
	}
	if token != s.token {
		writeError(w, errUnauthorized)
		return
	}
	if p, err := url.PathUnescape(filePath); err == nil {
		filePath = p
	}
	s.mu.Lock()
	f, ok := s.filesByPath[filePath]
	if !ok || f.tooBig || s.localDir != "" {
		s.mu.Unlock()
		writeError(w, errNotFound)
		return
	}
	content := f.content
	s.downloads = append(s.downloads, filePath)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(content)))
	_, _ = w.Write(content)
}

// ---- text checks ----

// checkText parses raw per parseMode and checks the length of the resulting
// text, which it returns with surrounding white space removed, as Telegram
// does.
func checkText(raw, parseMode string, limit int, tooLong string) (string, *apiError) {
	var (
		text string
		err  error
	)
	switch strings.ToLower(parseMode) {
	case "":
		text = raw
	case "html":
		text, err = parseHTML(raw)
	case "markdownv2":
		text, err = parseMarkdownV2(raw)
	case "markdown":
		text, err = parseMarkdown(raw)
	default:
		return "", badRequest("unsupported parse_mode")
	}
	if err != nil {
		return "", badRequest("can't parse entities: " + err.Error())
	}
	text = strings.TrimSpace(text)
	if utf16Len(text) > limit {
		return "", badRequest(tooLong)
	}
	return text, nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s { // invalid UTF-8 ranges as U+FFFD, one unit
		n += utf16.RuneLen(r)
	}
	return n
}

var htmlTags = map[string]bool{
	"a": true, "b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true, "tg-emoji": true,
	"code": true, "pre": true, "blockquote": true,
}

func isHTMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// parseHTML follows the rules of Telegram's HTML parse mode (tdlib's
// parse_html): it returns the text without tags and with entities decoded, or
// the error Telegram reports.
func parseHTML(s string) (string, error) {
	var out strings.Builder
	var stack []string
	for i := 0; i < len(s); {
		c := s[i]
		if c == '&' {
			if r, n := decodeHTMLEntity(s[i:]); n > 0 {
				out.WriteString(r)
				i += n
				continue
			}
			out.WriteByte(c)
			i++
			continue
		}
		if c != '<' {
			out.WriteByte(c)
			i++
			continue
		}
		begin := i
		if i+1 < len(s) && s[i+1] == '/' {
			if len(stack) == 0 {
				return "", fmt.Errorf("Unexpected end tag at byte offset %d", begin)
			}
			i += 2
			for i < len(s) && !isHTMLSpace(s[i]) && s[i] != '>' {
				i++
			}
			name := strings.ToLower(s[begin+2 : i])
			for i < len(s) && isHTMLSpace(s[i]) {
				i++
			}
			if i >= len(s) || s[i] != '>' {
				return "", fmt.Errorf("Unclosed end tag at byte offset %d", begin)
			}
			i++
			top := stack[len(stack)-1]
			if name != "" && name != top {
				return "", fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", begin, top, name)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		i++
		for i < len(s) && !isHTMLSpace(s[i]) && s[i] != '>' {
			i++
		}
		if i >= len(s) {
			return "", fmt.Errorf("Unclosed start tag at byte offset %d", begin)
		}
		name := strings.ToLower(s[begin+1 : i])
		if !htmlTags[name] {
			return "", fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", name, begin)
		}
		// Attributes: skip to '>' honouring quotes.
		for i < len(s) && s[i] != '>' {
			if q := s[i]; q == '"' || q == '\'' {
				j := strings.IndexByte(s[i+1:], q)
				if j < 0 {
					return "", fmt.Errorf("Unclosed start tag at byte offset %d", begin)
				}
				i += j + 2
				continue
			}
			i++
		}
		if i >= len(s) {
			return "", fmt.Errorf("Unclosed start tag at byte offset %d", begin)
		}
		i++
		stack = append(stack, name)
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1])
	}
	return out.String(), nil
}

// decodeHTMLEntity decodes the entity at the start of s (which starts with
// '&'), returning the text and the bytes consumed, or 0 when it is none.
func decodeHTMLEntity(s string) (string, int) {
	end := strings.IndexByte(s, ';')
	if end < 2 || end > 10 {
		return "", 0
	}
	name := s[1:end]
	switch name {
	case "lt":
		return "<", end + 1
	case "gt":
		return ">", end + 1
	case "amp":
		return "&", end + 1
	case "quot":
		return "\"", end + 1
	}
	if name[0] != '#' || len(name) < 2 {
		return "", 0
	}
	var (
		n   uint64
		err error
	)
	if name[1] == 'x' || name[1] == 'X' {
		n, err = strconv.ParseUint(name[2:], 16, 32)
	} else {
		n, err = strconv.ParseUint(name[1:], 10, 32)
	}
	if err != nil || n == 0 || n > 0x10FFFF {
		return "", 0
	}
	return string(rune(n)), end + 1
}

// parseMarkdownV2 follows the rules of Telegram's MarkdownV2 parse mode
// (tdlib's parse_markdown_v2) closely enough to report the usual errors:
// unescaped reserved characters and unclosed entities.
func parseMarkdownV2(s string) (string, error) {
	type open struct {
		kind   string
		offset int
	}
	var (
		out   strings.Builder
		stack []open
	)
	const reserved = "_*[]()~`>#+-=|{}.!"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] > 0 && s[i+1] <= 126 {
			i++
			out.WriteByte(s[i])
			continue
		}
		top := ""
		if len(stack) > 0 {
			top = stack[len(stack)-1].kind
		}
		res := reserved
		if top == "Code" || top == "Pre" {
			res = "`"
		}
		if strings.IndexByte(res, c) < 0 {
			out.WriteByte(c)
			continue
		}
		at := func(j int) byte {
			if j < len(s) {
				return s[j]
			}
			return 0
		}
		isEnd := false
		switch top {
		case "Bold":
			isEnd = c == '*'
		case "Italic":
			isEnd = c == '_' && at(i+1) != '_'
		case "Code":
			isEnd = c == '`'
		case "Pre":
			isEnd = c == '`' && at(i+1) == '`' && at(i+2) == '`'
		case "TextUrl", "CustomEmoji":
			isEnd = c == ']'
		case "Underline":
			isEnd = c == '_' && at(i+1) == '_'
		case "Strikethrough":
			isEnd = c == '~'
		case "Spoiler":
			isEnd = c == '|' && at(i+1) == '|'
		}
		if isEnd {
			switch top {
			case "Pre":
				i += 2
			case "Underline", "Spoiler":
				i++
			case "TextUrl", "CustomEmoji":
				if at(i+1) == '(' {
					j := i + 2
					for j < len(s) && s[j] != ')' {
						if s[j] == '\\' {
							j++
						}
						j++
					}
					if j >= len(s) {
						return "", fmt.Errorf("Can't find end of a url at byte offset %d", i+1)
					}
					i = j
				}
			}
			stack = stack[:len(stack)-1]
			continue
		}
		offset := i
		var kind string
		switch c {
		case '_':
			if at(i+1) == '_' {
				kind = "Underline"
				i++
			} else {
				kind = "Italic"
			}
		case '*':
			kind = "Bold"
		case '~':
			kind = "Strikethrough"
		case '|':
			if at(i+1) != '|' {
				return "", reservedErr(c)
			}
			kind = "Spoiler"
			i++
		case '[':
			kind = "TextUrl"
		case '`':
			if at(i+1) == '`' && at(i+2) == '`' {
				kind = "Pre"
				i += 2
				// The language, up to the end of the line, is not text.
				if j := strings.IndexByte(s[i+1:], '\n'); j >= 0 {
					if lang := s[i+1 : i+1+j]; !strings.ContainsAny(lang, " `") {
						i += j + 1
					}
				}
			} else {
				kind = "Code"
			}
		case '!':
			if at(i+1) != '[' {
				return "", reservedErr(c)
			}
			kind = "CustomEmoji"
			i++
		case '>':
			if offset == 0 || s[offset-1] == '\n' {
				continue // blockquote
			}
			return "", reservedErr(c)
		default:
			return "", reservedErr(c)
		}
		stack = append(stack, open{kind, offset})
	}
	if len(stack) > 0 {
		o := stack[len(stack)-1]
		return "", fmt.Errorf("Can't find end of %s entity at byte offset %d", o.kind, o.offset)
	}
	return out.String(), nil
}

func reservedErr(c byte) error {
	return fmt.Errorf("Character '%c' is reserved and must be escaped with the preceding '\\'", c)
}

// parseMarkdown follows Telegram's legacy Markdown parse mode (tdlib's
// parse_markdown).
func parseMarkdown(s string) (string, error) {
	var out strings.Builder
	at := func(j int) byte {
		if j < len(s) {
			return s[j]
		}
		return 0
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && strings.IndexByte("_*`[", at(i+1)) >= 0 && at(i+1) != 0 {
			i++
			out.WriteByte(s[i])
			continue
		}
		if strings.IndexByte("_*`[", c) < 0 {
			out.WriteByte(c)
			continue
		}
		begin := i
		end := c
		if c == '[' {
			end = ']'
		}
		i++
		pre := false
		if c == '`' && at(i) == '`' && at(i+1) == '`' {
			i += 2
			pre = true
			if j := strings.IndexAny(s[i:], "\n `"); j >= 0 && s[i+j] == '\n' {
				i += j + 1
			}
		}
		for i < len(s) && (s[i] != end || (pre && !(at(i+1) == '`' && at(i+2) == '`'))) {
			out.WriteByte(s[i])
			i++
		}
		if i >= len(s) {
			return "", fmt.Errorf("Can't find end of the entity starting at byte offset %d", begin)
		}
		if pre {
			i += 2
		}
		if c == '[' && at(i+1) == '(' {
			// The URL runs to ')' or to the end of the text.
			if j := strings.IndexByte(s[i+2:], ')'); j >= 0 {
				i += j + 2
			} else {
				i = len(s)
			}
		}
	}
	return out.String(), nil
}
