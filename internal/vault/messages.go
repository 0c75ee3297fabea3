package vault

import (
	"bytes"
	"fmt"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// messages are what the intake writes into notes for a person to read, in
// the notes' language.
type messages struct {
	noSpeech string
	// cutShort takes the length of what was kept.
	cutShort string
}

var catalog = map[string]messages{
	"en": {
		noSpeech: "No speech was recognised in this recording.",
		cutShort: "The recording was cut short: %s of audio were kept.",
	},
	"ru": {
		noSpeech: "В записи не распознано речи.",
		cutShort: "Запись прервана: сохранено %s аудио.",
	},
}

// messagesFor are the messages of a language (a BCP 47 tag); English
// unless it is one the catalog has.
func messagesFor(language string) messages {
	if m, ok := catalog[engine.PrimaryLanguage(language)]; ok {
		return m
	}
	return catalog["en"]
}

// clock writes a length as people read it on a player: 0:47, 12:05, 1:02:03.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// dropNoSpeech removes the intake's own "no speech" line from a note whose
// recording was revived and has a transcript after all.
func dropNoSpeech(content []byte) []byte {
	for _, m := range catalog {
		content = bytes.Replace(content, []byte("\n"+m.noSpeech+"\n"), []byte("\n"), 1)
	}
	return content
}
