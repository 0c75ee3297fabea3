package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// OpenStore opens the store that location names, the value of
// TRANSCRIBER_BLOB_URL:
//
//   - empty: the directory "blobs" under dataDir;
//   - a path, absolute or relative, or file:///absolute/path: that directory;
//   - s3://bucket or s3://bucket/prefix: objects in that bucket, their keys
//     under prefix.
//
// For S3, getenv supplies the standard AWS variables: AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL for an S3-compatible service (unset is Amazon S3),
// AWS_REGION or AWS_DEFAULT_REGION (default us-east-1), AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. Buckets are addressed in the
// URL path when an endpoint is set and by host name on Amazon S3; the query
// parameter path_style=true or path_style=false overrides that. OpenStore
// checks that the bucket answers, so a wrong setting fails here, with the
// bucket and endpoint named and the credentials not.
func OpenStore(ctx context.Context, location, dataDir string, getenv func(string) string) (Store, error) {
	if location == "" {
		if dataDir == "" {
			return nil, errors.New("blob store: no location and no data directory")
		}
		return NewLocal(filepath.Join(dataDir, "blobs"))
	}
	u, err := parseLocation(location)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return NewLocal(location)
	}
	switch u.Scheme {
	case "file":
		if (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("blob store %s: a file URL names an absolute directory, such as file:///var/lib/transcriber/blobs", u.Redacted())
		}
		return NewLocal(u.Path)
	case "s3":
		cfg, err := s3ConfigFrom(u, getenv)
		if err != nil {
			return nil, err
		}
		s, err := NewS3(cfg)
		if err != nil {
			return nil, fmt.Errorf("blob store %s: %w", u.Redacted(), err)
		}
		if err := s.Check(ctx); err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("blob store %s: unknown scheme %q; use a directory, file:///path or s3://bucket/prefix", u.Redacted(), u.Scheme)
	}
}

// parseLocation returns the URL that location is, or nil for a plain
// path. A scheme is recognised by "://", so that a directory whose name has
// a colon stays a directory; file: and s3: are always taken as schemes, so
// that a mistyped URL does not quietly become a directory.
func parseLocation(location string) (*url.URL, error) {
	lower := strings.ToLower(location)
	if !strings.Contains(location, "://") && !strings.HasPrefix(lower, "file:") && !strings.HasPrefix(lower, "s3:") {
		return nil, nil
	}
	u, err := url.Parse(location)
	if err != nil {
		// The parser's message quotes the whole value, which may hold a
		// password someone put there by mistake.
		return nil, errors.New("blob store location is not a valid URL; use a directory, file:///path or s3://bucket/prefix")
	}
	return u, nil
}

// s3ConfigFrom reads an s3:// URL and the AWS variables.
func s3ConfigFrom(u *url.URL, getenv func(string) string) (S3Config, error) {
	if u.User != nil {
		return S3Config{}, fmt.Errorf("blob store %s: credentials go in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, not in the URL", u.Redacted())
	}
	if u.Host == "" {
		return S3Config{}, fmt.Errorf("blob store %s: no bucket; use s3://bucket/prefix", u.Redacted())
	}
	if u.Fragment != "" {
		return S3Config{}, fmt.Errorf("blob store %s: unexpected #fragment", u.Redacted())
	}
	cfg := S3Config{
		Bucket:          u.Host,
		Prefix:          u.Path,
		Endpoint:        firstSet(getenv, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:          firstSet(getenv, "AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKeyID:     strings.TrimSpace(getenv("AWS_ACCESS_KEY_ID")),
		SecretAccessKey: strings.TrimSpace(getenv("AWS_SECRET_ACCESS_KEY")),
		SessionToken:    strings.TrimSpace(getenv("AWS_SESSION_TOKEN")),
	}
	// Without an endpoint this is Amazon S3, which prefers virtual-hosted
	// buckets; a self-hosted service seldom has DNS names for its buckets.
	cfg.PathStyle = cfg.Endpoint != ""
	q := u.Query()
	for name, vals := range q {
		if name != "path_style" {
			return S3Config{}, fmt.Errorf("blob store %s: unknown parameter %q; only path_style is known", u.Redacted(), name)
		}
		v, err := strconv.ParseBool(vals[len(vals)-1])
		if err != nil || len(vals) != 1 {
			return S3Config{}, fmt.Errorf("blob store %s: path_style must be true or false", u.Redacted())
		}
		cfg.PathStyle = v
	}
	return cfg, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
