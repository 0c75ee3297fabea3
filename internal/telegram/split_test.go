package telegram

import (
	"slices"
	"strings"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/transcriber/transcriber/internal/job"
)

// Scenario: Long transcripts are split at sentence or word boundaries under the limit
func TestSplit(t *testing.T) {
	sentence := "The quick brown fox jumps over the lazy dog. "
	long := strings.Repeat(sentence, 300) // about 13,500 characters
	cyrillic := strings.Repeat("Съешь же ещё этих мягких французских булок, да выпей чаю. ", 200)
	emoji := strings.Repeat("🎤 ", 3000) // two UTF-16 units per emoji
	oneWord := strings.Repeat("a", 9000)
	tests := []struct {
		name      string
		text      string
		wantParts int
	}{
		{"short", "go forward ten meters", 1},
		{"long English", long, 4},
		{"long Russian", cyrillic, 3},
		{"surrogate pairs count double", emoji, 3},
		{"a word longer than a message", oneWord, 3},
		{"empty", "  ", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parts := split(tc.text, MessageLimit)
			if len(parts) != tc.wantParts {
				t.Errorf("parts = %d; want %d", len(parts), tc.wantParts)
			}
			for i, p := range parts {
				if units(p) > MessageLimit {
					t.Errorf("part %d has %d UTF-16 units; limit %d", i, units(p), MessageLimit)
				}
				if p == "" || p != strings.TrimSpace(p) {
					t.Errorf("part %d is empty or padded: %q…", i, p[:min(len(p), 20)])
				}
			}
			// Nothing is lost or reordered.
			if got, want := strings.Join(strings.Fields(strings.Join(parts, " ")), " "), strings.Join(strings.Fields(tc.text), " "); tc.name != "a word longer than a message" && got != want {
				t.Error("joining the parts does not give the text back")
			}
			if tc.name == "long English" || tc.name == "long Russian" {
				for i, p := range parts[:len(parts)-1] {
					if !strings.HasSuffix(p, ".") {
						t.Errorf("part %d ends mid-sentence: …%q", i, p[len(p)-20:])
					}
				}
			}
		})
	}
}

func TestLanguage(t *testing.T) {
	for code, want := range map[string]string{"ru": "ru", "ru-RU": "ru", "en": "en", "en-GB": "en", "de": "en", "": "en", "uk": "en"} {
		if got := Language(code); got != want {
			t.Errorf("Language(%q) = %q; want %q", code, got, want)
		}
	}
}

func TestEveryStateAndReasonIsWorded(t *testing.T) {
	states := []job.State{job.Accepted, job.Fetching, job.Converting, job.Transcribing, job.Replying, job.Done, job.Failed, job.Dead, job.Cancelled}
	// Every declared kind, so that a new one cannot go unworded; internal
	// and service_refused have no words of their own and read as trouble
	// on our side.
	kinds := slices.DeleteFunc(job.Kinds(), func(k job.Kind) bool { return k == job.Internal || k == job.ServiceRefused })
	for _, lang := range Languages {
		tx := textsFor(lang)
		for _, s := range states {
			if tx.states[s] == "" {
				t.Errorf("%s: no words for state %s", lang, s)
			}
		}
		for _, k := range kinds {
			if tx.reasons[k] == "" {
				t.Errorf("%s: no words for failure kind %s", lang, k)
			}
		}
	}
	if got := failureNotice("ru", job.Failed, &job.Failure{Kind: job.NoSpeech}, ""); got != "Не получилось расшифровать: в записи не распознано речи." {
		t.Errorf("Russian no-speech notice = %q", got)
	}
	if got := failureNotice("en", job.Dead, &job.Failure{Kind: "brand_new_kind"}, ""); !strings.Contains(got, "something went wrong on our side") {
		t.Errorf("notice for an unknown kind = %q", got)
	}
}

// Scenario: Only recordings are accepted
func TestRecordingDetection(t *testing.T) {
	tests := []struct {
		name    string
		msg     tgbotapi.Message
		want    bool
		wantExt string
	}{
		{"voice", tgbotapi.Message{Voice: &tgbotapi.Voice{FileID: "v", MimeType: "audio/ogg"}}, true, ".ogg"},
		{"audio by name", tgbotapi.Message{Audio: &tgbotapi.Audio{FileID: "a", FileName: "talk.M4A"}}, true, ".m4a"},
		{"audio by type", tgbotapi.Message{Audio: &tgbotapi.Audio{FileID: "a", MimeType: "audio/mpeg"}}, true, ".mp3"},
		{"video note", tgbotapi.Message{VideoNote: &tgbotapi.VideoNote{FileID: "n"}}, true, ".mp4"},
		{"video", tgbotapi.Message{Video: &tgbotapi.Video{FileID: "x", MimeType: "video/quicktime"}}, true, ".mov"},
		{"audio document", tgbotapi.Message{Document: &tgbotapi.Document{FileID: "d", FileName: "memo.oga", MimeType: "application/octet-stream"}}, true, ".ogg"},
		{"video document by type", tgbotapi.Message{Document: &tgbotapi.Document{FileID: "d", FileName: "clip", MimeType: "video/webm"}}, true, ".webm"},
		{"hostile name", tgbotapi.Message{Document: &tgbotapi.Document{FileID: "d", FileName: "../../x;rm -rf.wav", MimeType: "audio/wav"}}, true, ".wav"},
		{"text document", tgbotapi.Message{Document: &tgbotapi.Document{FileID: "d", FileName: "notes.txt", MimeType: "text/plain"}}, false, ""},
		{"photo", tgbotapi.Message{Photo: []tgbotapi.PhotoSize{{FileID: "p"}}}, false, ""},
		{"text", tgbotapi.Message{Text: "hello"}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := recording(&tc.msg)
			if ok != tc.want || m.ext != tc.wantExt {
				t.Errorf("recording = %+v, %v; want %v with %q", m, ok, tc.want, tc.wantExt)
			}
		})
	}
}

func TestAllowedUsers(t *testing.T) {
	b := &Bot{cfg: BotConfig{Allowed: []string{"42", "@Alice"}}}
	for _, tc := range []struct {
		user tgbotapi.User
		want bool
	}{
		{tgbotapi.User{ID: 42}, true},
		{tgbotapi.User{ID: 7, UserName: "alice"}, true},
		{tgbotapi.User{ID: 7, UserName: "bob"}, false},
		{tgbotapi.User{ID: 420}, false},
		{tgbotapi.User{ID: 7}, false},
	} {
		if got := b.allowed(&tc.user); got != tc.want {
			t.Errorf("allowed(%+v) = %v; want %v", tc.user, got, tc.want)
		}
	}
	if (&Bot{}).allowed(&tgbotapi.User{ID: 42}) {
		t.Error("with no list, nobody may use the bot")
	}
}
