// Package schemas holds the JSON schemas of the messages transcriber
// exchanges with recognition services, so that the code that checks the
// messages and its tests read the very files services are written from.
package schemas

import _ "embed"

// RecognitionJob describes the body of a job message.
//
//go:embed recognition-job-message.schema.json
var RecognitionJob []byte

// RecognitionResult describes the body of a result message.
//
//go:embed recognition-result-message.schema.json
var RecognitionResult []byte
