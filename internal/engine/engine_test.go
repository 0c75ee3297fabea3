package engine

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestClassifyHTTP(t *testing.T) {
	for status, want := range map[int]Kind{
		400: Rejected, 404: Rejected, 413: Rejected, 415: Rejected, 422: Rejected,
		401: Unauthorized, 403: Unauthorized,
		408: Unavailable, 409: Unavailable, 425: Unavailable, 429: Unavailable, 500: Unavailable, 502: Unavailable, 503: Unavailable,
	} {
		if got := ClassifyHTTP(status); got != want {
			t.Errorf("ClassifyHTTP(%d) = %s; want %s", status, got, want)
		}
	}
}

// Engines report kinds of the job's vocabulary: a kind of theirs that the
// job did not declare would be retried whatever it meant.
func TestKinds(t *testing.T) {
	verdicts := map[Kind]bool{Rejected: true, Unauthorized: true, OperationFailed: true}
	for _, k := range []Kind{Rejected, Unauthorized, OperationFailed, Unavailable, Unreachable} {
		if !k.Declared() {
			t.Errorf("engine kind %s is not declared in internal/job", k)
		}
		if got := k.Verdict(); got != verdicts[k] {
			t.Errorf("%s.Verdict() = %v; want %v", k, got, verdicts[k])
		}
		if k.BlamesInput() {
			t.Errorf("%s blames the input; an engine cannot tell whether the recording or the request is at fault", k)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"7": 7 * time.Second, " 120 ": 2 * time.Minute, "-3": 0, "": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := ParseRetryAfter(in, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v; want %v", in, got, want)
		}
	}
}

func TestProviderMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`: "Incorrect API key provided",
		`{"error":"Authentication error, API token missing/invalid"}`:                       "Authentication error, API token missing/invalid",
		`{"detail":"Model not found"}`:                                                      "Model not found",
		`{"message":"Too many requests"}`:                                                   "Too many requests",
		`<html>Bad Gateway</html>`:                                                          "",
		`{"error":{}}`:                                                                      "",
	} {
		if got := ProviderMessage([]byte(body)); got != want {
			t.Errorf("ProviderMessage(%s) = %q; want %q", body, got, want)
		}
	}
}

func TestScrub(t *testing.T) {
	got := Scrub("bad key sk-123\nsecond line\tand\x00more", "sk-123", 300)
	if got != "bad key [redacted] second line and more" {
		t.Errorf("Scrub = %q", got)
	}
	if got := Scrub(strings.Repeat("я", 400), "", 300); len([]rune(got)) != 301 || !strings.HasSuffix(got, "…") {
		t.Errorf("Scrub of a long message has %d runes", len([]rune(got)))
	}
}

func TestLanguageCodes(t *testing.T) {
	for in, want := range map[string]string{"en-US": "en", "en_us": "en", " RU ": "ru", "haw": "haw", "": ""} {
		if got := PrimaryLanguage(in); got != want {
			t.Errorf("PrimaryLanguage(%q) = %q; want %q", in, got, want)
		}
	}
	for in, want := range map[string]bool{"en": true, "haw": true, "e": false, "english": false, "e1": false} {
		if got := IsLanguageCode(in); got != want {
			t.Errorf("IsLanguageCode(%q) = %v; want %v", in, got, want)
		}
	}
}
