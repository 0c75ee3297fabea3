package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// EngineTaskQueue is where the steps that call an engine wait: a worker
// serves it only when it has the engine, and takes no more of its steps at
// once than the engine's concurrency, so the limit holds however many jobs
// run.
func EngineTaskQueue(engine string) string { return TaskQueue + "-engine-" + engine }

// Names that workers, intakes, operators and the Temporal Web UI share.
// Changing one breaks running jobs and operators' habits: add, never rename.
const (
	// TaskQueue is where jobs and their activities wait for a worker.
	TaskQueue = "transcriber"
	// WorkflowName is the workflow type of one job.
	WorkflowName = "TranscribeRecording"

	// SignalRevive resumes a failed or dead job from the step that stopped it,
	// with fresh attempts.
	SignalRevive = "revive"
	// UpdateRevive is revive for a caller that waits for the answer: it
	// returns the Status the job had when it was revived, or is refused
	// with an application error of type ErrTypeNotRevivable (its detail the
	// job's state) when the job is not failed or dead.
	UpdateRevive = "revive"
	// ErrTypeNotRevivable is the error type of a refused UpdateRevive.
	ErrTypeNotRevivable = "not_revivable"
	// QueryStatus returns the job's Status.
	QueryStatus = "status"
	// UpdateSetLanguage changes the job's language; validated, returns Status.
	UpdateSetLanguage = "set_language"
	// UpdateAnnotate sets the owner's title and note; returns Status.
	UpdateAnnotate = "annotate"
	// SignalEngineCallback tells the job that an engine called back about
	// one of its operations (EngineCallback), so it checks it at once.
	SignalEngineCallback = "engine_callback"
)

// Search attributes, upserted on every state change so that operators find
// jobs in the Web UI, e.g. TranscriptionState="dead".
var (
	StateKey  = temporal.NewSearchAttributeKeyKeyword("TranscriptionState")
	SourceKey = temporal.NewSearchAttributeKeyKeyword("TranscriptionSource")
	EngineKey = temporal.NewSearchAttributeKeyKeyword("TranscriptionEngine")
	// ReviewKey is ReviewNeedsCheck on a done job whose recognition service
	// asked for a person to check the transcript, and unset otherwise.
	ReviewKey = temporal.NewSearchAttributeKeyKeyword("TranscriptionReview")
	// OwnerKey is the job's owner (Input.Owner), set once when the job
	// starts, not upserted: the workflow's commands stay those of the
	// histories already recorded. Jobs without an owner lack it.
	OwnerKey = temporal.NewSearchAttributeKeyKeyword("TranscriptionOwner")
)

// ReviewNeedsCheck is the value of ReviewKey on a job to review.
const ReviewNeedsCheck = "needs_check"

// SearchAttributes lists the custom search attributes a namespace needs.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		StateKey.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SourceKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		EngineKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		ReviewKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		OwnerKey.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// TelegramJobID is the job of one Telegram message: a redelivered update
// finds the job it already started.
func TelegramJobID(chatID int64, messageID int) string {
	return "tg-" + strconv.FormatInt(chatID, 10) + "-" + strconv.Itoa(messageID)
}

// HTTPJobID is the job of one idempotency key of one account of the API.
// The key is the client's own name and may be any, so the id is a digest
// of owner and key: two accounts that choose the same key get two jobs, and
// the id tells neither the key nor the owner to whoever sees it.
func HTTPJobID(owner, key string) string {
	h := sha256.New()
	h.Write([]byte(owner))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return "http-" + hex.EncodeToString(h.Sum(nil)[:12])
}

// HTTPContentJobID names an HTTP job sent without an idempotency key by
// what determines its result and who sent it, as CLIJobID does: the same
// account sending the same recording again finds its job; another account
// gets its own.
// Extras are whatever else changes the result (Recognition.Key).
func HTTPContentJobID(owner string, contentSHA256 []byte, engine, language string, extras ...string) string {
	return "http-" + resultDigest(contentSHA256, engine, language, append([]string{"owner=" + owner}, extras...)...)
}

// CLIJobID names a command-line job by what determines its result: the
// recording's bytes, the engine and the language. Submitting the same file
// again while it runs attaches to the running job instead of doubling work.
func CLIJobID(contentSHA256 []byte, engine, language string, extras ...string) string {
	return "cli-" + resultDigest(contentSHA256, engine, language, extras...)
}

func resultDigest(contentSHA256 []byte, engine, language string, extras ...string) string {
	h := sha256.New()
	h.Write(contentSHA256)
	h.Write([]byte{0})
	h.Write([]byte(engine))
	h.Write([]byte{0})
	h.Write([]byte(language))
	for _, e := range extras {
		if e != "" {
			h.Write([]byte{0})
			h.Write([]byte(e))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
