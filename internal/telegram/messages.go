package telegram

import (
	"fmt"
	"strings"

	"github.com/transcriber/transcriber/internal/job"
)

// Languages the bot speaks; any other sender gets English.
var Languages = []string{"en", "ru"}

// Language picks the bot's language from a Telegram language_code such as
// "ru" or "en-GB".
func Language(code string) string {
	code = strings.ToLower(code)
	for _, l := range Languages {
		if code == l || strings.HasPrefix(code, l+"-") {
			return l
		}
	}
	return "en"
}

// texts holds every sentence the bot says, by language.
type texts struct {
	help, cloudLimit, stranger, notMedia, tooBig, empty, received string
	langUsage, langSet, speechUsage, speechSet                    string
	replyToRecording, noJob, retried, notRetriable, statusOf      string
	documentCaption                                               string
	states                                                        map[job.State]string
	reasons                                                       map[job.Kind]string
	failed, dead                                                  string
}

var catalog = map[string]texts{
	"en": {
		help: "I turn voice messages into text. Send me a voice message, an audio file, a video note or a video, " +
			"and I reply with what was said.\n\n" +
			"Limits: %srecordings up to %s.\n" +
			"Commands: /lang en|ru — my language in this chat; /speech CODE — the language spoken in your recordings " +
			"(en, ru, de…); /status and /retry — send them as a reply to a recording.\n\n" +
			"Privacy: your recordings and their text are kept on this service's own storage to do the work and are never " +
			"written to its logs. Only people its owner allowed can use it.",
		cloudLimit: "files up to 20 MB, ",
		empty:      "This recording is empty: there is nothing to transcribe.",
		stranger:   "Sorry, this bot is private. If you know its owner, ask them to add your id %d to TELEGRAM_ALLOWED_USERS.",
		notMedia:   "I can only transcribe voice messages, audio and video. This file doesn't look like either, so I left it alone.",
		tooBig: "This file is %s, and Telegram lets bots download at most 20 MB. The owner of this bot can lift the limit " +
			"by running a local Bot API server (telegram-bot-api --local) and pointing TELEGRAM_API_ENDPOINT at it.",
		received:         "Received, in the queue…",
		langUsage:        "Send /lang en or /lang ru.",
		langSet:          "I'll speak English in this chat.",
		speechUsage:      "Recordings here are taken to be in %s. Send /speech and a language code to change it, e.g. /speech en or /speech ru.",
		speechSet:        "Recordings in this chat are now taken to be in %s.",
		replyToRecording: "Send this command as a reply to the recording it is about.",
		noJob:            "I have no job for that message.",
		retried:          "Trying again…",
		notRetriable:     "That job is %s; only failed jobs can be retried.",
		statusOf:         "Job %s: %s.",
		documentCaption:  "The text is long, so here it is as a file. It begins:\n\n%s",
		states: map[job.State]string{
			job.Accepted: "received", job.Fetching: "downloading", job.Converting: "converting",
			job.Transcribing: "recognising speech", job.Replying: "sending the text", job.Done: "done",
			job.Failed: "failed", job.Dead: "stopped after several attempts", job.Cancelled: "cancelled",
		},
		reasons: map[job.Kind]string{
			job.EmptyAudio:          "the recording is empty",
			job.UnsupportedFormat:   "the file is not audio I can decode",
			job.TooLong:             "the recording is longer than this service accepts",
			job.NoSpeech:            "no speech was recognised in the recording",
			job.EngineRejected:      "the speech service refused the recording",
			job.EngineUnauthorized:  "the speech service refused this service's credentials",
			job.OperationFailed:     "the speech service could not process the recording",
			job.EngineNotConfigured: "the speech service is not set up",
			job.UnsupportedLanguage: "the speech recognition set up here does not understand %s. The bot's owner can add an engine " +
				"for it (TRANSCRIBER_ENGINE_ROUTES, e.g. %s=openai); if the recording is in another language, tell me with /speech, e.g. /speech en",
			job.FileTooBig: "the file is bigger than the 20 MB Telegram lets bots download; the bot's owner can lift the limit " +
				"by running a local Bot API server (telegram-bot-api --local) and pointing TELEGRAM_API_ENDPOINT at it",
			job.SourceFileMissing: "Telegram no longer has the file",
			job.ServiceError:      "the speech service is unavailable",
			job.NoAck:             "the speech service could not be reached",
			job.Timeout:           "it took too long",
			job.IntakeNotRunning:  "this service's Telegram connection is not set up",
		},
		failed: "Sorry, I couldn't transcribe this: %s.",
		dead:   "Sorry, I couldn't transcribe this: %s. I tried several times; the owner can retry it.",
	},
	"ru": {
		help: "Я превращаю голосовые сообщения в текст. Пришлите голосовое, аудиофайл, видеосообщение или видео — " +
			"отвечу тем, что в нём сказано.\n\n" +
			"Ограничения: %sзаписи до %s.\n" +
			"Команды: /lang en|ru — язык бота в этом чате; /speech КОД — язык, на котором говорят в записях " +
			"(en, ru, de…); /status и /retry — отправьте ответом на запись.\n\n" +
			"Приватность: записи и их текст хранятся в собственном хранилище сервиса только для работы и никогда не " +
			"попадают в его журналы. Пользоваться ботом могут только те, кого разрешил владелец.",
		cloudLimit: "файлы до 20 МБ, ",
		empty:      "Эта запись пустая: расшифровывать нечего.",
		stranger:   "Извините, это частный бот. Если вы знаете владельца, попросите добавить ваш id %d в TELEGRAM_ALLOWED_USERS.",
		notMedia:   "Я расшифровываю только голосовые сообщения, аудио и видео. Этот файл не похож ни на то, ни на другое, поэтому я его не трогаю.",
		tooBig: "Файл весит %s, а Telegram даёт ботам скачивать не больше 20 МБ. Владелец бота может снять ограничение, " +
			"запустив локальный Bot API сервер (telegram-bot-api --local) и указав его в TELEGRAM_API_ENDPOINT.",
		received:         "Получено, в очереди…",
		langUsage:        "Отправьте /lang en или /lang ru.",
		langSet:          "В этом чате я буду говорить по-русски.",
		speechUsage:      "Записи здесь считаются записями на языке: %s. Чтобы сменить, отправьте /speech и код языка, например /speech en или /speech ru.",
		speechSet:        "Теперь записи в этом чате считаются записями на языке: %s.",
		replyToRecording: "Отправьте эту команду ответом на запись, о которой речь.",
		noJob:            "Для этого сообщения у меня нет задачи.",
		retried:          "Пробую снова…",
		notRetriable:     "Задача в состоянии «%s»; повторить можно только неудавшуюся.",
		statusOf:         "Задача %s: %s.",
		documentCaption:  "Текст длинный, поэтому присылаю файлом. Начало:\n\n%s",
		states: map[job.State]string{
			job.Accepted: "получено", job.Fetching: "скачиваю", job.Converting: "конвертирую",
			job.Transcribing: "распознаю речь", job.Replying: "отправляю текст", job.Done: "готово",
			job.Failed: "не удалось", job.Dead: "остановлено после нескольких попыток", job.Cancelled: "отменено",
		},
		reasons: map[job.Kind]string{
			job.EmptyAudio:          "запись пустая",
			job.UnsupportedFormat:   "файл не похож на звук, который я умею читать",
			job.TooLong:             "запись длиннее, чем принимает сервис",
			job.NoSpeech:            "в записи не распознано речи",
			job.EngineRejected:      "сервис распознавания отклонил запись",
			job.EngineUnauthorized:  "сервис распознавания не принял ключ доступа",
			job.OperationFailed:     "сервис распознавания не смог обработать запись",
			job.EngineNotConfigured: "сервис распознавания не настроен",
			job.UnsupportedLanguage: "здешнее распознавание речи не понимает язык: %s. Владелец бота может добавить для него движок " +
				"(TRANSCRIBER_ENGINE_ROUTES, например %s=openai); если запись на другом языке, скажите мне командой /speech, например /speech en",
			job.FileTooBig: "файл больше 20 МБ, которые Telegram даёт скачивать ботам; владелец бота может снять ограничение, " +
				"запустив локальный Bot API сервер (telegram-bot-api --local) и указав его в TELEGRAM_API_ENDPOINT",
			job.SourceFileMissing: "Telegram больше не хранит этот файл",
			job.ServiceError:      "сервис распознавания недоступен",
			job.NoAck:             "до сервиса распознавания не удалось достучаться",
			job.Timeout:           "это заняло слишком много времени",
			job.IntakeNotRunning:  "у сервиса не настроено подключение к Telegram",
		},
		failed: "Не получилось расшифровать: %s.",
		dead:   "Не получилось расшифровать: %s. Я пробовал несколько раз; владелец может повторить.",
	},
}

func textsFor(lang string) texts {
	if t, ok := catalog[lang]; ok {
		return t
	}
	return catalog["en"]
}

// failureNotice says in plain words why a job stopped; speech is the
// job's language, which some reasons name.
func failureNotice(lang string, state job.State, f *job.Failure, speech string) string {
	t := textsFor(lang)
	reason := t.reasons[job.Internal]
	if f != nil {
		if r, ok := t.reasons[f.Kind]; ok {
			reason = r
		}
		if f.Kind == job.UnsupportedLanguage {
			code, _, _ := strings.Cut(speech, "-")
			reason = fmt.Sprintf(reason, languageName(lang, speech), code)
		}
	}
	if reason == "" {
		reason = map[string]string{"en": "something went wrong on our side", "ru": "что-то сломалось на нашей стороне"}[langOrEn(lang)]
	}
	if state == job.Dead {
		return fmt.Sprintf(t.dead, reason)
	}
	return fmt.Sprintf(t.failed, reason)
}

// languageNames are the languages the bot names in its own words; others
// go by their code.
var languageNames = map[string]map[string]string{
	"en": {"en": "English", "ru": "Russian", "uk": "Ukrainian", "de": "German", "fr": "French", "es": "Spanish"},
	"ru": {"en": "английский", "ru": "русский", "uk": "украинский", "de": "немецкий", "fr": "французский", "es": "испанский"},
}

// languageName is a speech language as the bot says it in lang.
func languageName(lang, code string) string {
	if code == "" {
		code = "?"
	}
	primary, _, _ := strings.Cut(strings.ToLower(code), "-")
	if n, ok := languageNames[langOrEn(lang)][primary]; ok {
		return fmt.Sprintf("%s (%s)", n, code)
	}
	return code
}

func langOrEn(lang string) string {
	if _, ok := catalog[lang]; ok {
		return lang
	}
	return "en"
}

func stateText(lang string, s job.State) string {
	if v, ok := textsFor(lang).states[s]; ok {
		return v
	}
	return string(s)
}

func humanSize(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}
