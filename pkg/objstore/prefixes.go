package objstore

import (
	"context"
	"slices"
	"strings"
)

// PrefixLister is implemented by stores that list the "directories" one
// level below a prefix without listing the objects in them (S3's
// ListObjectsV2 with a delimiter: one request per 1,000 prefixes, however
// many objects they hold).
type PrefixLister interface {
	// ListPrefixes returns, sorted, the distinct prefixes of the keys under
	// prefix that end at the first '/' after it. Keys with no '/' after
	// prefix are left out.
	ListPrefixes(ctx context.Context, prefix string) ([]string, error)
}

// ListPrefixes is s.ListPrefixes when s is a PrefixLister, and otherwise
// derived from List (which reads every key under prefix).
func ListPrefixes(ctx context.Context, s Store, prefix string) ([]string, error) {
	if pl, ok := s.(PrefixLister); ok {
		return pl.ListPrefixes(ctx, prefix)
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return CommonPrefixes(keys, prefix), nil
}

// CommonPrefixes returns the distinct prefixes of keys (which start with
// prefix) up to and including the first '/' after prefix, sorted.
func CommonPrefixes(keys []string, prefix string) []string {
	out := []string{}
	for _, k := range keys {
		if i := strings.IndexByte(k[len(prefix):], '/'); i >= 0 {
			out = append(out, k[:len(prefix)+i+1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
