package engine

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
)

// CallbackReceiver checks the calls an engine's provider makes to
// /v1/callbacks/{engine} when an operation finishes. A call only says
// "look now": the job still checks the operation itself, so a repeated,
// stale or forged call cannot change a result.
type CallbackReceiver interface {
	// ReadCallback authenticates a call and reads which job's operation
	// it is about. An error wrapping ErrCallbackToken means the caller did
	// not prove it knows the job's token, and is answered 401, which ends
	// providers' retries; any other error is a malformed call, answered 400
	// with the error's text.
	ReadCallback(r *http.Request) (Callback, error)
}

// Callback is what a provider's call says.
type Callback struct {
	JobID       string
	OperationID string
	// Status is the provider's word for the operation's state, kept for
	// the job's log.
	Status string
}

// ErrCallbackToken is a call whose token does not match its job.
var ErrCallbackToken = errors.New("the callback token does not match the job")

// CallbackHeader carries the token of an engine's callback to this
// service, for providers that let the caller choose a header.
const CallbackHeader = "X-Transcriber-Callback-Token"

// CallbackToken authenticates an engine's callback about one job: an HMAC
// of the job id under the operator's secret, so a token that leaks with one
// callback URL is worth nothing for any other job.
func CallbackToken(secret, jobID string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(jobID))
	return hex.EncodeToString(m.Sum(nil))
}

// ValidCallbackToken reports whether token is the one secret gives jobID,
// in time that does not depend on where they differ.
func ValidCallbackToken(secret, jobID, token string) bool {
	return hmac.Equal([]byte(token), []byte(CallbackToken(secret, jobID)))
}
