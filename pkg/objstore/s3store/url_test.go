package s3store_test

import (
	"testing"

	"github.com/stratamq/strata/pkg/objstore/s3store"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, bucket, prefix string }{
		{"s3://my-bucket", "my-bucket", ""},
		{"s3://my-bucket/", "my-bucket", ""},
		{"s3://my-bucket/strata", "my-bucket", "strata"},
		{"s3://my-bucket/strata/prod/", "my-bucket", "strata/prod"},
		{"s3://a.b-c.123/x=1/y-2", "a.b-c.123", "x=1/y-2"},
	} {
		b, p, err := s3store.ParseURL(tc.in)
		if err != nil || b != tc.bucket || p != tc.prefix {
			t.Errorf("%q: got %q %q %v, want %q %q", tc.in, b, p, err, tc.bucket, tc.prefix)
		}
	}
	for _, in := range []string{
		"", "my-bucket/x", "s3:/my-bucket", "http://my-bucket/x", "S3://my-bucket", "s3://", "s3:///x",
		"s3://ab", "s3://My-Bucket", "s3://my_bucket", "s3://-bucket", "s3://bucket-", "s3://a..b",
		"s3://my-bucket:9000/x", "s3://user@my-bucket", "s3://my-bucket/a//b", "s3://my-bucket//a",
		"s3://my-bucket/a/../b", "s3://my-bucket/./b", "s3://my-bucket/x?versionId=1", "s3://my-bucket/x#f",
		"s3://" + string(make([]byte, 64)),
	} {
		if b, p, err := s3store.ParseURL(in); err == nil {
			t.Errorf("%q: accepted as %q %q", in, b, p)
		}
	}
}
