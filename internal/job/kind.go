package job

// Kind classifies a failure. Kinds are the types of the Temporal application
// errors that activities return, the label of transcriber_failures_total,
// and the code users see. Each is declared once in kinds with what it means
// for the job; the retry policy and the HTTP API read that declaration
// instead of keeping lists of their own.
type Kind string

const (
	// The recording itself is at fault.
	EmptyAudio        Kind = "empty_audio"
	UnsupportedFormat Kind = "unsupported_format"
	TooLong           Kind = "too_long"
	NoSpeech          Kind = "no_speech"
	// The engine said no.
	EngineRejected      Kind = "engine_rejected"
	EngineUnauthorized  Kind = "engine_unauthorized"
	OperationFailed     Kind = "operation_failed"
	EngineNotConfigured Kind = "engine_not_configured"
	// UnsupportedLanguage: the job's engine does not recognise its
	// language; another engine, by route or by choice, may.
	UnsupportedLanguage Kind = "unsupported_language"
	// The intake's service (Telegram) said no.
	FileTooBig        Kind = "file_too_big"
	SourceFileMissing Kind = "source_file_missing"
	ServiceRefused    Kind = "service_refused"
	// Temporary trouble.
	ServiceError Kind = "service_error"
	NoAck        Kind = "no_ack"
	Timeout      Kind = "timeout"
	Internal     Kind = "internal"
	// IntakeNotRunning: the job needs its intake's service (Telegram) and
	// this worker is not connected to it; another worker may be.
	IntakeNotRunning Kind = "intake_not_running"
)

// kindTraits is what a kind means to the pipeline.
type kindTraits struct {
	// verdict: retrying cannot help; the step is not retried and the job
	// fails. Otherwise the step is retried with back-off until its attempts
	// run out and the job is dead.
	verdict bool
	// blamesInput: the recording is at fault, not the service; the sender
	// has to send another one. Only verdicts blame the input.
	blamesInput bool
}

// kinds declares every Kind. A kind missing here is retried as temporary
// trouble and blamed on the service, so a test checks that every Kind
// constant has its row.
var kinds = []struct {
	kind Kind
	kindTraits
}{
	{EmptyAudio, kindTraits{verdict: true, blamesInput: true}},
	{UnsupportedFormat, kindTraits{verdict: true, blamesInput: true}},
	{TooLong, kindTraits{verdict: true, blamesInput: true}},
	{NoSpeech, kindTraits{verdict: true, blamesInput: true}},
	// A rejection by the engine may be the recording's fault or the
	// request's (a model, a setting); the engine does not say which, so the
	// sender is not blamed.
	{EngineRejected, kindTraits{verdict: true}},
	{EngineUnauthorized, kindTraits{verdict: true}},
	{OperationFailed, kindTraits{verdict: true}},
	{EngineNotConfigured, kindTraits{verdict: true}},
	// The configuration is at fault, not the recording: the owner adds an
	// engine for the language, or the sender names another language.
	{UnsupportedLanguage, kindTraits{verdict: true}},
	{FileTooBig, kindTraits{verdict: true}},
	{SourceFileMissing, kindTraits{verdict: true}},
	{ServiceRefused, kindTraits{verdict: true}},
	{ServiceError, kindTraits{}},
	{NoAck, kindTraits{}},
	// Time that ran out makes the job dead, never failed: the step may
	// well finish on a quieter machine.
	{Timeout, kindTraits{}},
	{Internal, kindTraits{}},
	{IntakeNotRunning, kindTraits{}},
}

// Kinds lists every declared kind.
func Kinds() []Kind {
	out := make([]Kind, len(kinds))
	for i, d := range kinds {
		out[i] = d.kind
	}
	return out
}

// Verdicts lists the kinds that are definitive verdicts.
func Verdicts() []Kind {
	var out []Kind
	for _, d := range kinds {
		if d.verdict {
			out = append(out, d.kind)
		}
	}
	return out
}

func (k Kind) traits() (kindTraits, bool) {
	for _, d := range kinds {
		if d.kind == k {
			return d.kindTraits, true
		}
	}
	return kindTraits{}, false
}

// Declared reports whether k is one of Kinds.
func (k Kind) Declared() bool {
	_, ok := k.traits()
	return ok
}

// Verdict reports whether a failure of this kind is definitive: the step is
// never retried and the job fails.
func (k Kind) Verdict() bool {
	t, _ := k.traits()
	return t.verdict
}

// BlamesInput reports whether the recording itself is at fault, so that an
// API answers the sender's request as bad rather than the service as broken.
func (k Kind) BlamesInput() bool {
	t, _ := k.traits()
	return t.blamesInput
}

// WebhookError is the type of an error of the webhook step that ends its
// retries. A webhook never decides a job's outcome, so these are no Kinds;
// the step's temporary trouble is a ServiceError.
type WebhookError string

const (
	// WebhookRefused: the receiver answered for good (a 4xx other than 408
	// and 429), or the URL cannot be asked at all.
	WebhookRefused WebhookError = "webhook_refused"
	// WebhookNotConfigured: this worker has no secret to sign with.
	WebhookNotConfigured WebhookError = "webhook_not_configured"
)

// WebhookErrors lists every WebhookError.
func WebhookErrors() []WebhookError { return []WebhookError{WebhookRefused, WebhookNotConfigured} }

// Undelivered is why a reply could not be delivered to the sender: the
// label of transcriber_replies_undelivered_total.
type Undelivered string

const (
	UndeliveredIntakeNotRunning Undelivered = "intake_not_running"
	// UndeliveredRecipientMissing: a job that expects a reply has no chat,
	// which only a damaged record can have.
	UndeliveredRecipientMissing Undelivered = "recipient_missing"
	// UndeliveredRecipientRefused: the sender's service refused the reply
	// for good: the bot was blocked, the chat is gone.
	UndeliveredRecipientRefused Undelivered = "recipient_refused"
)

// UndeliveredReasons lists every Undelivered reason, so that the metric
// can start each at zero.
func UndeliveredReasons() []Undelivered {
	return []Undelivered{UndeliveredIntakeNotRunning, UndeliveredRecipientMissing, UndeliveredRecipientRefused}
}
