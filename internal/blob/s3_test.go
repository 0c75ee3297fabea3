package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/blob/s3test"
)

// env is a getenv over a fixed map, so no test reads the machine's AWS
// settings.
func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

var testCreds = map[string]string{"AWS_ACCESS_KEY_ID": "key-id-1234", "AWS_SECRET_ACCESS_KEY": "secret-5678"}

func with(base map[string]string, kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Scenario: The store location is chosen by TRANSCRIBER_BLOB_URL
func TestOpenStoreLocalLocations(t *testing.T) {
	dataDir := t.TempDir()
	abs := filepath.Join(t.TempDir(), "elsewhere")
	t.Chdir(t.TempDir())
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, location, wantRoot string
	}{
		{"unset is blobs under the data directory", "", filepath.Join(dataDir, "blobs")},
		{"absolute path", abs, abs},
		{"relative path", "rel/blobs", filepath.Join(cwd, "rel", "blobs")},
		{"colon in a directory name", "a:b", filepath.Join(cwd, "a:b")},
		{"file URL", "file://" + abs, abs},
		{"file URL on localhost", "file://localhost" + abs, abs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenStore(context.Background(), tc.location, dataDir, env(nil))
			if err != nil {
				t.Fatalf("OpenStore(%q): %v", tc.location, err)
			}
			l, ok := s.(*Local)
			if !ok {
				t.Fatalf("OpenStore(%q) = %T; want *Local", tc.location, s)
			}
			if l.Root() != tc.wantRoot || s.String() != tc.wantRoot {
				t.Errorf("OpenStore(%q) root = %q, String = %q; want %q", tc.location, l.Root(), s.String(), tc.wantRoot)
			}
			if st, err := os.Stat(tc.wantRoot); err != nil || !st.IsDir() {
				t.Errorf("root after OpenStore: %v; want a directory", err)
			}
		})
	}
}

// Scenario: The store location is chosen by TRANSCRIBER_BLOB_URL
func TestOpenStoreRefusesBadLocations(t *testing.T) {
	tests := []struct {
		name, location string
		env            map[string]string
		want           string
	}{
		{"file URL with a host", "file://server/blobs", nil, "absolute directory"},
		{"relative file URL", "file:blobs", nil, "absolute directory"},
		{"file URL with a query", "file:///blobs?x=1", nil, "absolute directory"},
		{"unknown scheme", "gs://bucket/prefix", nil, `unknown scheme "gs"`},
		{"unparsable", "s3://bucket/%zz", nil, "not a valid URL"},
		{"s3 without slashes", "s3:bucket", testCreds, "no bucket"},
		{"s3 without a bucket", "s3:///prefix", testCreds, "no bucket"},
		{"credentials in the URL", "s3://AKIDSECRET:verysecret@bucket/p", testCreds, "not in the URL"},
		{"dot-dot prefix", "s3://bucket/a/../b", testCreds, "prefix"},
		{"empty segment in prefix", "s3://bucket/a//b", testCreds, "prefix"},
		{"unknown parameter", "s3://bucket/p?region=eu-west-1", testCreds, `unknown parameter "region"`},
		{"path_style not a boolean", "s3://bucket/p?path_style=maybe", testCreds, "path_style must be true or false"},
		{"no credentials", "s3://bucket/p", nil, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"key id without secret", "s3://bucket/p", map[string]string{"AWS_ACCESS_KEY_ID": "key-id-1234"}, "AWS_SECRET_ACCESS_KEY"},
		{"endpoint not http", "s3://bucket/p", with(testCreds, "AWS_ENDPOINT_URL", "ftp://host"), "http(s) URL"},
		{"endpoint with credentials", "s3://bucket/p", with(testCreds, "AWS_ENDPOINT_URL", "http://u:endpointpass@host"), "without credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenStore(context.Background(), tc.location, t.TempDir(), env(tc.env))
			if err == nil {
				t.Fatalf("OpenStore(%q) = %v; want an error", tc.location, s)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenStore(%q) error = %q; want it to say %q", tc.location, err, tc.want)
			}
			for _, secret := range []string{"verysecret", "secret-5678", "endpointpass"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("OpenStore(%q) error = %q; want no credentials in it", tc.location, err)
				}
			}
		})
	}
}

// Scenario: The store location is chosen by TRANSCRIBER_BLOB_URL
func TestS3ConfigFromEnvironment(t *testing.T) {
	tests := []struct {
		name     string
		location string
		env      map[string]string
		want     S3Config
	}{
		{
			name: "Amazon S3", location: "s3://recordings",
			env:  with(testCreds, "AWS_SESSION_TOKEN", "tok"),
			want: S3Config{Bucket: "recordings", AccessKeyID: "key-id-1234", SecretAccessKey: "secret-5678", SessionToken: "tok"},
		},
		{
			name: "endpoint means path style", location: "s3://b/team/prod/",
			env: with(testCreds, "AWS_ENDPOINT_URL", "http://127.0.0.1:9000", "AWS_DEFAULT_REGION", "eu-central-1"),
			want: S3Config{Bucket: "b", Prefix: "/team/prod/", Endpoint: "http://127.0.0.1:9000", Region: "eu-central-1", PathStyle: true,
				AccessKeyID: "key-id-1234", SecretAccessKey: "secret-5678"},
		},
		{
			name: "S3 endpoint and AWS_REGION win", location: "s3://b?path_style=false",
			env: with(testCreds, "AWS_ENDPOINT_URL", "http://general:1", "AWS_ENDPOINT_URL_S3", "https://s3.example:443",
				"AWS_REGION", "auto", "AWS_DEFAULT_REGION", "eu-central-1"),
			want: S3Config{Bucket: "b", Endpoint: "https://s3.example:443", Region: "auto",
				AccessKeyID: "key-id-1234", SecretAccessKey: "secret-5678"},
		},
		{
			name: "path style asked for on Amazon S3", location: "s3://b/p?path_style=true",
			env:  testCreds,
			want: S3Config{Bucket: "b", Prefix: "/p", PathStyle: true, AccessKeyID: "key-id-1234", SecretAccessKey: "secret-5678"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := parseLocation(tc.location)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s3ConfigFrom(u, env(tc.env))
			if err != nil {
				t.Fatalf("s3ConfigFrom(%q): %v", tc.location, err)
			}
			if got != tc.want {
				t.Errorf("s3ConfigFrom(%q) =\n%+v; want\n%+v", tc.location, got, tc.want)
			}
			s, err := NewS3(got)
			if err != nil {
				t.Fatalf("NewS3: %v", err)
			}
			if want := strings.TrimRight(strings.Split(tc.location, "?")[0], "/"); s.String() != want {
				t.Errorf("String() = %q; want %q", s.String(), want)
			}
		})
	}
}

// bucketStore opens a store over a fresh bucket of srv through OpenStore.
func bucketStore(t *testing.T, srv *s3test.Server, bucket, prefix string) Store {
	t.Helper()
	url := "s3://" + bucket + prefix
	s, err := OpenStore(context.Background(), url, "", srv.Getenv(url))
	if err != nil {
		t.Fatalf("OpenStore(%s): %v", url, err)
	}
	return s
}

// Scenario: A bucket that cannot be used stops start-up with a clear error
func TestOpenStoreChecksTheBucket(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket(t, "present")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	tests := []struct {
		name     string
		location string
		env      map[string]string
		want     []string
	}{
		{
			name: "no such bucket", location: "s3://absent/p",
			env:  srv.Env(""),
			want: []string{`"absent"`, srv.Endpoint, "no such bucket"},
		},
		{
			name: "wrong secret", location: "s3://present/p",
			env:  with(srv.Env(""), "AWS_SECRET_ACCESS_KEY", "wrong-secret-value"),
			want: []string{`"present"`, srv.Endpoint, "access denied"},
		},
		{
			// Amazon S3 answers 403; versitygw answers 404 with its own
			// code, which must not pass for a missing bucket.
			name: "unknown key id", location: "s3://present/p",
			env:  with(srv.Env(""), "AWS_ACCESS_KEY_ID", "unknown-key-id"),
			want: []string{`"present"`, srv.Endpoint, "refused", "access key"},
		},
		{
			name: "nothing listens", location: "s3://present/p",
			env:  with(srv.Env(""), "AWS_ENDPOINT_URL", closed),
			want: []string{`"present"`, closed, "cannot reach"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenStore(context.Background(), tc.location, "", env(tc.env))
			if err == nil {
				t.Fatalf("OpenStore(%s) = %v; want an error", tc.location, s)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q; want it to say %q", err, w)
				}
			}
			if tc.name != "no such bucket" && strings.Contains(err.Error(), "no such bucket") {
				t.Errorf("error = %q; want no claim that the bucket is missing", err)
			}
			for _, secret := range []string{tc.env["AWS_SECRET_ACCESS_KEY"], tc.env["AWS_ACCESS_KEY_ID"]} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error = %q; want no credentials in it", err)
				}
			}
		})
	}
	t.Run("usable bucket", func(t *testing.T) {
		s := bucketStore(t, srv, "present", "/p")
		if got, want := s.String(), "s3://present/p"; got != want {
			t.Errorf("String() = %q; want %q", got, want)
		}
	})
}

// Scenario: Stores under different prefixes do not see each other's objects
func TestS3KeysLiveUnderThePrefix(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket(t, "shared")
	deploy := bucketStore(t, srv, "shared", "//team/prod/")
	top := bucketStore(t, srv, "shared", "")
	put(t, deploy, "jobs/x/transcript.json", []byte("prod"))
	put(t, top, "jobs/x/transcript.json", []byte("top"))

	want := []string{"jobs/x/transcript.json", "team/prod/jobs/x/transcript.json"}
	if got := srv.Objects(t, "shared"); !slices.Equal(got, want) {
		t.Errorf("objects in bucket = %q; want %q", got, want)
	}
	if got := string(read(t, top, "team/prod/jobs/x/transcript.json")); got != "prod" {
		t.Errorf("unprefixed store reads %q under the prefix; want %q", got, "prod")
	}
	if got := string(read(t, deploy, "jobs/x/transcript.json")); got != "prod" {
		t.Errorf("prefixed store reads %q; want its own %q", got, "prod")
	}
}

// Scenario: A large recording is stored in bounded memory
func TestS3PartBoundaries(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket(t, "parts")
	s, err := NewS3(S3Config{
		Bucket: "parts", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, PartSize: minPartSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{0, 1, minPartSize - 1, minPartSize, minPartSize + 1, 2 * minPartSize, 2*minPartSize + 7} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			key := fmt.Sprintf("sizes/%d", size)
			n, err := s.Put(context.Background(), key, &pattern{n: size})
			if err != nil || n != size {
				t.Fatalf("Put = %d, %v; want %d", n, err, size)
			}
			want, got := sha256.New(), sha256.New()
			if _, err := io.Copy(want, &pattern{n: size}); err != nil {
				t.Fatal(err)
			}
			rc, err := s.Open(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if m, err := io.Copy(got, rc); err != nil || m != size {
				t.Fatalf("read back %d bytes, %v; want %d", m, err, size)
			}
			if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
				t.Errorf("content read back differs from what was put")
			}
		})
	}
	if up := srv.Uploads(t, "parts"); len(up) != 0 {
		t.Errorf("unfinished uploads = %q; want none", up)
	}
	if _, err := NewS3(S3Config{Bucket: "b", AccessKeyID: "k", SecretAccessKey: "s", PartSize: minPartSize - 1}); err == nil {
		t.Errorf("NewS3 with a part under 5 MiB: error = nil; want a refusal")
	}
}

// Scenario: A cancelled or failed store leaves the previous object or none
func TestS3HonoursCancellation(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket(t, "cancel")
	s := bucketStore(t, srv, "cancel", "")
	// Far more than the sockets between here and the server hold, so the
	// rest cannot all have arrived before the cancel does.
	put(t, s, "big", bytes.Repeat([]byte("x"), 32<<20))

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Size(cancelled, "big"); !errors.Is(err, context.Canceled) {
		t.Errorf("Size with a cancelled context: error = %v; want context.Canceled", err)
	}
	if rc, err := s.Open(cancelled, "big"); !errors.Is(err, context.Canceled) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Open with a cancelled context: error = %v; want context.Canceled", err)
	}

	// A stream already open stops when its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, err := s.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1024)); err != nil {
		t.Fatalf("first read: %v", err)
	}
	cancel()
	if n, err := io.Copy(io.Discard, rc); err == nil {
		t.Errorf("reading on after cancel: %d more bytes, no error; want the stream to fail", n)
	}
}

// Scenario: A bucket that cannot be used stops start-up with a clear error
func TestS3ErrorsHideCredentials(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket(t, "secrets")
	const secret = "a-secret-that-must-not-leak"
	s, err := NewS3(S3Config{
		Bucket: "secrets", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, putErr := s.Put(ctx, "k", strings.NewReader("x"))
	_, openErr := s.Open(ctx, "k")
	_, sizeErr := s.Size(ctx, "k")
	for name, err := range map[string]error{"Put": putErr, "Open": openErr, "Size": sizeErr, "Check": s.Check(ctx)} {
		if err == nil {
			t.Errorf("%s with a wrong secret: error = nil; want a refusal", name)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), srv.AccessKey) {
			t.Errorf("%s error = %q; want no credentials in it", name, err)
		}
		if errors.Is(err, ErrNotFound) {
			t.Errorf("%s error = %v; want a refusal, not ErrNotFound", name, err)
		}
	}

	// Whatever a server echoes, the credentials are blanked out and the
	// error still says what it wraps.
	echoed := fmt.Errorf("server said: key %s, secret %s: %w", srv.AccessKey, secret, context.DeadlineExceeded)
	got := s.redact(echoed)
	if strings.Contains(got.Error(), secret) || strings.Contains(got.Error(), srv.AccessKey) || !strings.Contains(got.Error(), "[redacted]") {
		t.Errorf("redact = %q; want the key id and secret replaced", got)
	}
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("redact lost the wrapped error: errors.Is(%v, DeadlineExceeded) = false", got)
	}
	if errors.Unwrap(got) != nil {
		t.Errorf("redact unwraps to the original, whose text shows the credentials")
	}
}

func TestFillGrowsToTheLimit(t *testing.T) {
	const limit = 1 << 20
	tests := []struct {
		name    string
		n       int64
		wantLen int
		wantEOF bool
	}{
		{"empty", 0, 0, true},
		{"small", 100, 100, true},
		{"just under", limit - 1, limit - 1, true},
		{"exactly the limit", limit, limit, false},
		{"over", 3 * limit, limit, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf, eof, err := fill(&pattern{n: tc.n}, nil, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(buf) != tc.wantLen || eof != tc.wantEOF {
				t.Errorf("fill = %d bytes, eof %v; want %d, %v", len(buf), eof, tc.wantLen, tc.wantEOF)
			}
			if cap(buf) > limit {
				t.Errorf("fill grew the buffer to %d; want at most the limit %d", cap(buf), limit)
			}
			if tc.n <= 100 && cap(buf) > 64<<10 {
				t.Errorf("fill of %d bytes holds %d; want small objects to cost little", tc.n, cap(buf))
			}
		})
	}
}
