package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/transcriber/transcriber/internal/job"
)

// Helpers that every HTTP engine needs in the same way.

// MaxMessageRunes bounds a provider's message quoted in an error.
const MaxMessageRunes = 300

// ReadLimited reads at most limit bytes of a response body and reports
// whether there was more: the limit protects a worker from a misbehaving
// server, whatever the engine.
func ReadLimited(r io.Reader, limit int64) (body []byte, tooLarge bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(body)) > limit {
		return body[:limit], true, err
	}
	return body, false, err
}

// ProviderMessage reads the error text from the shapes providers and their
// gateways use: {"error": {"message": ...}} (OpenAI), {"error": "..."}
// (AssemblyAI, whisper.cpp), {"detail": "..."} (FastAPI servers) and
// {"message": "..."}.
func ProviderMessage(body []byte) string {
	var shape struct {
		Error   json.RawMessage `json:"error"`
		Detail  json.RawMessage `json:"detail"`
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(body, &shape) != nil {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	var s string
	switch {
	case json.Unmarshal(shape.Error, &obj) == nil && obj.Message != "":
		return obj.Message
	case json.Unmarshal(shape.Error, &s) == nil && s != "":
		return s
	case json.Unmarshal(shape.Detail, &s) == nil && s != "":
		return s
	case json.Unmarshal(shape.Message, &s) == nil && s != "":
		return s
	}
	return ""
}

// maxCodeRunes bounds a provider's error code: codes are short names, and
// anything longer is not one.
const maxCodeRunes = 64

// ProviderCode reads the error code from the shapes providers and their
// gateways use: {"error": {"code": "invalid_api_key"}} (OpenAI, whose
// type stands in when the code is null), a google.rpc.Status
// {"code": 16, ...} at the top or under "error" (Yandex Cloud's gateway and
// operations), named as gRPC names its codes, and {"code": "..."}. It is
// scrubbed of secret and bounded; empty when the body names no code.
func ProviderCode(body []byte, secret string) string {
	var shape struct {
		Error json.RawMessage `json:"error"`
		Code  json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &shape) != nil {
		return ""
	}
	var inner struct {
		Code json.RawMessage `json:"code"`
		Type string          `json:"type"`
	}
	code := ""
	if json.Unmarshal(shape.Error, &inner) == nil {
		code = codeOf(inner.Code)
		if code == "" {
			code = inner.Type
		}
	}
	if code == "" {
		code = codeOf(shape.Code)
	}
	return Scrub(code, secret, maxCodeRunes)
}

// codeOf reads a code given as a string or as a google.rpc.Code number.
func codeOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return GRPCCodeName(n)
	}
	return ""
}

// GRPCCodeName names a google.rpc.Code value, as Google's and Yandex
// Cloud's APIs report errors; empty for OK and unknown values.
func GRPCCodeName(code int) string {
	names := [...]string{"", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}
	if code <= 0 || code >= len(names) {
		return ""
	}
	return names[code]
}

// Scrub makes a provider's message safe to log and show: services echo
// the key they refused, and a multi-line or huge message garbles logs. It
// redacts secret, puts the text on one line and cuts it to maxRunes.
func Scrub(msg, secret string, maxRunes int) string {
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "[redacted]")
	}
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if r := []rune(msg); len(r) > maxRunes {
		msg = string(r[:maxRunes]) + "…"
	}
	return msg
}

// ErrorDetail is what to say about a failed answer: the provider's own
// message, scrubbed of secret, or else the status text.
func ErrorDetail(body []byte, status int, secret string) string {
	if d := Scrub(ProviderMessage(body), secret, MaxMessageRunes); d != "" {
		return d
	}
	if t := strings.ToLower(http.StatusText(status)); t != "" {
		return t
	}
	return "unexpected status"
}

// RedirectMessage explains a 3xx: engines do not follow redirects (a second
// request, and a streamed body cannot be sent again), so the operator must
// point the base URL at the final address.
func RedirectMessage(service string, resp *http.Response) string {
	msg := service + " redirected the request; set the base URL to the final address"
	if loc, err := resp.Location(); err == nil {
		msg += " (" + loc.Redacted() + ")"
	}
	return msg
}

// PrimaryLanguage reduces a language tag such as "en-US" or "en_us" to
// its primary subtag, lower-cased.
func PrimaryLanguage(tag string) string {
	tag = strings.ToLower(strings.TrimSpace(tag))
	if i := strings.IndexAny(tag, "-_"); i >= 0 {
		tag = tag[:i]
	}
	return tag
}

// IsLanguageCode reports whether s is a bare ISO 639 code; engines ask it
// of a provider's answer. The check is the job's (job.IsLanguageCode).
func IsLanguageCode(s string) bool { return job.IsLanguageCode(s) }

// ReadAnswer reads a provider's answer to one request, bounded by limit.
// For a 2xx it returns the body with ok set; an answer cut off or too large
// is a classified error, a cancellation the context's error. For any other
// status it returns what could be read with ok unset, for the caller to
// classify by the status: a partial error body still carries it. prefix
// starts context errors ("speechkit: recognition request"); provider and
// what name the service and the request in messages; an empty what is the
// one request of an engine that makes only one.
func ReadAnswer(ctx context.Context, resp *http.Response, limit int64, prefix, provider, what string) (body []byte, ok bool, err error) {
	body, tooLarge, readErr := ReadLimited(resp.Body, limit)
	if readErr != nil && ctx.Err() != nil {
		return nil, false, fmt.Errorf("%s: read response: %w", prefix, ctx.Err())
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return body, false, nil
	}
	answer, response := "its answer", "response"
	if what != "" {
		answer, response = "its answer to the "+what, "response to the "+what
	}
	switch {
	case readErr != nil:
		return nil, false, &Error{Kind: Unreachable, Status: resp.StatusCode,
			Message: "the connection to " + provider + " broke before " + answer + " was complete", Err: readErr}
	case tooLarge:
		return nil, false, &Error{Kind: Unavailable, Status: resp.StatusCode,
			Message: fmt.Sprintf("malformed %s: larger than %d bytes", response, limit)}
	}
	return body, true, nil
}

// ParseHTTPURL parses an absolute http or https URL. It gives no reason:
// url's errors repeat the URL, which may carry credentials, so callers say
// what they expected instead.
func ParseHTTPURL(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}

// maxOperationID is far above the ids providers hand out (UUIDs, Yandex
// Cloud's 20 characters).
const maxOperationID = 128

// SafeOperationID accepts the operation ids providers hand out and refuses
// anything that could change the path of a check request built from it.
func SafeOperationID(id string) bool {
	if id == "" || len(id) > maxOperationID {
		return false
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
