// Package nats hands recognition to services anywhere a NATS JetStream
// reaches. Submit publishes a job message that names a signed URL of the
// audio; a service publishes a result envelope; the inbox, a durable
// consumer inside every worker with the engine, checks each envelope,
// keeps the first result of each submission and wakes the job, whose
// check reads it. The wire format is in the schemas package and the
// README; Service is the reference recognition service.
package nats

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Name is how jobs and configuration refer to this engine.
const Name = "nats"

// SchemaVersion is the version of both message schemas.
const SchemaVersion = 1

// Subjects and streams of the exchange. Changing one strands the messages
// and the services of running deployments: add, never rename.
const (
	// JobsSubjectPrefix precedes the service queue's name.
	JobsSubjectPrefix = "transcriber.recognition.jobs."
	// ResultsSubject is where every service publishes its results.
	ResultsSubject = "transcriber.recognition.results"
	JobsStream     = "TRANSCRIBER_RECOGNITION_JOBS"
	ResultsStream  = "TRANSCRIBER_RECOGNITION_RESULTS"
	// InboxConsumer is the durable consumer every worker's inbox shares, so
	// that each result is handled by one of them.
	InboxConsumer = "transcriber-inbox"
	// ResultsBucket keeps the first result of each submission, for the
	// job's check to read.
	ResultsBucket = "transcriber_recognition_results"
	// DefaultService is the queue used when none is configured.
	DefaultService = "default"
)

// DuplicateWindow is how long the broker remembers a message id. It must
// outlast the longest retry of a publish: the pipeline's back-off waits up
// to 30 minutes between attempts of a step, and a service may retry for as
// long.
const DuplicateWindow = 2 * time.Hour

// JobsSubject is the subject of a service queue's jobs.
func JobsSubject(service string) string { return JobsSubjectPrefix + service }

// JobMsgID is the message id of the n-th submission of a job.
func JobMsgID(jobID string, n int) string { return "job:" + jobID + ":" + strconv.Itoa(n) }

// ResultMsgID is the message id of the result of the n-th submission.
func ResultMsgID(jobID string, n int) string { return "result:" + jobID + ":" + strconv.Itoa(n) }

// processingSuffix marks a processing report's id, so that the report and
// the result of one submission never shadow each other in the broker's
// duplicate window.
const processingSuffix = ":processing"

// OperationID names the n-th submission of a job to the pipeline.
func OperationID(jobID string, n int) string { return jobID + ":" + strconv.Itoa(n) }

// ParseOperationID splits an operation id into its job and submission.
func ParseOperationID(op string) (jobID string, n int, err error) {
	i := strings.LastIndexByte(op, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("operation id %q is not <job_id>:<n>", op)
	}
	n, err = strconv.Atoi(op[i+1:])
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("operation id %q is not <job_id>:<n>", op)
	}
	return op[:i], n, nil
}

// JobMessage is the body of a job message.
type JobMessage struct {
	SchemaVersion   int       `json:"schema_version"`
	JobID           string    `json:"job_id"`
	Submission      int       `json:"submission"`
	Service         string    `json:"service,omitempty"`
	Language        string    `json:"language,omitempty"`
	DurationSeconds float64   `json:"duration_seconds,omitempty"`
	ReplyDeadline   time.Time `json:"reply_deadline"`
	ReplySubject    string    `json:"reply_subject"`
	Audio           Audio     `json:"audio"`
}

// Audio says where a service fetches a job's audio.
type Audio struct {
	URL       string    `json:"url"`
	MIMEType  string    `json:"mime_type"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Result statuses.
const (
	StatusProcessing = "processing"
	StatusDone       = "done"
	StatusNeedsCheck = "needs_check"
	StatusError      = "error"
)

// ResultMessage is the body of a result message.
type ResultMessage struct {
	SchemaVersion int                `json:"schema_version"`
	JobID         string             `json:"job_id"`
	Submission    int                `json:"submission"`
	Status        string             `json:"status"`
	Text          *string            `json:"text,omitempty"`
	Language      string             `json:"language,omitempty"`
	Segments      []Segment          `json:"segments,omitempty"`
	ResultS3      *ObjectRef         `json:"result_s3,omitempty"`
	RawS3Key      string             `json:"raw_s3_key,omitempty"`
	Error         *ErrorInfo         `json:"error,omitempty"`
	Service       ServiceInfo        `json:"service,omitzero"`
	Metrics       map[string]float64 `json:"metrics,omitempty"`
}

// Segment is a timed stretch of the transcript, in seconds.
type Segment struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Text  string  `json:"text"`
}

// ObjectRef is an object of the shared store.
type ObjectRef struct {
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key"`
}

// ErrorInfo is why a service gave up on a job.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ServiceInfo names the service that answered.
type ServiceInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Final reports whether the envelope settles its submission.
func (r ResultMessage) Final() bool { return r.Status != StatusProcessing }

// Bounds of an envelope's fields, as the result schema declares them.
const (
	maxJobID   = 1000
	maxCode    = 200
	maxMessage = 2000
	maxName    = 200
)

// ReadResult decodes a result envelope and checks it against the result
// schema and its message id: an envelope that fails is refused whole, so
// that nothing of it reaches a job.
func ReadResult(msgID string, body []byte) (ResultMessage, error) {
	var r ResultMessage
	if err := json.Unmarshal(body, &r); err != nil {
		return ResultMessage{}, fmt.Errorf("not a JSON result envelope: %w", err)
	}
	if r.Submission == 0 {
		// The id names the submission already; a body may leave it out.
		r.Submission = submissionOf(msgID, r.JobID)
	}
	if err := r.validate(); err != nil {
		return ResultMessage{}, err
	}
	want := ResultMsgID(r.JobID, r.Submission)
	if !r.Final() {
		want += processingSuffix
	}
	if msgID != want {
		return ResultMessage{}, fmt.Errorf("Nats-Msg-Id %q does not match the envelope; want %q", msgID, want)
	}
	return r, nil
}

// submissionOf reads n from a result's id for job, or 0.
func submissionOf(msgID, jobID string) int {
	rest, ok := strings.CutPrefix(msgID, "result:"+jobID+":")
	if !ok {
		return 0
	}
	rest = strings.TrimSuffix(rest, processingSuffix)
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

func (r ResultMessage) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.SchemaVersion != SchemaVersion {
		bad("schema_version %d is not %d", r.SchemaVersion, SchemaVersion)
	}
	if r.JobID == "" || len(r.JobID) > maxJobID {
		bad("job_id must have 1 to %d bytes", maxJobID)
	}
	if r.Submission < 1 {
		bad("submission must be at least 1")
	}
	if len(r.Service.Name) > maxName || len(r.Service.Version) > maxName {
		bad("service.name and service.version must have at most %d bytes", maxName)
	}
	switch r.Status {
	case StatusProcessing:
	case StatusDone, StatusNeedsCheck:
		if r.Text == nil && r.ResultS3 == nil {
			bad("status %s needs text or result_s3", r.Status)
		}
	case StatusError:
		if r.Error == nil {
			bad("status error needs error")
		}
	default:
		bad("status %q is not one of processing, done, needs_check, error", r.Status)
	}
	if r.ResultS3 != nil && r.ResultS3.Key == "" {
		bad("result_s3.key must not be empty")
	}
	if r.Error != nil && (r.Error.Code == "" || len(r.Error.Code) > maxCode || len(r.Error.Message) > maxMessage) {
		bad("error.code must have 1 to %d bytes and error.message at most %d", maxCode, maxMessage)
	}
	for i, s := range r.Segments {
		if s.Start < 0 || s.End < 0 {
			bad("segments[%d] has a negative time", i)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid result envelope: %w", errors.Join(errs...))
	}
	return nil
}
