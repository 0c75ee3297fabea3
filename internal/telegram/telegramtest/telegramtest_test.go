package telegramtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/transcriber/transcriber/internal/telegram/telegramtest"
)

const token = "123456:TEST-token_abc"

var alice = telegramtest.User{ID: 4242, Username: "alice", FirstName: "Alice", LanguageCode: "en"}

// apiResp is the Bot API envelope.
type apiResp struct {
	Ok          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

type wireUpdate struct {
	UpdateID int64 `json:"update_id"`
	Message  struct {
		MessageID int   `json:"message_id"`
		Date      int64 `json:"date"`
		Chat      struct {
			ID   int64  `json:"id"`
			Type string `json:"type"`
		} `json:"chat"`
		From struct {
			ID       int64  `json:"id"`
			IsBot    bool   `json:"is_bot"`
			Username string `json:"username"`
		} `json:"from"`
		Text string `json:"text"`
	} `json:"message"`
}

func decode(t *testing.T, resp *http.Response) apiResp {
	t.Helper()
	defer resp.Body.Close()
	var r apiResp
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("decoding response (status %d): %v", resp.StatusCode, err)
	}
	if r.Ok && resp.StatusCode != http.StatusOK || !r.Ok && resp.StatusCode != r.ErrorCode {
		t.Fatalf("HTTP status %d for ok=%v error_code=%d", resp.StatusCode, r.Ok, r.ErrorCode)
	}
	return r
}

// call POSTs params form-urlencoded, as tgbotapi does.
func call(t *testing.T, srv *telegramtest.Server, method string, params url.Values) apiResp {
	t.Helper()
	resp, err := http.PostForm(srv.URL()+"/bot"+token+"/"+method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return decode(t, resp)
}

func mustOK(t *testing.T, method string, r apiResp) {
	t.Helper()
	if !r.Ok {
		t.Fatalf("%s: got error %d %q; want ok", method, r.ErrorCode, r.Description)
	}
}

func getUpdates(t *testing.T, srv *telegramtest.Server, params url.Values) []wireUpdate {
	t.Helper()
	r := call(t, srv, "getUpdates", params)
	mustOK(t, "getUpdates", r)
	var ups []wireUpdate
	if err := json.Unmarshal(r.Result, &ups); err != nil {
		t.Fatalf("getUpdates result %s: %v", r.Result, err)
	}
	return ups
}

func updateIDs(ups []wireUpdate) []int64 {
	ids := []int64{}
	for _, u := range ups {
		ids = append(ids, u.UpdateID)
	}
	return ids
}

func newBot(t *testing.T, srv *telegramtest.Server) *tgbotapi.BotAPI {
	t.Helper()
	bot, err := tgbotapi.NewBotAPIWithAPIEndpoint(token, srv.URL()+"/bot%s/%s")
	if err != nil {
		t.Fatalf("NewBotAPIWithAPIEndpoint: %v", err)
	}
	return bot
}

func TestRouting(t *testing.T) {
	srv := telegramtest.New(t, token)
	tests := []struct {
		name     string
		path     string
		wantCode int
		wantDesc string
	}{
		{"wrong token", "/bot999:nope/getMe", 401, "Unauthorized"},
		{"wrong token on files", "/file/bot999:nope/voice/file_1.oga", 401, "Unauthorized"},
		{"unknown method", "/bot" + token + "/sendCarrierPigeon", 404, "Not Found"},
		{"no method", "/bot" + token + "/", 404, "Not Found"},
		{"unknown path", "/nothing", 404, "Not Found"},
		{"unknown file", "/file/bot" + token + "/voice/file_9.oga", 404, "Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(srv.URL() + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			r := decode(t, resp)
			if r.Ok || r.ErrorCode != tt.wantCode || r.Description != tt.wantDesc {
				t.Errorf("got ok=%v %d %q; want %d %q", r.Ok, r.ErrorCode, r.Description, tt.wantCode, tt.wantDesc)
			}
		})
	}

	t.Run("method names are case-insensitive", func(t *testing.T) {
		for _, m := range []string{"getMe", "getme", "GETME"} {
			mustOK(t, m, call(t, srv, m, nil))
		}
	})
}

func TestGetMe(t *testing.T) {
	srv := telegramtest.New(t, token)
	bot := newBot(t, srv)
	if bot.Self.ID != 1000 || !bot.Self.IsBot || bot.Self.UserName != "transcriber_test_bot" {
		t.Errorf("got self %+v; want id 1000, is_bot, transcriber_test_bot", bot.Self)
	}
	srv.SetBotUsername("other_bot")
	me, err := bot.GetMe()
	if err != nil {
		t.Fatal(err)
	}
	if me.UserName != "other_bot" {
		t.Errorf("got username %q; want %q", me.UserName, "other_bot")
	}
}

func TestLibraryHousekeepingMethods(t *testing.T) {
	srv := telegramtest.New(t, token)
	bot := newBot(t, srv)
	if _, err := bot.Request(tgbotapi.DeleteWebhookConfig{}); err != nil {
		t.Errorf("deleteWebhook: %v", err)
	}
	cmds := tgbotapi.NewSetMyCommands(tgbotapi.BotCommand{Command: "start", Description: "Start"})
	if _, err := bot.Request(cmds); err != nil {
		t.Errorf("setMyCommands: %v", err)
	}
	got, err := bot.GetMyCommands()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Command != "start" {
		t.Errorf("got commands %+v; want [start]", got)
	}
}

// Parameters arrive form-urlencoded, in the query string, as JSON or as
// multipart; all must be understood.
func TestParameterEncodings(t *testing.T) {
	srv := telegramtest.New(t, token)
	srv.PushText(alice, "hi", nil)
	endpoint := srv.URL() + "/bot" + token + "/sendMessage"
	chat := fmt.Sprint(alice.ID)

	multipartBody := func() (string, io.Reader) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		_ = w.WriteField("chat_id", chat)
		_ = w.WriteField("text", "multipart")
		_ = w.Close()
		return w.FormDataContentType(), &b
	}
	tests := []struct {
		name string
		do   func() (*http.Response, error)
		want string
	}{
		{"form", func() (*http.Response, error) {
			return http.PostForm(endpoint, url.Values{"chat_id": {chat}, "text": {"form"}})
		}, "form"},
		{"query", func() (*http.Response, error) {
			return http.Get(endpoint + "?" + url.Values{"chat_id": {chat}, "text": {"query"}}.Encode())
		}, "query"},
		{"json", func() (*http.Response, error) {
			body := fmt.Sprintf(`{"chat_id":%s,"text":"json","reply_markup":{"inline_keyboard":[]}}`, chat)
			return http.Post(endpoint, "application/json", strings.NewReader(body))
		}, "json"},
		{"multipart", func() (*http.Response, error) {
			ct, body := multipartBody()
			return http.Post(endpoint, ct, body)
		}, "multipart"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tt.do()
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, tt.name, decode(t, resp))
			sent := srv.Sent()
			if got := sent[len(sent)-1]; got.Text != tt.want || got.ChatID != alice.ID {
				t.Errorf("got last sent %+v; want text %q to chat %d", got, tt.want, alice.ID)
			}
		})
	}
}

func TestLongPollBlocksAndWakesOnPush(t *testing.T) {
	srv := telegramtest.New(t, token)
	type result struct {
		ups []wireUpdate
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.PostForm(srv.URL()+"/bot"+token+"/getUpdates", url.Values{"timeout": {"10"}})
		if err != nil {
			t.Error(err)
			done <- result{}
			return
		}
		defer resp.Body.Close()
		var r struct{ Result []wireUpdate }
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Error(err)
		}
		done <- result{r.Result, time.Now()}
	}()

	waitFor(t, func() bool { return srv.GetUpdatesCalls() == 1 })
	select {
	case r := <-done:
		t.Fatalf("getUpdates returned %d updates before any push; want it to block", len(r.ups))
	case <-time.After(200 * time.Millisecond):
	}
	pushed := time.Now()
	msg := srv.PushText(alice, "hello", nil)
	select {
	case r := <-done:
		if len(r.ups) != 1 || r.ups[0].UpdateID != msg.UpdateID || r.ups[0].Message.Text != "hello" {
			t.Fatalf("got %+v; want the pushed update %d", r.ups, msg.UpdateID)
		}
		if d := r.at.Sub(pushed); d > 2*time.Second {
			t.Errorf("got wake-up %v after the push; want prompt", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("getUpdates did not wake on push")
	}
}

func TestLongPollTimesOut(t *testing.T) {
	srv := telegramtest.New(t, token)
	start := time.Now()
	ups := getUpdates(t, srv, url.Values{"timeout": {"1"}})
	if d := time.Since(start); len(ups) != 0 || d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("got %d updates after %v; want none after about 1s", len(ups), d)
	}
	start = time.Now()
	if ups := getUpdates(t, srv, nil); len(ups) != 0 || time.Since(start) > time.Second {
		t.Errorf("short poll: got %d updates after %v; want none at once", len(ups), time.Since(start))
	}
}

func TestLongPollHonoursCancellation(t *testing.T) {
	srv := telegramtest.New(t, token)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/bot"+token+"/getUpdates",
			strings.NewReader("timeout=30"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, func() bool { return srv.GetUpdatesCalls() == 1 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled getUpdates did not return")
	}
	// The server must not count an update as delivered to the cancelled poll.
	msg := srv.PushText(alice, "after", nil)
	if got := updateIDs(getUpdates(t, srv, nil)); len(got) != 1 || got[0] != msg.UpdateID {
		t.Errorf("got updates %v; want [%d]", got, msg.UpdateID)
	}
}

func TestCloseEndsLongPoll(t *testing.T) {
	srv := telegramtest.New(t, token)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.PostForm(srv.URL()+"/bot"+token+"/getUpdates", url.Values{"timeout": {"60"}})
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return srv.GetUpdatesCalls() == 1 })
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	for _, ch := range []chan struct{}{done, closed} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end a pending long poll")
		}
	}
}

func TestOffsets(t *testing.T) {
	srv := telegramtest.New(t, token)
	for i := range 3 {
		if m := srv.PushText(alice, fmt.Sprint("m", i), nil); m.UpdateID != int64(i+1) || m.MessageID != i+1 || m.ChatID != alice.ID {
			t.Fatalf("push %d: got %+v; want update_id %d, message_id %d, chat %d", i, m, i+1, i+1, alice.ID)
		}
	}
	steps := []struct {
		params        url.Values
		want          []int64
		wantConfirmed int64
	}{
		{nil, []int64{1, 2, 3}, 0},                                  // nothing confirmed yet
		{nil, []int64{1, 2, 3}, 0},                                  // still there
		{url.Values{"limit": {"2"}}, []int64{1, 2}, 0},              // limit
		{url.Values{"offset": {"2"}}, []int64{2, 3}, 1},             // confirms 1
		{url.Values{"offset": {"1"}}, []int64{2, 3}, 1},             // 1 is gone for good
		{url.Values{"offset": {"4"}}, []int64{}, 3},                 // confirms all
		{url.Values{"offset": {"0"}, "limit": {"0"}}, []int64{}, 3}, // defaults
	}
	for i, st := range steps {
		got := updateIDs(getUpdates(t, srv, st.params))
		if fmt.Sprint(got) != fmt.Sprint(st.want) {
			t.Errorf("step %d (%v): got updates %v; want %v", i, st.params, got, st.want)
		}
		if c := srv.Confirmed(); c != st.wantConfirmed {
			t.Errorf("step %d (%v): got Confirmed() %d; want %d", i, st.params, c, st.wantConfirmed)
		}
	}

	// A negative offset keeps only the last -offset updates.
	for i := range 3 {
		srv.PushText(alice, fmt.Sprint("n", i), nil)
	}
	if got := updateIDs(getUpdates(t, srv, url.Values{"offset": {"-1"}})); fmt.Sprint(got) != "[6]" {
		t.Errorf("offset -1: got updates %v; want [6]", got)
	}
	if c := srv.Confirmed(); c != 5 {
		t.Errorf("offset -1: got Confirmed() %d; want 5", c)
	}
	if got := updateIDs(getUpdates(t, srv, nil)); fmt.Sprint(got) != "[6]" {
		t.Errorf("after offset -1: got updates %v; want [6]", got)
	}
	if n := srv.GetUpdatesCalls(); n != len(steps)+2 {
		t.Errorf("got GetUpdatesCalls() %d; want %d", n, len(steps)+2)
	}
}

func TestRedeliver(t *testing.T) {
	srv := telegramtest.New(t, token)
	first := srv.PushVoice(alice, "voice-1", 3, 1234)
	r := call(t, srv, "getUpdates", nil)
	mustOK(t, "getUpdates", r)
	var original []json.RawMessage
	if err := json.Unmarshal(r.Result, &original); err != nil || len(original) != 1 {
		t.Fatalf("got %s (%v); want one update", r.Result, err)
	}
	if ups := getUpdates(t, srv, url.Values{"offset": {"2"}}); len(ups) != 0 {
		t.Fatalf("got %v after confirming; want none", updateIDs(ups))
	}

	srv.Redeliver(first.UpdateID)
	r = call(t, srv, "getUpdates", url.Values{"offset": {"2"}})
	mustOK(t, "getUpdates", r)
	var again []json.RawMessage
	if err := json.Unmarshal(r.Result, &again); err != nil || len(again) != 1 {
		t.Fatalf("got %s (%v); want the redelivered update", r.Result, err)
	}
	if !bytes.Equal(again[0], original[0]) {
		t.Errorf("got redelivered %s; want the same update %s", again[0], original[0])
	}
	if ups := getUpdates(t, srv, url.Values{"offset": {"2"}}); len(ups) != 0 {
		t.Errorf("got %v after the redelivery was confirmed; want none", updateIDs(ups))
	}
	// The next push continues the numbering.
	if m := srv.PushText(alice, "x", nil); m.UpdateID != 2 || m.MessageID != 2 {
		t.Errorf("got %+v; want update_id 2, message_id 2", m)
	}
}

// The pushed updates decode into tgbotapi's types.
func TestUpdatesThroughLibrary(t *testing.T) {
	srv := telegramtest.New(t, token)
	bob := telegramtest.User{ID: 77, Username: "bob", FirstName: "Bob"}
	voice := srv.PushVoice(alice, "v1", 12, 34567)
	srv.PushAudio(alice, "a1", "talk.mp3", "audio/mpeg", 1000)
	srv.PushVideoNote(bob, "vn1", 2000)
	srv.PushVideo(bob, "vd1", "video/mp4", 3000)
	srv.PushDocument(alice, "d1", "memo.m4a", "audio/mp4", 4000)
	srv.PushText(alice, "/start@transcriber_test_bot now", nil)
	srv.PushText(alice, "about that", &voice)

	bot := newBot(t, srv)
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 1, AllowedUpdates: []string{"message"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 7 {
		t.Fatalf("got %d updates; want 7", len(ups))
	}
	for i, u := range ups {
		if u.UpdateID != i+1 || u.Message == nil || u.Message.Chat == nil || u.Message.Chat.Type != "private" ||
			u.Message.Chat.ID != u.Message.From.ID || u.Message.Date == 0 {
			t.Errorf("update %d: got %+v; want update_id %d with a private message", i, u, i+1)
		}
	}
	if v := ups[0].Message.Voice; v == nil || v.FileID != "v1" || v.FileUniqueID == "" || v.Duration != 12 ||
		v.MimeType != "audio/ogg" || v.FileSize != 34567 {
		t.Errorf("got voice %+v; want v1, 12s, audio/ogg, 34567 bytes", v)
	}
	if a := ups[1].Message.Audio; a == nil || a.FileID != "a1" || a.FileName != "talk.mp3" || a.MimeType != "audio/mpeg" || a.FileSize != 1000 {
		t.Errorf("got audio %+v; want a1 talk.mp3 audio/mpeg 1000", a)
	}
	if vn := ups[2].Message.VideoNote; vn == nil || vn.FileID != "vn1" || vn.FileSize != 2000 || vn.Length == 0 {
		t.Errorf("got video_note %+v; want vn1 2000", vn)
	}
	if ups[2].Message.Chat.ID != bob.ID || ups[2].Message.MessageID != 1 {
		t.Errorf("got chat %d message %d; want bob's first message", ups[2].Message.Chat.ID, ups[2].Message.MessageID)
	}
	if v := ups[3].Message.Video; v == nil || v.FileID != "vd1" || v.MimeType != "video/mp4" || v.FileSize != 3000 {
		t.Errorf("got video %+v; want vd1 video/mp4 3000", v)
	}
	if d := ups[4].Message.Document; d == nil || d.FileID != "d1" || d.FileName != "memo.m4a" || d.MimeType != "audio/mp4" || d.FileSize != 4000 {
		t.Errorf("got document %+v; want d1 memo.m4a audio/mp4 4000", d)
	}
	cmd := ups[5].Message
	if !cmd.IsCommand() || cmd.Command() != "start" || cmd.CommandArguments() != "now" {
		t.Errorf("got command %q args %q (entities %+v); want start, now", cmd.Command(), cmd.CommandArguments(), cmd.Entities)
	}
	reply := ups[6].Message
	if reply.ReplyToMessage == nil || reply.ReplyToMessage.MessageID != voice.MessageID || reply.ReplyToMessage.Voice == nil {
		t.Errorf("got reply_to_message %+v; want the voice message %d", reply.ReplyToMessage, voice.MessageID)
	}
	if reply.MessageID != 5 { // alice's 5th message
		t.Errorf("got message_id %d; want 5", reply.MessageID)
	}
}

func TestSendMessageThroughLibrary(t *testing.T) {
	srv := telegramtest.New(t, token)
	in := srv.PushVoice(alice, "v1", 3, 100)
	bot := newBot(t, srv)

	cfg := tgbotapi.NewMessage(alice.ID, "<b>Transcript</b>: hello")
	cfg.ParseMode = tgbotapi.ModeHTML
	cfg.ReplyToMessageID = in.MessageID
	got, err := bot.Send(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageID != in.MessageID+1 || got.Chat == nil || got.Chat.ID != alice.ID || got.From == nil || !got.From.IsBot ||
		got.Text != "Transcript: hello" || got.ReplyToMessage == nil || got.ReplyToMessage.MessageID != in.MessageID {
		t.Errorf("got %+v; want message %d from the bot replying to %d with the parsed text", got, in.MessageID+1, in.MessageID)
	}
	if _, err := bot.Request(tgbotapi.NewChatAction(alice.ID, tgbotapi.ChatTyping)); err != nil {
		t.Fatal(err)
	}
	sent := srv.WaitSent(t, 2, time.Second)
	want := []telegramtest.Sent{
		{Method: "sendMessage", ChatID: alice.ID, MessageID: got.MessageID, ReplyTo: in.MessageID, Text: cfg.Text, ParseMode: "HTML"},
		{Method: "sendChatAction", ChatID: alice.ID, Text: "typing"},
	}
	for i := range want {
		sent[i].At = time.Time{}
		if fmt.Sprintf("%+v", sent[i]) != fmt.Sprintf("%+v", want[i]) {
			t.Errorf("sent[%d]: got %+v; want %+v", i, sent[i], want[i])
		}
	}
	if n := len(srv.SentTo(alice.ID)); n != 2 {
		t.Errorf("got %d sent to alice; want 2", n)
	}
	if n := len(srv.SentTo(1)); n != 0 {
		t.Errorf("got %d sent to chat 1; want 0", n)
	}
	// Message ids are shared per chat between pushed and sent messages.
	if m := srv.PushText(alice, "thanks", nil); m.MessageID != got.MessageID+1 {
		t.Errorf("got pushed message_id %d; want %d", m.MessageID, got.MessageID+1)
	}
}

func TestSendMessageErrors(t *testing.T) {
	srv := telegramtest.New(t, token)
	in := srv.PushText(alice, "hi", nil)
	chat := fmt.Sprint(alice.ID)
	emoji := "\U0001F600" // two UTF-16 code units
	tests := []struct {
		name   string
		params url.Values
		want   string // "" for success
	}{
		{"plain", url.Values{"chat_id": {chat}, "text": {"hello"}}, ""},
		{"missing text", url.Values{"chat_id": {chat}}, "Bad Request: message text is empty"},
		{"blank text", url.Values{"chat_id": {chat}, "text": {" \n "}}, "Bad Request: message text is empty"},
		{"4096 units", url.Values{"chat_id": {chat}, "text": {strings.Repeat("a", 4096)}}, ""},
		{"4097 units", url.Values{"chat_id": {chat}, "text": {strings.Repeat("a", 4097)}}, "Bad Request: message is too long"},
		{"2048 emoji", url.Values{"chat_id": {chat}, "text": {strings.Repeat(emoji, 2048)}}, ""},
		{"2048 emoji and one", url.Values{"chat_id": {chat}, "text": {strings.Repeat(emoji, 2048) + "a"}}, "Bad Request: message is too long"},
		{"4096 cyrillic", url.Values{"chat_id": {chat}, "text": {strings.Repeat("я", 4096)}}, ""},
		{"html markup is not counted", url.Values{"chat_id": {chat}, "parse_mode": {"HTML"},
			"text": {"<b>" + strings.Repeat("a", 4090) + "</b>&lt;&gt;"}}, ""},
		{"html escapes count once", url.Values{"chat_id": {chat}, "parse_mode": {"HTML"},
			"text": {strings.Repeat("&amp;", 4097)}}, "Bad Request: message is too long"},
		{"html unescaped <", url.Values{"chat_id": {chat}, "parse_mode": {"HTML"}, "text": {"a < b"}},
			`Bad Request: can't parse entities: Unsupported start tag "" at byte offset 2`},
		{"html unclosed", url.Values{"chat_id": {chat}, "parse_mode": {"HTML"}, "text": {"<b>bold"}},
			`Bad Request: can't parse entities: Can't find end tag corresponding to start tag "b"`},
		{"markdownv2 unescaped dot", url.Values{"chat_id": {chat}, "parse_mode": {"MarkdownV2"}, "text": {"Done."}},
			`Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\'`},
		{"markdownv2 ok", url.Values{"chat_id": {chat}, "parse_mode": {"MarkdownV2"}, "text": {"*Done*\\. `a.b` [x](http://e.com/a_b)"}}, ""},
		{"markdown unclosed", url.Values{"chat_id": {chat}, "parse_mode": {"Markdown"}, "text": {"file_name"}},
			"Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 4"},
		{"unknown parse mode", url.Values{"chat_id": {chat}, "parse_mode": {"BBCode"}, "text": {"x"}}, "Bad Request: unsupported parse_mode"},
		{"unknown chat", url.Values{"chat_id": {"31337"}, "text": {"x"}}, "Bad Request: chat not found"},
		{"no chat", url.Values{"text": {"x"}}, "Bad Request: chat_id is empty"},
		{"reply to pushed", url.Values{"chat_id": {chat}, "text": {"x"}, "reply_to_message_id": {fmt.Sprint(in.MessageID)}}, ""},
		{"reply_parameters", url.Values{"chat_id": {chat}, "text": {"x"}, "reply_parameters": {fmt.Sprintf(`{"message_id":%d}`, in.MessageID)}}, ""},
		{"reply to missing", url.Values{"chat_id": {chat}, "text": {"x"}, "reply_to_message_id": {"999"}}, "Bad Request: message to be replied not found"},
		{"reply to missing allowed", url.Values{"chat_id": {chat}, "text": {"x"}, "reply_to_message_id": {"999"}, "allow_sending_without_reply": {"true"}}, ""},
		{"bad markup", url.Values{"chat_id": {chat}, "text": {"x"}, "reply_markup": {"{"}}, "Bad Request: can't parse reply keyboard markup JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Sent())
			r := call(t, srv, "sendMessage", tt.params)
			recorded := len(srv.Sent()) - before
			if tt.want == "" {
				mustOK(t, "sendMessage", r)
				if recorded != 1 {
					t.Errorf("got %d recorded; want 1", recorded)
				}
				return
			}
			if r.Ok || r.ErrorCode != 400 || r.Description != tt.want {
				t.Errorf("got ok=%v %d %q; want 400 %q", r.Ok, r.ErrorCode, r.Description, tt.want)
			}
			if recorded != 0 {
				t.Errorf("got %d recorded for a failed call; want 0", recorded)
			}
		})
	}
	sent := srv.Sent()
	if last := sent[len(sent)-1]; last.ReplyTo != 0 {
		t.Errorf("got ReplyTo %d with allow_sending_without_reply; want 0", last.ReplyTo)
	}
	if s := sent[len(sent)-2]; s.ReplyTo != in.MessageID {
		t.Errorf("got ReplyTo %d from reply_parameters; want %d", s.ReplyTo, in.MessageID)
	}
}

func TestEditMessageText(t *testing.T) {
	srv := telegramtest.New(t, token)
	in := srv.PushVoice(alice, "v1", 3, 100)
	bot := newBot(t, srv)
	placeholder, err := bot.Send(tgbotapi.NewMessage(alice.ID, "Transcribing…"))
	if err != nil {
		t.Fatal(err)
	}
	edited, err := bot.Send(tgbotapi.NewEditMessageText(alice.ID, placeholder.MessageID, "Done"))
	if err != nil {
		t.Fatal(err)
	}
	if edited.MessageID != placeholder.MessageID || edited.Text != "Done" || edited.EditDate == 0 {
		t.Errorf("got %+v; want message %d with text Done and edit_date", edited, placeholder.MessageID)
	}

	tests := []struct {
		name   string
		msgID  int
		text   string
		wantOK bool
		want   string
	}{
		{"same text", placeholder.MessageID, "Done", false,
			"Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"},
		{"never sent", 999, "x", false, "Bad Request: message to edit not found"},
		{"user's message", in.MessageID, "x", false, "Bad Request: message to edit not found"},
		{"empty", placeholder.MessageID, "", false, "Bad Request: message text is empty"},
		{"too long", placeholder.MessageID, strings.Repeat("a", 4097), false, "Bad Request: MESSAGE_TOO_LONG"},
		{"new text", placeholder.MessageID, "Done!", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bot.Send(tgbotapi.NewEditMessageText(alice.ID, tt.msgID, tt.text))
			if tt.wantOK {
				if err != nil {
					t.Fatalf("got %v; want success", err)
				}
				return
			}
			var apiErr *tgbotapi.Error
			if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Message != tt.want {
				t.Errorf("got %v; want 400 %q", err, tt.want)
			}
		})
	}
	var methods []string
	for _, s := range srv.Sent() {
		methods = append(methods, fmt.Sprintf("%s:%d:%s", s.Method, s.MessageID, s.Text))
	}
	want := fmt.Sprintf("[sendMessage:%[1]d:Transcribing… editMessageText:%[1]d:Done editMessageText:%[1]d:Done!]", placeholder.MessageID)
	if fmt.Sprint(methods) != want {
		t.Errorf("got sent %v; want %s", methods, want)
	}
}

func TestSendDocument(t *testing.T) {
	srv := telegramtest.New(t, token)
	in := srv.PushVoice(alice, "v1", 3, 100)
	bot := newBot(t, srv)
	content := []byte("the whole transcript\n")

	doc := tgbotapi.NewDocument(alice.ID, tgbotapi.FileBytes{Name: "transcript.txt", Bytes: content})
	doc.Caption = "Full transcript"
	doc.ReplyToMessageID = in.MessageID
	got, err := bot.Send(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got.Document == nil || got.Document.FileName != "transcript.txt" || got.Document.FileSize != len(content) ||
		got.Caption != "Full transcript" || got.ReplyToMessage == nil || got.ReplyToMessage.MessageID != in.MessageID {
		t.Errorf("got %+v (document %+v); want transcript.txt with caption replying to %d", got, got.Document, in.MessageID)
	}
	sent := srv.WaitSent(t, 1, time.Second)[0]
	if sent.Method != "sendDocument" || sent.ChatID != alice.ID || sent.MessageID != got.MessageID || sent.ReplyTo != in.MessageID ||
		sent.Text != "Full transcript" || sent.FileName != "transcript.txt" || !bytes.Equal(sent.File, content) {
		t.Errorf("got sent %+v; want the document recorded", sent)
	}

	// The uploaded document can be fetched like any file.
	f, err := bot.GetFile(tgbotapi.FileConfig{FileID: got.Document.FileID})
	if err != nil {
		t.Fatal(err)
	}
	if body := download(t, srv, f.FilePath); !bytes.Equal(body, content) {
		t.Errorf("got downloaded %q; want %q", body, content)
	}

	tests := []struct {
		name    string
		caption string
		file    []byte
		want    string
	}{
		{"caption of 1024", strings.Repeat("c", 1024), []byte("x"), ""},
		{"caption of 1025", strings.Repeat("c", 1025), []byte("x"), "Bad Request: message caption is too long"},
		{"empty file", "", []byte{}, "Bad Request: file must be non-empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tgbotapi.NewDocument(alice.ID, tgbotapi.FileBytes{Name: "a.txt", Bytes: tt.file})
			d.Caption = tt.caption
			_, err := bot.Send(d)
			if tt.want == "" {
				if err != nil {
					t.Errorf("got %v; want success", err)
				}
				return
			}
			// tgbotapi leaves Code unset for uploads; the message is what it decodes.
			var apiErr *tgbotapi.Error
			if !errors.As(err, &apiErr) || apiErr.Message != tt.want {
				t.Errorf("got %v; want %q", err, tt.want)
			}
		})
	}

	// Without a document part.
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	_ = w.WriteField("chat_id", fmt.Sprint(alice.ID))
	_ = w.Close()
	resp, err := http.Post(srv.URL()+"/bot"+token+"/sendDocument", w.FormDataContentType(), &b)
	if err != nil {
		t.Fatal(err)
	}
	if r := decode(t, resp); r.ErrorCode != 400 || r.Description != "Bad Request: there is no document in the request" {
		t.Errorf("got %d %q; want 400 there is no document", r.ErrorCode, r.Description)
	}
}

func download(t *testing.T, srv *telegramtest.Server, filePath string) []byte {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/file/bot" + token + "/" + filePath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download %s: got status %d (%s); want 200", filePath, resp.StatusCode, body)
	}
	return body
}

func TestGetFileAndDownload(t *testing.T) {
	srv := telegramtest.New(t, token)
	content := []byte("OggS fake voice")
	id := srv.AddFile(content, "voice/whatever.oga")
	id2 := srv.AddFile([]byte("doc"), "report.pdf")
	bot := newBot(t, srv)

	f, err := bot.GetFile(tgbotapi.FileConfig{FileID: id})
	if err != nil {
		t.Fatal(err)
	}
	if f.FileID != id || f.FileUniqueID == "" || f.FileSize != len(content) || !regexp.MustCompile(`^voice/file_\d+\.oga$`).MatchString(f.FilePath) {
		t.Errorf("got %+v; want %s of %d bytes at voice/file_N.oga", f, id, len(content))
	}
	if body := download(t, srv, f.FilePath); !bytes.Equal(body, content) {
		t.Errorf("got %q; want %q", body, content)
	}
	f2, err := bot.GetFile(tgbotapi.FileConfig{FileID: id2})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^documents/file_\d+\.pdf$`).MatchString(f2.FilePath) || f2.FileID == f.FileID || f2.FileUniqueID == f.FileUniqueID {
		t.Errorf("got %+v; want a distinct file at documents/file_N.pdf", f2)
	}

	_, err = bot.GetFile(tgbotapi.FileConfig{FileID: "nope"})
	var apiErr *tgbotapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Message != "Bad Request: invalid file_id" {
		t.Errorf("got %v; want 400 invalid file_id", err)
	}
	if got, want := fmt.Sprint(srv.GetFileCalls()), fmt.Sprint([]string{id, id2, "nope"}); got != want {
		t.Errorf("got GetFileCalls() %s; want %s", got, want)
	}
	if got, want := fmt.Sprint(srv.Downloads()), fmt.Sprint([]string{f.FilePath}); got != want {
		t.Errorf("got Downloads() %s; want %s", got, want)
	}

	// The update carries the same file_unique_id as getFile.
	m := srv.PushVoice(alice, id, 1, int64(len(content)))
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if err != nil || len(ups) != 1 || ups[0].UpdateID != int(m.UpdateID) {
		t.Fatalf("got %v, %v; want the voice update", ups, err)
	}
	if u := ups[0].Message.Voice.FileUniqueID; u != f.FileUniqueID {
		t.Errorf("got file_unique_id %q in the update; want %q", u, f.FileUniqueID)
	}
}

func TestTooBigFile(t *testing.T) {
	srv := telegramtest.New(t, token)
	id := srv.AddTooBigFile(25 << 20)
	r := call(t, srv, "getFile", url.Values{"file_id": {id}})
	if r.Ok || r.ErrorCode != 400 || r.Description != "Bad Request: file is too big" {
		t.Errorf("got ok=%v %d %q; want 400 file is too big", r.Ok, r.ErrorCode, r.Description)
	}
	bot := newBot(t, srv)
	_, err := bot.GetFile(tgbotapi.FileConfig{FileID: id})
	var apiErr *tgbotapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Message != "Bad Request: file is too big" {
		t.Errorf("got %v; want tgbotapi.Error 400 file is too big", err)
	}
	if n := len(srv.Downloads()); n != 0 {
		t.Errorf("got %d downloads; want 0", n)
	}
}

func TestLocalMode(t *testing.T) {
	srv := telegramtest.New(t, token)
	dir := t.TempDir()
	content := []byte("local voice")
	id := srv.AddFile(content, "voice/x.oga")
	big := srv.AddTooBigFile(25 << 20)
	srv.SetLocalMode(dir)
	bot := newBot(t, srv)

	f, err := bot.GetFile(tgbotapi.FileConfig{FileID: id})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(f.FilePath) || !strings.HasPrefix(f.FilePath, dir+string(filepath.Separator)) {
		t.Errorf("got file_path %q; want an absolute path under %s", f.FilePath, dir)
	}
	if got, err := os.ReadFile(f.FilePath); err != nil || !bytes.Equal(got, content) {
		t.Errorf("got %q, %v at %s; want %q", got, err, f.FilePath, content)
	}
	resp, err := http.Get(srv.URL() + "/file/bot" + token + "/" + strings.TrimPrefix(f.FilePath, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if r := decode(t, resp); r.ErrorCode != 404 {
		t.Errorf("got /file/ status %d; want 404 in local mode", r.ErrorCode)
	}

	// The local server has no 20 MB limit.
	bf, err := bot.GetFile(tgbotapi.FileConfig{FileID: big})
	if err != nil {
		t.Fatalf("got %v; want a local path for a 25 MB file", err)
	}
	if st, err := os.Stat(bf.FilePath); err != nil || st.Size() != 25<<20 || bf.FileSize != 25<<20 {
		t.Errorf("got %v, %v, file_size %d; want a 25 MB file", st, err, bf.FileSize)
	}
}

func TestRateLimit(t *testing.T) {
	srv := telegramtest.New(t, token)
	srv.PushText(alice, "hi", nil)
	srv.RateLimitNext("sendMessage", 2, 7)

	r := call(t, srv, "SENDMESSAGE", url.Values{"chat_id": {fmt.Sprint(alice.ID)}, "text": {"x"}})
	if r.Ok || r.ErrorCode != 429 || r.Description != "Too Many Requests: retry after 7" || r.Parameters == nil || r.Parameters.RetryAfter != 7 {
		t.Errorf("got %+v; want 429 with parameters.retry_after 7", r)
	}

	bot := newBot(t, srv)
	_, err := bot.Send(tgbotapi.NewMessage(alice.ID, "x"))
	var apiErr *tgbotapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != 429 || apiErr.RetryAfter != 7 {
		t.Fatalf("got %#v; want tgbotapi.Error{Code: 429, RetryAfter: 7}", err)
	}
	if n := len(srv.Sent()); n != 0 {
		t.Errorf("got %d sent while rate limited; want 0", n)
	}
	if _, err := bot.Send(tgbotapi.NewMessage(alice.ID, "x")); err != nil {
		t.Errorf("third call: got %v; want success", err)
	}
	if n := len(srv.Sent()); n != 1 {
		t.Errorf("got %d sent; want 1", n)
	}
}

func TestFailNext(t *testing.T) {
	srv := telegramtest.New(t, token)
	srv.PushText(alice, "hi", nil)
	srv.FailNext("sendMessage", 1, 403, "Forbidden: bot was blocked by the user")
	srv.FailNext("getUpdates", 1, 502, "Bad Gateway")
	tests := []struct {
		method   string
		wantCode int
		wantDesc string
	}{
		{"sendMessage", 403, "Forbidden: bot was blocked by the user"},
		{"sendMessage", 0, ""},
		{"getUpdates", 502, "Bad Gateway"},
		{"getUpdates", 0, ""},
	}
	for i, tt := range tests {
		r := call(t, srv, tt.method, url.Values{"chat_id": {fmt.Sprint(alice.ID)}, "text": {"x"}, "offset": {"5"}})
		if r.ErrorCode != tt.wantCode || r.Description != tt.wantDesc || r.Ok != (tt.wantCode == 0) {
			t.Errorf("call %d %s: got ok=%v %d %q; want %d %q", i, tt.method, r.Ok, r.ErrorCode, r.Description, tt.wantCode, tt.wantDesc)
		}
	}
	if c := srv.Confirmed(); c != 4 {
		t.Errorf("got Confirmed() %d; want 4 (the failed call confirms nothing, the next one does)", c)
	}
}

// fatalRecorder stands in for a test that WaitSent fails.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msg = fmt.Sprintf(format, args...)
}

func TestWaitSent(t *testing.T) {
	srv := telegramtest.New(t, token)
	srv.PushText(alice, "hi", nil)
	posted := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		resp, err := http.PostForm(srv.URL()+"/bot"+token+"/sendMessage", url.Values{"chat_id": {fmt.Sprint(alice.ID)}, "text": {"late"}})
		if err == nil {
			err = resp.Body.Close()
		}
		posted <- err
	}()
	if got := srv.WaitSent(t, 1, 5*time.Second); len(got) != 1 || got[0].Text != "late" {
		t.Errorf("got %+v; want the late message", got)
	}
	if err := <-posted; err != nil {
		t.Errorf("sendMessage: %v", err)
	}

	rec := &fatalRecorder{TB: t}
	start := time.Now()
	srv.WaitSent(rec, 2, 100*time.Millisecond)
	if rec.msg == "" || time.Since(start) < 100*time.Millisecond {
		t.Errorf("got failure %q after %v; want a failure after the timeout", rec.msg, time.Since(start))
	}
}

// waitFor polls cond for up to 5s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHoldAnswer(t *testing.T) {
	srv := telegramtest.New(t, token)
	m := srv.PushText(alice, "hello", nil)
	accepted, release := srv.HoldAnswer(func(s telegramtest.Sent) bool { return s.Text == "held" })
	mustOK(t, "sendMessage", call(t, srv, "sendMessage", url.Values{"chat_id": {"4242"}, "text": {"not held"}}))

	answered := make(chan apiResp, 1)
	go func() {
		answered <- call(t, srv, "sendMessage", url.Values{"chat_id": {"4242"}, "text": {"held"}, "reply_to_message_id": {fmt.Sprint(m.MessageID)}})
	}()
	var x telegramtest.Sent
	select {
	case x = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the held call was not accepted")
	}
	if x.Method != "sendMessage" || x.Text != "held" {
		t.Errorf("accepted %+v; want the held message", x)
	}
	if n := len(srv.SentTo(4242)); n != 2 {
		t.Errorf("%d calls recorded before the answer; want both", n)
	}
	select {
	case <-answered:
		t.Fatal("answered before release")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	mustOK(t, "sendMessage", <-answered)

	// A client that gives up while its answer is held gets none, and the
	// message stays sent.
	_, release = srv.HoldAnswer(func(s telegramtest.Sent) bool { return s.Method == "editMessageText" })
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/bot"+token+"/editMessageText",
		strings.NewReader(url.Values{"chat_id": {"4242"}, "message_id": {fmt.Sprint(x.MessageID)}, "text": {"edited"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the held edit was answered")
	}
	shown := srv.BotMessages(4242)
	if len(shown) != 2 || shown[0].Text != "not held" || shown[1].Text != "edited" || !shown[1].Edited || shown[1].ReplyTo != m.MessageID {
		t.Errorf("the chat shows %+v; want the first message and the edited reply", shown)
	}
}

func TestDelayAnswers(t *testing.T) {
	srv := telegramtest.New(t, token)
	srv.PushText(alice, "hello", nil)
	srv.DelayAnswers(func(s telegramtest.Sent) bool { return s.Text == "slow" }, 300*time.Millisecond)
	start := time.Now()
	mustOK(t, "sendMessage", call(t, srv, "sendMessage", url.Values{"chat_id": {"4242"}, "text": {"fast"}}))
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("an unmatched call took %v", d)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustOK(t, "sendMessage", call(t, srv, "sendMessage", url.Values{"chat_id": {"4242"}, "text": {"slow"}}))
	}()
	waitFor(t, func() bool { return len(srv.SentTo(4242)) == 2 })
	select {
	case <-done:
		t.Fatal("the slow call was answered at once")
	default:
	}
	<-done
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the slow call was answered after %v; want at least 300ms", d)
	}
}
