package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// seen is what the server got of one upload.
type seen struct {
	contentLength int64
	chunked       bool
	body          []byte
}

func uploadServer(t *testing.T, status int, answer string) (*httptest.Server, func() seen) {
	t.Helper()
	var (
		mu   sync.Mutex
		last seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = seen{contentLength: r.ContentLength, chunked: slices.Contains(r.TransferEncoding, "chunked"), body: body}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv, func() seen { mu.Lock(); defer mu.Unlock(); return last }
}

func audioFile(t *testing.T, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	path := filepath.Join(t.TempDir(), "audio.flac")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

func send(t *testing.T, c *Client, url string, up *Upload) error {
	t.Helper()
	defer func() { _ = up.Close() }() // Do reports a failure to read the audio
	req, err := c.UploadRequest(context.Background(), http.MethodPost, url, up)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Do(context.Background(), req, "upload", up)
	return err
}

// Scenario: Uploads announce their length
func TestUploadsAnnounceTheirLength(t *testing.T) {
	const size = 3<<20 + 17
	path, data := audioFile(t, size)
	form, err := Form([][2]string{{"model", "whisper-1"}}, "file", "audio.flac", "audio/flac")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		prefix, suffix []byte
		enc            Encoding
		want           []byte
	}{
		{"raw", nil, nil, Raw, data},
		{"in a form", form.Head, form.Tail, Raw, slices.Concat(form.Head, data, form.Tail)},
		{"base64 in JSON", []byte(`{"content":"`), []byte(`"}`), Base64,
			slices.Concat([]byte(`{"content":"`), []byte(base64.StdEncoding.EncodeToString(data)), []byte(`"}`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := uploadServer(t, http.StatusOK, `{}`)
			up, err := OpenUpload(path, tc.prefix, tc.suffix, tc.enc)
			if err != nil {
				t.Fatal(err)
			}
			if up.Size() != size {
				t.Errorf("Size = %d; want %d", up.Size(), size)
			}
			if err := send(t, NewClient(nil, "the stand-in", "test"), srv.URL, up); err != nil {
				t.Fatal(err)
			}
			s := got()
			if s.contentLength != int64(len(tc.want)) || s.chunked {
				t.Errorf("Content-Length = %d, chunked %v; want %d, not chunked", s.contentLength, s.chunked, len(tc.want))
			}
			if !bytes.Equal(s.body, tc.want) {
				t.Errorf("body: got %d bytes; want %d, intact", len(s.body), len(tc.want))
			}
		})
	}
	// The raw upload is the file, byte for byte: its length is the file's.
	srv, got := uploadServer(t, http.StatusOK, `{}`)
	up, err := OpenUpload(path, nil, nil, Raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := send(t, NewClient(nil, "the stand-in", "test"), srv.URL, up); err != nil {
		t.Fatal(err)
	}
	if s := got(); s.contentLength != size {
		t.Errorf("r.ContentLength = %d; want the file's size %d", s.contentLength, size)
	}
}

func TestClientClassifiesAnswers(t *testing.T) {
	path, _ := audioFile(t, 1024)
	for _, tc := range []struct {
		status int
		kind   Kind
		msg    string
	}{
		{401, Unauthorized, `the stand-in refused the credentials for the upload: bad [redacted]`},
		{413, Rejected, `the stand-in rejected the upload: bad [redacted]`},
		{503, Unavailable, `the stand-in cannot serve the upload now: bad [redacted]`},
	} {
		srv, _ := uploadServer(t, tc.status, `{"error":{"message":"bad sk-secret"}}`)
		c := NewClient(nil, "the stand-in", "test")
		c.Secret = "sk-secret"
		up, err := OpenUpload(path, nil, nil, Raw)
		if err != nil {
			t.Fatal(err)
		}
		err = send(t, c, srv.URL, up)
		e, ok := AsError(err)
		if !ok || e.Kind != tc.kind || e.Status != tc.status || e.Message != tc.msg {
			t.Errorf("%d: error = %#v; want kind %s, message %q", tc.status, err, tc.kind, tc.msg)
		}
		if strings.Contains(err.Error(), "sk-secret") {
			t.Errorf("%d: the error quotes the secret: %v", tc.status, err)
		}
	}
}

// Scenario: An error answer keeps the provider's code and its raw body
func TestClientKeepsTheErrorAnswer(t *testing.T) {
	path, _ := audioFile(t, 1024)
	huge := `{"error":{"message":"too much","code":"huge"},"pad":"` + strings.Repeat("x", 2*MaxRawError) + `"}`
	for _, tc := range []struct {
		name, body, wantCode string
		status               int
		wantRawLen           int
	}{
		{"openai 401", `{"error":{"message":"Incorrect API key provided: sk-secret","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "invalid_api_key", 401, -1},
		{"openai type when the code is null", `{"error":{"message":"slow down","type":"rate_limit_error","code":null}}`, "rate_limit_error", 429, -1},
		{"grpc gateway status", `{"code":16,"message":"The token is invalid","details":[]}`, "UNAUTHENTICATED", 401, -1},
		{"code that echoes the secret", `{"error":{"code":"bad key sk-secret"}}`, "bad key [redacted]", 400, -1},
		{"no code", `<html>bad gateway</html>`, "", 502, -1},
		{"huge body is cut", huge, "huge", 500, MaxRawError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := uploadServer(t, tc.status, tc.body)
			c := NewClient(nil, "the stand-in", "test")
			c.Secret = "sk-secret"
			up, err := OpenUpload(path, nil, nil, Raw)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := AsError(send(t, c, srv.URL, up))
			if !ok {
				t.Fatal("got no engine error")
			}
			if e.Code != tc.wantCode {
				t.Errorf("Code = %q; want %q", e.Code, tc.wantCode)
			}
			want := tc.body
			if tc.wantRawLen >= 0 {
				want = tc.body[:tc.wantRawLen]
			}
			if string(e.Raw) != want || e.RawType != "application/json" {
				t.Errorf("Raw = %d bytes of %s; want the %d bytes of the answer", len(e.Raw), e.RawType, len(want))
			}
			if strings.Contains(e.Error(), string(e.Raw)) {
				t.Errorf("the error's text carries the raw answer: %v", e)
			}
		})
	}
}
