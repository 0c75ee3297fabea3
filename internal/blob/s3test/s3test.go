// Package s3test runs a real S3-compatible server for tests: the posix
// gateway of versitygw, an S3 server written in Go that keeps buckets as
// directories. The binary is built from the pinned Version with the go
// command on first use and kept in the user cache directory, so later runs
// start it at once; VERSITYGW names a prebuilt binary instead.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the versitygw release the tests run. Bump it on purpose: a
// new release can change what the gateway accepts.
const Version = "v1.8.0"

const module = "github.com/versity/versitygw/cmd/versitygw"

// Server is a running gateway. Its credentials are made up per start and
// good for nothing else.
type Server struct {
	// Endpoint is the base URL, http://127.0.0.1:<port>.
	Endpoint  string
	Region    string
	AccessKey string
	SecretKey string
	// Root is the directory whose subdirectories are the buckets.
	Root string

	client *s3.Client
}

var (
	buildMu  sync.Mutex
	builtBin string
)

// Binary returns the path of a versitygw binary of Version, building it on
// first use. With -short it skips the test rather than spend minutes on a
// first build.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("s3test: VERSITYGW=%s: %v", p, err)
		}
		return p
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if builtBin != "" {
		return builtBin
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "transcriber-test", "versitygw-"+Version)
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err == nil {
		builtBin = bin
		return bin
	}
	if testing.Short() {
		t.Skipf("s3test: versitygw %s is not built yet and -short avoids the build; run once without -short or set VERSITYGW", Version)
	}
	if err := build(dir, bin); err != nil {
		t.Fatalf("s3test: %v\nset VERSITYGW to a versitygw binary to skip the build", err)
	}
	builtBin = bin
	return bin
}

// build installs versitygw into dir. Test binaries of several packages may
// build at once; a lock file makes the second wait for the first instead of
// compiling it again.
func build(dir, bin string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	// Nothing is written to the lock file, and closing it releases the lock
	// even if the unlock below failed.
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return err
	}
	// Scratch only: the binary is renamed out of it on success.
	defer func() { _ = os.RemoveAll(tmp) }()
	cmd := exec.Command("go", "install", module+"@"+Version)
	// Outside any module, with this module's settings out of the way:
	// versitygw builds from its own go.mod, checked against the checksum
	// database like any download.
	cmd.Dir = tmp
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOFLAGS=") || strings.HasPrefix(kv, "GOWORK=") || strings.HasPrefix(kv, "GOBIN=")
	}), "GOBIN="+tmp, "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go install %s@%s: %v\n%s", module, Version, err, out)
	}
	return os.Rename(filepath.Join(tmp, "versitygw"), bin)
}

// Start runs a gateway on a free loopback port over a fresh directory and
// stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	base := t.TempDir()
	s := &Server{
		Region:    "us-east-1",
		AccessKey: "test-access-key",
		SecretKey: "test-secret-" + rand.Text(),
		Root:      filepath.Join(base, "buckets"),
	}
	// Metadata goes to a sidecar directory rather than extended attributes,
	// which not every file system under a temporary directory supports.
	meta := filepath.Join(base, "meta")
	for _, d := range []string{s.Root, meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A port found free can be taken before the gateway binds it; then the
	// gateway exits and another port is tried.
	var lastErr error
	for range 3 {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if lastErr = s.run(t, bin, addr, meta); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("s3test: start versitygw: %v", lastErr)
	}
	s.client = s3.New(s3.Options{
		Region:                     s.Region,
		BaseEndpoint:               aws.String(s.Endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	return s
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// run starts the gateway on addr and waits until it accepts connections.
func (s *Server) run(t testing.TB, bin, addr, meta string) error {
	out := &syncWriter{}
	cmd := exec.Command(bin, "--port", addr, "--region", s.Region, "--quiet", "posix", "--sidecar", meta, s.Root)
	// Credentials through the environment keep them out of process lists.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("versitygw exited at start (%v): %s", waitErr, out.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close() // only a probe that the port listens
			break
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("versitygw does not listen on %s after 15s: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Endpoint = "http://" + addr
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", out.String())
		}
	})
	return nil
}

// syncWriter collects the output of the process's two pipes, which are
// copied by goroutines of their own.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Client is an S3 client signed in to the gateway, for looking behind a
// store's back.
func (s *Server) Client() *s3.Client { return s.client }

// CreateBucket makes a bucket.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
}

// Objects lists every object name in bucket, sorted.
func (s *Server) Objects(t testing.TB, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("s3test: list %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			names = append(names, aws.ToString(o.Key))
		}
	}
	slices.Sort(names)
	return names
}

// Uploads lists the object names of multipart uploads begun and neither
// completed nor aborted in bucket.
func (s *Server) Uploads(t testing.TB, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("s3test: list uploads in %s: %v", bucket, err)
	}
	var names []string
	for _, u := range out.Uploads {
		names = append(names, aws.ToString(u.Key))
	}
	return names
}

// Env is the environment that points transcriber at blobURL on this
// gateway: TRANSCRIBER_BLOB_URL and the AWS variables, for a child
// process's environment or a getenv.
func (s *Server) Env(blobURL string) map[string]string {
	return map[string]string{
		"TRANSCRIBER_BLOB_URL":  blobURL,
		"AWS_ENDPOINT_URL":      s.Endpoint,
		"AWS_REGION":            s.Region,
		"AWS_ACCESS_KEY_ID":     s.AccessKey,
		"AWS_SECRET_ACCESS_KEY": s.SecretKey,
	}
}

// Environ is Env as KEY=value lines, for exec.Cmd.Env.
func (s *Server) Environ(blobURL string) []string {
	var kv []string
	for k, v := range s.Env(blobURL) {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return kv
}

// Getenv looks variables up in Env and nowhere else, so a test does not
// pick up the AWS settings of the machine it runs on.
func (s *Server) Getenv(blobURL string) func(string) string {
	env := s.Env(blobURL)
	return func(k string) string { return env[k] }
}
