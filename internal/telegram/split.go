package telegram

import (
	"strings"
	"unicode"
	"unicode/utf16"
)

// MessageLimit is the longest text Telegram accepts in one message, in
// UTF-16 code units.
const MessageLimit = 4096

// split cuts text into parts of at most limit UTF-16 code units, at the end
// of a sentence when one is close enough, else at a space, and only inside
// a word when a single word is longer than a part.
func split(text string, limit int) []string {
	text = strings.TrimSpace(text)
	var parts []string
	for text != "" {
		if units(text) <= limit {
			parts = append(parts, text)
			break
		}
		cut := prefixWithin(text, limit)
		head := text[:cut]
		// Prefer a sentence end in the last third of the part, then any
		// whitespace in the last half, so parts stay large.
		if i := lastSentenceEnd(head); i > cut*2/3 {
			cut = i
		} else if i := strings.LastIndexFunc(head, unicode.IsSpace); i > cut/2 {
			cut = i
		}
		parts = append(parts, strings.TrimSpace(text[:cut]))
		text = strings.TrimSpace(text[cut:])
	}
	return parts
}

// units counts UTF-16 code units, Telegram's measure of length.
func units(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// prefixWithin returns the byte length of the longest prefix of s that
// fits in limit UTF-16 code units.
func prefixWithin(s string, limit int) int {
	n := 0
	for i, r := range s {
		n += utf16.RuneLen(r)
		if n > limit {
			return i
		}
	}
	return len(s)
}

// lastSentenceEnd returns the byte index just after the last ".", "!", "?"
// or "…" that is followed by whitespace, or -1.
func lastSentenceEnd(s string) int {
	for i := len(s) - 1; i > 0; i-- {
		if s[i] != ' ' && s[i] != '\n' {
			continue
		}
		prev := strings.TrimRightFunc(s[:i], unicode.IsSpace)
		if prev == "" {
			continue
		}
		if strings.HasSuffix(prev, ".") || strings.HasSuffix(prev, "!") || strings.HasSuffix(prev, "?") || strings.HasSuffix(prev, "…") {
			return len(prev)
		}
	}
	return -1
}
