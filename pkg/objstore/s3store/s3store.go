// Package s3store is the objstore.Store on Amazon S3 and S3-compatible
// services (aws-sdk-go-v2): where a deployed Strata fleet tiers its
// segments, and, over s3local, where `brokerfleet dev` does.
//
// # Mapping
//
// Keys live under the store's prefix: key k is the S3 object
// "<prefix>/<k>" (or "k" with no prefix). Put is one PutObject, with
// If-None-Match: * for IfAbsent; Get is one GetObject with a Range header;
// List is ListObjectsV2 pages of Options.ListPageSize keys; Delete is one
// DeleteObject. Multipart uploads are not used (S3 takes up to 5 GiB in
// one PUT; CompleteMultipartUpload ignores If-None-Match on gofakes3).
//
// # Errors and retries
//
// The client's retryer (see NewClient and Retryer: bounded attempts, full
// jitter) retries 5xx, throttling (503 SlowDown), connection errors and
// 409 ConditionalRequestConflict, S3's answer to conditional writes racing
// on one key. 412 PreconditionFailed is never retried and becomes
// objstore.ErrExists; NoSuchKey becomes objstore.ErrNotFound (a missing
// bucket does not). When the retryer gives up, and on timeouts (including
// the caller's deadline), the error wraps objstore.ErrUnavailable and keeps
// its cause. A retried IfAbsent Put whose earlier attempt landed returns
// ErrExists: see objstore.PutIfAbsentIdempotent.
//
// A GET range that starts at or past the end of an object gets 416
// InvalidRange from S3; Get turns that into an empty result, as the
// objstore contract requires (an empty object answers 416 to any range).
package s3store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratamq/strata/pkg/objstore"
)

// Store is an objstore.Store on one S3 bucket and prefix. It is safe for
// concurrent use.
type Store struct {
	client   *s3.Client
	bucket   string
	base     string // the prefix with a trailing '/', or ""
	pageSize int32
}

var (
	_ objstore.Store        = (*Store)(nil)
	_ objstore.PrefixLister = (*Store)(nil)
)

// New returns a Store on bucket under prefix (slashes at either end are
// ignored; "" for the bucket's root) using client, which should carry
// Retryer (NewClient builds such a client). It sends no request.
func New(client *s3.Client, bucket, prefix string) *Store {
	base := strings.Trim(prefix, "/")
	if base != "" {
		base += "/"
	}
	return &Store{client: client, bucket: bucket, base: base, pageSize: DefaultListPageSize}
}

// Bucket returns the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Prefix returns the prefix every key is stored under, with its trailing
// '/' ("" for none).
func (s *Store) Prefix() string { return s.base }

// objectKey returns the S3 key of key, checked.
func (s *Store) objectKey(key string) (string, error) {
	if err := objstore.CheckKey(key); err != nil {
		return "", err
	}
	full := s.base + key
	if len(full) > objstore.MaxKeyBytes {
		return "", fmt.Errorf("objstore: key %q with prefix %q exceeds %d bytes", key, s.base, objstore.MaxKeyBytes)
	}
	return full, nil
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	op := "put " + key
	if opts.IfAbsent {
		op += " if absent"
	}
	k, err := s.objectKey(key)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(k),
		Body:          bytes.NewReader(body), // seekable: retries resend it
		ContentLength: aws.Int64(int64(len(body))),
	}
	if opts.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		return classify(op, err)
	}
	return nil
}

// PutReader implements objstore.Store: the SDK reads r to sign the
// request and rewinds it for a retry, so the body is never buffered whole.
func (s *Store) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64, opts objstore.PutOptions) error {
	op := "put " + key
	if opts.IfAbsent {
		op += " if absent"
	}
	k, err := s.objectKey(key)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if size < 0 {
		return fmt.Errorf("%s: negative size %d", op, size)
	}
	pos, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(k),
		Body:          io.NewSectionReader(readerAt{r}, pos, size),
		ContentLength: aws.Int64(size),
	}
	if opts.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		return classify(op, err)
	}
	return nil
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	op := fmt.Sprintf("get %s [%d+%d]", key, offset, length)
	k, err := s.objectKey(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := objstore.CheckRange(offset); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)}
	switch {
	case length < 0 || length > math.MaxInt64-offset:
		length = -1
		if offset > 0 {
			in.Range = aws.String("bytes=" + strconv.FormatInt(offset, 10) + "-")
		}
	case length == 0:
		// No empty range exists in HTTP: ask for one byte to learn whether
		// the object exists, and drop it.
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset))
	default:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	}
	out, err := s.client.GetObject(ctx, in)
	if isStatus(err, http.StatusRequestedRangeNotSatisfiable) || isCode(err, "InvalidRange") {
		return []byte{}, nil // the object exists and ends at or before offset
	}
	if err != nil {
		return nil, classify(op, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, classify(op+": read body", err)
	}
	if in.Range != nil && out.ContentRange == nil {
		// A service that ignores Range sends the whole object.
		body = body[min(offset, int64(len(body))):]
	}
	if length >= 0 && int64(len(body)) > length {
		body = body[:length]
	}
	return body, nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	op := "list " + prefix
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket:  aws.String(s.bucket),
		Prefix:  aws.String(s.base + prefix),
		MaxKeys: aws.Int32(s.pageSize),
	}, func(o *s3.ListObjectsV2PaginatorOptions) { o.StopOnDuplicateToken = true })
	out := []objstore.ObjectInfo{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, classify(op, err)
		}
		for _, c := range page.Contents {
			k := aws.ToString(c.Key)
			if !strings.HasPrefix(k, s.base) {
				return nil, fmt.Errorf("%s: service listed %q outside prefix %q", op, k, s.base)
			}
			out = append(out, objstore.ObjectInfo{
				Key:          k[len(s.base):],
				Size:         aws.ToInt64(c.Size),
				LastModified: aws.ToTime(c.LastModified),
			})
		}
	}
	slices.SortFunc(out, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// ListPrefixes implements objstore.PrefixLister: ListObjectsV2 pages with
// Delimiter "/", whose CommonPrefixes are the answer.
func (s *Store) ListPrefixes(ctx context.Context, prefix string) ([]string, error) {
	op := "list prefixes of " + prefix
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket:    aws.String(s.bucket),
		Prefix:    aws.String(s.base + prefix),
		Delimiter: aws.String("/"),
		MaxKeys:   aws.Int32(s.pageSize),
	}, func(o *s3.ListObjectsV2PaginatorOptions) { o.StopOnDuplicateToken = true })
	out := []string{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, classify(op, err)
		}
		for _, cp := range page.CommonPrefixes {
			k := aws.ToString(cp.Prefix)
			if !strings.HasPrefix(k, s.base+prefix) || !strings.HasSuffix(k, "/") {
				return nil, fmt.Errorf("%s: service listed prefix %q", op, k)
			}
			out = append(out, k[len(s.base):])
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	op := "delete " + key
	k, err := s.objectKey(key)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil && !isNoSuchKey(err) {
		return classify(op, err)
	}
	return nil
}

// readerAt adapts a ReadSeeker to ReaderAt (seek, then read), so the body
// can be an io.SectionReader that the SDK may rewind any number of times.
// The SDK reads one request at a time, so the seeks do not interleave.
type readerAt struct{ r io.ReadSeeker }

func (a readerAt) ReadAt(p []byte, off int64) (int, error) {
	if ra, ok := a.r.(io.ReaderAt); ok {
		return ra.ReadAt(p, off)
	}
	if _, err := a.r.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(a.r, p)
}
