package speechkit

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// getRecognition answers a server stream through the REST gateway: one
// JSON object per message, {"result": StreamingResponse}, or {"error":
// Status} when the stream broke. Each utterance comes as a "final" (raw
// text, numbered by audioCursors.finalIndex) and, with normalisation on, a
// "finalRefinement" for the same index with the text as people write it.

type streamMessage struct {
	Result json.RawMessage `json:"result"`
	Error  *streamError    `json:"error"`
}

// streamError is a google.rpc.Status, or the older gateway's shape with
// grpc_code and http_code.
type streamError struct {
	Code     int    `json:"code"`
	GRPCCode int    `json:"grpc_code"`
	Message  string `json:"message"`
}

type streamingResponse struct {
	AudioCursors *struct {
		FinalIndex *int64s `json:"finalIndex"`
	} `json:"audioCursors"`
	Final           *alternativeUpdate `json:"final"`
	FinalRefinement *struct {
		FinalIndex     int64s             `json:"finalIndex"`
		NormalizedText *alternativeUpdate `json:"normalizedText"`
	} `json:"finalRefinement"`
	ChannelTag string `json:"channelTag"`
}

type alternativeUpdate struct {
	Alternatives []alternative `json:"alternatives"`
	ChannelTag   string        `json:"channelTag"`
}

type alternative struct {
	Words       []word               `json:"words"`
	Text        string               `json:"text"`
	StartTimeMs int64s               `json:"startTimeMs"`
	EndTimeMs   int64s               `json:"endTimeMs"`
	Languages   []languageEstimation `json:"languages"`
}

type word struct {
	Text        string `json:"text"`
	StartTimeMs int64s `json:"startTimeMs"`
	EndTimeMs   int64s `json:"endTimeMs"`
}

type languageEstimation struct {
	LanguageCode string `json:"languageCode"`
	Probability  number `json:"probability"`
}

// int64s reads a proto3 int64, which JSON carries as a string ("459") but
// some writers as a number.
type int64s int64

func (n *int64s) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %.20q", s)
	}
	*n = int64s(v)
	return nil
}

// number reads a float that may come as a string.
type number float64

func (n *number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("not a number: %.20q", s)
	}
	*n = number(v)
	return nil
}

// utterance collects what the stream says about one final.
type utterance struct {
	order   int
	final   *alternative
	refined *alternative
}

// best is the text people read: the normalised one when the service sent it.
func (u *utterance) best() *alternative {
	if u.refined != nil && strings.TrimSpace(u.refined.Text) != "" {
		return u.refined
	}
	return u.final
}

// parseResults reads the whole stream. An empty stream is a recognition of
// silence; whether that is a failure is the caller's verdict.
func parseResults(body []byte, secret string) (*engine.Result, *engine.Error) {
	msgs, err := splitStream(body)
	if err != nil {
		return nil, &engine.Error{Kind: engine.Unavailable, Message: "malformed response to the results request: not a stream of JSON objects", Err: err}
	}
	var (
		byKey = map[string]*utterance{}
		list  []*utterance
	)
	get := func(key string) *utterance {
		u, ok := byKey[key]
		if !ok {
			u = &utterance{order: len(list)}
			byKey[key] = u
			list = append(list, u)
		}
		return u
	}
	for i, raw := range msgs {
		var m streamMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, &engine.Error{Kind: engine.Unavailable, Message: fmt.Sprintf("malformed response to the results request: message %d is not an object", i+1), Err: err}
		}
		if m.Error != nil {
			err := streamFailure(m.Error, secret)
			err.Code = engine.GRPCCodeName(cmp.Or(m.Error.Code, m.Error.GRPCCode))
			return nil, err
		}
		payload := m.Result
		if len(payload) == 0 {
			// A stream written without the gateway's envelope.
			payload = raw
		}
		var r streamingResponse
		if err := json.Unmarshal(payload, &r); err != nil {
			return nil, &engine.Error{Kind: engine.Unavailable, Message: fmt.Sprintf("malformed response to the results request: message %d", i+1), Err: err}
		}
		switch {
		case r.Final != nil:
			alt := first(r.Final.Alternatives)
			if alt == nil {
				continue
			}
			key := fmt.Sprintf("message-%d", i)
			if r.AudioCursors != nil && r.AudioCursors.FinalIndex != nil {
				key = channel(r.Final.ChannelTag, r.ChannelTag) + "/" + strconv.FormatInt(int64(*r.AudioCursors.FinalIndex), 10)
			}
			get(key).final = alt
		case r.FinalRefinement != nil && r.FinalRefinement.NormalizedText != nil:
			alt := first(r.FinalRefinement.NormalizedText.Alternatives)
			if alt == nil {
				continue
			}
			key := channel(r.FinalRefinement.NormalizedText.ChannelTag, r.ChannelTag) + "/" + strconv.FormatInt(int64(r.FinalRefinement.FinalIndex), 10)
			get(key).refined = alt
		}
		// Partials, end-of-utterance updates, status codes and analyses
		// carry nothing the transcript needs.
	}
	return assemble(list), nil
}

// splitStream cuts the body into its JSON values: objects one after the
// other (newline-separated or not), or a single array of them.
func splitStream(body []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var out []json.RawMessage
	for {
		var v json.RawMessage
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := bytes.TrimSpace(v); {
		case len(t) > 0 && t[0] == '[':
			var items []json.RawMessage
			if err := json.Unmarshal(t, &items); err != nil {
				return nil, err
			}
			out = append(out, items...)
		case len(t) > 0 && t[0] == '{':
			out = append(out, v)
		default:
			return nil, fmt.Errorf("a value that is not an object: %.20s", t)
		}
	}
}

func first(alts []alternative) *alternative {
	if len(alts) == 0 {
		return nil
	}
	return &alts[0]
}

func channel(tags ...string) string {
	for _, t := range tags {
		if t != "" {
			return t
		}
	}
	return "0"
}

// streamFailure classifies an error the service wrote into the stream.
func streamFailure(se *streamError, secret string) *engine.Error {
	code := se.Code
	if code == 0 {
		code = se.GRPCCode
	}
	msg := engine.Scrub(se.Message, secret, engine.MaxMessageRunes)
	if msg == "" {
		msg = strings.ToLower(strings.ReplaceAll(engine.GRPCCodeName(code), "_", " "))
	}
	if msg == "" {
		msg = "unknown error"
	}
	switch code {
	case 16, 7: // UNAUTHENTICATED, PERMISSION_DENIED
		return &engine.Error{Kind: engine.Unauthorized, Message: "SpeechKit refused the credentials for the results request: " + msg}
	case 5: // NOT_FOUND
		return &engine.Error{Kind: engine.Rejected, Message: "SpeechKit has no results for the operation (it keeps them for 3 days): " + msg}
	case 3, 9, 11, 12: // INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED
		return &engine.Error{Kind: engine.Rejected, Message: "SpeechKit rejected the results request: " + msg}
	}
	return &engine.Error{Kind: engine.Unavailable, Message: "SpeechKit broke off the results: " + msg}
}

// assemble builds the finished recognition: one segment per utterance, the
// text of all of them, and the language most of the words were in.
func assemble(list []*utterance) *engine.Result {
	type timed struct {
		seg   engine.Segment
		words []engine.Word
		order int
	}
	var (
		segs   []timed
		weight = map[string]float64{}
		seen   []string
	)
	for _, u := range list {
		alt := u.best()
		if alt == nil {
			continue
		}
		text := strings.Join(strings.Fields(alt.Text), " ")
		if text == "" {
			continue
		}
		start, end := span(alt)
		if len(alt.Words) == 0 && u.final != nil && alt != u.final {
			// Normalised text without timings borrows the raw one's.
			start, end = span(u.final)
		}
		// Normalised text may come without words ("twenty" as "20"): its
		// raw final's words are what was heard and when.
		timedWords := alt.Words
		if len(timedWords) == 0 && u.final != nil {
			timedWords = u.final.Words
		}
		var words []engine.Word
		for _, w := range timedWords {
			if wt := strings.Join(strings.Fields(w.Text), " "); wt != "" {
				ws, we := millis(int64(w.StartTimeMs)), millis(int64(w.EndTimeMs))
				words = append(words, engine.Word{Start: ws, End: max(we, ws), Text: wt})
			}
		}
		segs = append(segs, timed{engine.Segment{Start: start, End: end, Text: text}, words, u.order})
		if lang := language(alt, u.final); lang != "" {
			if _, ok := weight[lang]; !ok {
				seen = append(seen, lang)
			}
			weight[lang] += float64(max(len(strings.Fields(text)), 1))
		}
	}
	// Finals arrive in order within a channel; a second channel's are
	// interleaved by time.
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].seg.Start < segs[j].seg.Start })
	res := &engine.Result{}
	texts := make([]string, 0, len(segs))
	for _, s := range segs {
		res.Segments = append(res.Segments, s.seg)
		res.Words = append(res.Words, s.words...)
		texts = append(texts, s.seg.Text)
	}
	res.Text = strings.Join(texts, " ")
	for _, lang := range seen {
		if res.Language == "" || weight[lang] > weight[res.Language] {
			res.Language = lang
		}
	}
	return res
}

// span is where an utterance lies: from its first word to its last when
// the words are timed (the alternative's own start is often 0), else the
// alternative's bounds.
func span(alt *alternative) (time.Duration, time.Duration) {
	start, end := millis(int64(alt.StartTimeMs)), millis(int64(alt.EndTimeMs))
	if n := len(alt.Words); n > 0 {
		start, end = millis(int64(alt.Words[0].StartTimeMs)), millis(int64(alt.Words[n-1].EndTimeMs))
	}
	return start, max(end, start)
}

// language is the most probable language of an utterance, as a two- or
// three-letter code.
func language(alts ...*alternative) string {
	for _, alt := range alts {
		if alt == nil {
			continue
		}
		var (
			best string
			p    = -1.0
		)
		for _, l := range alt.Languages {
			code := engine.PrimaryLanguage(l.LanguageCode)
			if engine.IsLanguageCode(code) && float64(l.Probability) > p {
				best, p = code, float64(l.Probability)
			}
		}
		if best != "" {
			return best
		}
	}
	return ""
}

// maxMillis keeps the conversion to a Duration from overflowing.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

func millis(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms >= maxMillis:
		return time.Duration(maxMillis) * time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}
