package blob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// jobDir is the key prefix of everything JobKey names for jobID.
func jobDir(jobID string) string { return JobKey(jobID, "") }

// Delete removes the object at key; nothing there is not an error.
func (s *Local) Delete(_ context.Context, key string) error {
	path, err := s.Path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	return nil
}

// Delete removes the object at key; S3 answers a delete of a missing
// object as done.
func (s *S3) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: obj}); err != nil {
		return s.fail("delete", key, err)
	}
	return nil
}

// DeleteJob removes every object stored for jobID (see JobKey) and returns
// how many it removed; a job with nothing stored is not an error, so a
// repeated removal succeeds.
func (s *Local) DeleteJob(_ context.Context, jobID string) (int, error) {
	dir := filepath.Join(s.root, filepath.FromSlash(jobDir(jobID)))
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("remove job %s: %w", jobID, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("remove job %s: %w", jobID, err)
	}
	return n, nil
}

// DeleteJob removes every object stored for jobID under the store's
// prefix, one request per object, which every S3-compatible server
// supports; a job has a handful of objects, or a few hundred chunks at most.
func (s *S3) DeleteJob(ctx context.Context, jobID string) (int, error) {
	p := jobDir(jobID)
	if s.prefix != "" {
		p = s.prefix + "/" + p
	}
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(p)})
	n := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return n, s.fail("list", jobDir(jobID), err)
		}
		for _, o := range page.Contents {
			if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: o.Key}); err != nil {
				return n, s.fail("delete", aws.ToString(o.Key), err)
			}
			n++
		}
	}
	return n, nil
}
