package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3 part sizes. S3 refuses parts under 5 MiB except the last one and
// uploads of more than 10,000 parts; 8 MiB parts allow objects of 78 GiB,
// far above a four-hour recording, while a Put holds one part in memory.
const (
	DefaultPartSize = 8 << 20
	minPartSize     = 5 << 20
	maxParts        = 10000
)

// abortTimeout bounds the clean-up of a failed multipart upload, which runs
// after the caller's context may have ended.
const abortTimeout = 30 * time.Second

// S3Config says which bucket an S3 store uses and how it reaches it.
type S3Config struct {
	Bucket string
	// Prefix goes before every key, joined with a slash, so that several
	// deployments or tests can share a bucket; empty keeps keys at the top.
	Prefix string
	// Endpoint is the base URL of an S3-compatible service, such as
	// http://127.0.0.1:9000; empty is Amazon S3 itself.
	Endpoint string
	// Region signs the requests; S3-compatible services mostly accept any.
	Region string
	// PathStyle puts the bucket in the URL path (http://host/bucket/key)
	// instead of the host name (http://bucket.host/key). Self-hosted
	// services usually need it, since no DNS names their buckets.
	PathStyle bool
	// Credentials; never part of an error or a log line.
	AccessKeyID, SecretAccessKey, SessionToken string
	// PartSize is the size of one part of a multipart upload, and so the
	// memory one Put holds; zero is DefaultPartSize.
	PartSize int
}

// S3 keeps blobs as objects in a bucket of Amazon S3 or an S3-compatible
// service. Objects are written whole by a single PUT or by a multipart
// upload that is completed only after its last part, so, as with Local, a
// reader never sees half an object.
type S3 struct {
	client   *s3.Client
	bucket   string
	prefix   string
	endpoint string
	region   string
	partSize int
	secrets  []string
}

// NewS3 makes a store from cfg without contacting the service; Check does.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" || strings.ContainsAny(cfg.Bucket, "/\\ ") {
		return nil, fmt.Errorf("s3 bucket name %q is not valid", cfg.Bucket)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" && !ValidKey(prefix) {
		return nil, fmt.Errorf("s3 key prefix %q is not valid: use slash-separated names without empty, . or .. segments", cfg.Prefix)
	}
	if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
		return nil, errors.New("s3 store needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, errors.New("s3 endpoint must be an http(s) URL without credentials, such as http://127.0.0.1:9000")
		}
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if partSize < minPartSize {
		return nil, fmt.Errorf("s3 part size %d is below the %d bytes S3 accepts", partSize, minPartSize)
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := s3.Options{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken),
		UsePathStyle: cfg.PathStyle,
		// The SDK's default adds CRC checksums in headers and trailers that
		// several S3-compatible services reject or mishandle. Payloads are
		// still signed with their SHA-256, which the service verifies.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	s := &S3{
		client:   s3.New(opts),
		bucket:   cfg.Bucket,
		prefix:   prefix,
		endpoint: cfg.Endpoint,
		region:   region,
		partSize: partSize,
	}
	// Servers echo parts of a request in their error messages; a key id or
	// secret must never travel on in an error from here. Very short values
	// would blank out ordinary words, and no real credential is that short.
	for _, v := range []string{cfg.SecretAccessKey, cfg.SessionToken, cfg.AccessKeyID} {
		if len(v) >= 4 {
			s.secrets = append(s.secrets, v)
		}
	}
	return s, nil
}

// String names the bucket and prefix as an s3:// URL.
func (s *S3) String() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + s.prefix
}

// where names the service for messages about reaching it.
func (s *S3) where() string {
	if s.endpoint == "" {
		return "Amazon S3 (region " + s.region + ")"
	}
	return s.endpoint + " (region " + s.region + ")"
}

// Check asks the service whether the bucket is there and the credentials
// open it, so that a misconfigured store fails at start-up rather than at
// the first job. It lists at most one object rather than sending HEAD,
// whose answers have no body: a 404 to HEAD may mean a missing bucket or,
// on some servers, an unknown key id, and only the error code tells.
func (s *S3) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), MaxKeys: aws.Int32(1)}
	if s.prefix != "" {
		in.Prefix = aws.String(s.prefix + "/")
	}
	_, err := s.client.ListObjectsV2(ctx, in)
	if err == nil {
		return nil
	}
	var code string
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var reason string
	switch st := status(err); {
	case code == "NoSuchBucket":
		reason = "no such bucket"
	case st == 401 || st == 403 || slices.Contains([]string{"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"}, code):
		reason = "access denied: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the bucket's policy"
	case st == 301 || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed":
		reason = "the bucket is in another region (set AWS_REGION) or needs path-style addressing (?path_style=true)"
	case st == 0:
		reason = "cannot reach the service (check AWS_ENDPOINT_URL)"
	default:
		reason = "refused"
	}
	return fmt.Errorf("s3 bucket %q at %s: %s: %w", s.bucket, s.where(), reason, s.redact(err))
}

// object is the object name of key, prefix included.
func (s *S3) object(key string) (*string, error) {
	if !ValidKey(key) {
		return nil, fmt.Errorf("invalid blob key %q", key)
	}
	if s.prefix == "" {
		return aws.String(key), nil
	}
	return aws.String(s.prefix + "/" + key), nil
}

// Put stores everything r yields under key, replacing what was there. An
// object that fits in one part goes up in one PUT; a larger one in parts,
// read and sent one at a time, so memory stays at one part whatever the
// length of r.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	obj, err := s.object(key)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	cr := contextReader{ctx, r}
	buf, eof, err := fill(cr, nil, s.partSize)
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	if !eof {
		return s.putParts(ctx, key, obj, cr, buf)
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           obj,
		Body:          bytes.NewReader(buf),
		ContentLength: aws.Int64(int64(len(buf))),
	})
	if err != nil {
		return 0, s.fail("put", key, err)
	}
	return int64(len(buf)), nil
}

// putParts uploads first and the rest of r as a multipart upload. The
// object appears only when the upload is completed; on any failure the
// upload is aborted so that its parts do not linger, billed and unseen.
func (s *S3) putParts(ctx context.Context, key string, obj *string, r io.Reader, first []byte) (n int64, err error) {
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: obj})
	if err != nil {
		return 0, s.fail("put", key, err)
	}
	defer func() {
		if err == nil {
			return
		}
		n = 0
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(s.bucket), Key: obj, UploadId: up.UploadId,
		}); aerr != nil {
			err = fmt.Errorf("%w (aborting the upload failed too, its parts stay until a lifecycle rule removes them: %v)", err, s.redact(aerr))
		}
	}()

	var parts []types.CompletedPart
	buf, eof := first, false
	for num := int32(1); ; num++ {
		if num > maxParts {
			return 0, fmt.Errorf("put %s: object exceeds %d bytes, %d parts of %d", key, int64(maxParts)*int64(s.partSize), maxParts, s.partSize)
		}
		out, uerr := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        aws.String(s.bucket),
			Key:           obj,
			UploadId:      up.UploadId,
			PartNumber:    aws.Int32(num),
			Body:          bytes.NewReader(buf),
			ContentLength: aws.Int64(int64(len(buf))),
		})
		if uerr != nil {
			return 0, s.fail("put", key, uerr)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		n += int64(len(buf))
		if eof {
			break
		}
		if buf, eof, err = fill(r, buf, s.partSize); err != nil {
			return 0, fmt.Errorf("put %s: %w", key, err)
		}
		if len(buf) == 0 {
			break
		}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             obj,
		UploadId:        up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return 0, s.fail("put", key, err)
	}
	return n, nil
}

// fill reads r into buf until it holds limit bytes or r ends, and says
// whether it ended. buf grows as data comes, so a small object costs
// memory by its size, not by a whole part's.
func fill(r io.Reader, buf []byte, limit int) ([]byte, bool, error) {
	buf = buf[:0]
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(max(2*cap(buf), 64<<10), limit))
			copy(grown, buf)
			buf = grown
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// Open streams the object at key. The stream belongs to ctx: reading it
// after ctx ends fails.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: obj})
	if err != nil {
		return nil, s.fail("open", key, err)
	}
	return out.Body, nil
}

// Size returns the length of the object at key.
func (s *S3) Size(ctx context.Context, key string) (int64, error) {
	obj, err := s.object(key)
	if err != nil {
		return 0, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: obj})
	if err != nil {
		return 0, s.fail("stat", key, err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// fail describes a failed request on key, mapping a missing object to
// ErrNotFound.
func (s *S3) fail(op, key string, err error) error {
	var noKey *types.NoSuchKey
	var notFound *types.NotFound
	if errors.As(err, &noKey) || errors.As(err, &notFound) {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("%s %s in %s: %w", op, key, s, s.redact(err))
}

// status is the HTTP status of a failed request, 0 when no answer came.
func status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// redact replaces the store's credentials in err's message. The result
// still answers errors.Is for what err wraps, so a cancellation stays one,
// but does not unwrap to err, whose text would show them again.
func (s *S3) redact(err error) error {
	msg := err.Error()
	clean := msg
	for _, v := range s.secrets {
		clean = strings.ReplaceAll(clean, v, "[redacted]")
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
