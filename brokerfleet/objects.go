package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/objstore/s3local"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// objectFlags select the object store of the S3 tier.
type objectFlags struct {
	bucket   string // s3://BUCKET[/PREFIX]; empty: no tier (serve)
	endpoint string
	region   string
}

func (o *objectFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.bucket, "bucket", "", "S3 tier: s3://BUCKET[/PREFIX] for closed segments (empty: segments stay on local disk)")
	fs.StringVar(&o.endpoint, "s3-endpoint", "", "S3 endpoint override (a stand-in); default: -aws-endpoint (LocalStack serves both); empty: AWS")
	fs.StringVar(&o.region, "s3-region", "", "AWS region of the bucket (default: -aws-region, else the SDK's, else us-east-1 with an endpoint override)")
}

// open returns the tier's store, or nil without -bucket. The AWS endpoint
// and region of the metastore flags apply unless the S3 ones are set.
func (o *objectFlags) open(ctx context.Context, awsEndpoint, awsRegion string) (objstore.Store, error) {
	if o.bucket == "" {
		return nil, nil
	}
	if o.endpoint == "" {
		o.endpoint = awsEndpoint
	}
	if o.region == "" {
		o.region = awsRegion
	}
	bucket, prefix, err := s3store.ParseURL(o.bucket)
	if err != nil {
		return nil, usageError{fmt.Errorf("invalid value %q for flag -bucket: %v", o.bucket, err)}
	}
	st, err := s3store.Open(ctx, s3store.Options{Bucket: bucket, Prefix: prefix, Endpoint: o.endpoint, Region: o.region})
	if err != nil {
		return nil, fmt.Errorf("flag -bucket: %w", err)
	}
	return st, nil
}

// devBucket is the bucket of the dev cluster's in-process S3 stand-in.
const devBucket = "strata"

// startDevS3 runs an in-process S3 stand-in (gofakes3, persistent in
// <data>/s3.db) and returns a store on it.
func startDevS3(ctx context.Context, dataDir string) (objstore.Store, io.Closer, string, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, nil, "", fmt.Errorf("flag -data: %w", err)
	}
	srv, err := s3local.Start(filepath.Join(dataDir, "s3.db"), s3local.WithBuckets(devBucket))
	if err != nil {
		return nil, nil, "", err
	}
	st, err := s3store.Open(ctx, s3store.Options{Bucket: devBucket, Endpoint: srv.URL()})
	if err != nil {
		srv.Close()
		return nil, nil, "", err
	}
	return st, srv, srv.URL(), nil
}
