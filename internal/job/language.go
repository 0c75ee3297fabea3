package job

import (
	"fmt"
	"regexp"
)

// languagePattern is a language tag as people write one: a primary code of
// two or three letters, then subtags ("en", "pt-BR", "zh_Hant"). It is no
// full BCP 47 parser: engines judge the tag, this only keeps out what
// cannot be one.
var languagePattern = regexp.MustCompile(`^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$`)

// CheckLanguage reports why tag cannot be the language of a job, or nil.
// Empty is allowed: the engine decides.
func CheckLanguage(tag string) error {
	if tag != "" && !languagePattern.MatchString(tag) {
		return fmt.Errorf("language %q is not a language code such as en or ru", tag)
	}
	return nil
}

// IsLanguageCode reports whether s is a bare ISO 639 code, two or three
// lower-case letters: what a provider's answer must hold to be reported as
// the detected language.
func IsLanguageCode(s string) bool {
	if len(s) < 2 || len(s) > 3 {
		return false
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}
