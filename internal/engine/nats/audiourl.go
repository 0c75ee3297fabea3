package nats

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/transcriber/transcriber/internal/engine"
)

// AudioPath is the route of transcriber's HTTP server that serves a job's
// audio to the service that holds a signed URL for it.
const AudioPath = "/v1/recognition/audio"

// Signer makes URLs that open one object of the blob store until they
// expire, with no other credential: a leaked URL is worth one recording
// for as long as its job waits.
type Signer struct {
	base   *url.URL
	secret []byte
}

// NewSigner signs URLs under base, the HTTP server as services reach it.
func NewSigner(base, secret string) (*Signer, error) {
	u, ok := engine.ParseHTTPURL(base)
	if !ok || u.User != nil {
		return nil, errors.New("the audio URL base must be an http(s) URL without credentials, such as http://transcriber.example:8080")
	}
	if len(secret) < 16 {
		return nil, errors.New("the audio URL secret must have at least 16 characters")
	}
	return &Signer{base: u, secret: []byte(secret)}, nil
}

// Sign gives the URL of key until expires.
func (s *Signer) Sign(key string, expires time.Time) string {
	u := s.base.JoinPath(AudioPath)
	q := url.Values{}
	exp := strconv.FormatInt(expires.Unix(), 10)
	q.Set("key", key)
	q.Set("expires", exp)
	q.Set("sig", s.mac(key, exp))
	u.RawQuery = q.Encode()
	return u.String()
}

func (s *Signer) mac(key, expires string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(key))
	m.Write([]byte{0})
	m.Write([]byte(expires))
	return hex.EncodeToString(m.Sum(nil))
}

// verify reports the key a request may read, or why it may not.
func (s *Signer) verify(q url.Values, now time.Time) (string, error) {
	key, exp, sig := q.Get("key"), q.Get("expires"), q.Get("sig")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if key == "" || err != nil || !hmac.Equal([]byte(sig), []byte(s.mac(key, exp))) {
		return "", errors.New("the URL's signature does not match")
	}
	if now.After(time.Unix(unix, 0)) {
		return "", errors.New("the URL has expired")
	}
	return key, nil
}

// Objects reads the blob store for the audio route.
type Objects interface {
	Opener
	Size(ctx context.Context, key string) (int64, error)
}

// AudioHandler serves the objects that URLs of secret name. A refusal says
// nothing of the object: the caller proved no right to know.
func AudioHandler(secret string, objects Objects, logger *slog.Logger) http.Handler {
	s := &Signer{secret: []byte(secret)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		key, err := s.verify(r.URL.Query(), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		size, err := objects.Size(r.Context(), key)
		if err != nil {
			logger.Warn("recognition audio not served", "key", key, "error", err)
			http.Error(w, "the audio is gone", http.StatusNotFound)
			return
		}
		ct := mime.TypeByExtension(path.Ext(key))
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.Header().Set("Cache-Control", "private, no-store")
		if r.Method == http.MethodHead {
			return
		}
		rc, err := objects.Open(r.Context(), key)
		if err != nil {
			logger.Warn("recognition audio not served", "key", key, "error", err)
			http.Error(w, "the audio is gone", http.StatusNotFound)
			return
		}
		defer rc.Close()
		if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
			logger.Warn("recognition audio cut short", "key", key, "error", err)
		}
	})
}
