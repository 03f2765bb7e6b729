package s3store

import (
	"fmt"
	"strings"
)

// ParseURL splits "s3://bucket/prefix" into bucket and prefix (without
// slashes at either end; "" for "s3://bucket" or "s3://bucket/"). The
// bucket must follow S3's naming rules for general purpose buckets (3-63
// characters of lowercase letters, digits, '.' and '-', starting and
// ending with a letter or digit); the prefix must not contain empty
// segments ("a//b"), "." or ".." segments, or a query or fragment.
func ParseURL(s string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", fmt.Errorf("s3 url %q: want s3://bucket[/prefix]", s)
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		return "", "", fmt.Errorf("s3 url %q: unexpected %q", s, rest[i])
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if err := checkBucket(bucket); err != nil {
		return "", "", fmt.Errorf("s3 url %q: %w", s, err)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return bucket, "", nil
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		switch seg {
		case "":
			return "", "", fmt.Errorf("s3 url %q: empty path segment in prefix", s)
		case ".", "..":
			return "", "", fmt.Errorf("s3 url %q: %q segment in prefix", s, seg)
		}
	}
	return bucket, prefix, nil
}

func checkBucket(b string) error {
	if b == "" {
		return fmt.Errorf("no bucket")
	}
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket %q: want 3-63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '-') && i > 0 && i < len(b)-1:
		default:
			return fmt.Errorf("bucket %q: invalid character %q at %d (lowercase letters, digits, '.', '-' only, starting and ending with a letter or digit)", b, c, i)
		}
	}
	if strings.Contains(b, "..") {
		return fmt.Errorf("bucket %q: two adjacent periods", b)
	}
	return nil
}
