package job

import "testing"

func TestCheckLanguage(t *testing.T) {
	for tag, ok := range map[string]bool{
		"": true, "en": true, "ru": true, "EN": true, "fil": true, "en-US": true, "en_us": true, "zh-Hant-TW": true, "sr-Latn": true,
		"e": false, "engl": false, "english please": false, "en-": false, "en--US": false, "en-U": false, "en-toolongtag": false, "1en": false, "ru;drop": false,
	} {
		if err := CheckLanguage(tag); (err == nil) != ok {
			t.Errorf("CheckLanguage(%q) = %v; want ok %v", tag, err, ok)
		}
	}
	for s, want := range map[string]bool{"en": true, "fil": true, "EN": false, "e": false, "engl": false, "en-us": false, "": false} {
		if got := IsLanguageCode(s); got != want {
			t.Errorf("IsLanguageCode(%q) = %v; want %v", s, got, want)
		}
	}
}
