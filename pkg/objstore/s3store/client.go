package s3store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// DefaultRegion is the region a client made with an endpoint override and
// no region uses.
const DefaultRegion = "us-east-1"

// DefaultListPageSize is the keys per LIST request unless Options say
// otherwise: S3's maximum.
const DefaultListPageSize = 1000

// DefaultHeaderTimeout bounds the wait for response headers after a
// request has been sent, so a hung connection becomes a retried timeout
// rather than a hung call. It does not bound the transfer of bodies:
// segments are large, and the caller's context bounds the whole call.
const DefaultHeaderTimeout = 20 * time.Second

// DefaultRetries is the number of retries after a first attempt that
// Retryer makes when asked for 0.
const DefaultRetries = 7

// Backoff bounds of Retryer: full jitter over an exponential from
// RetryBaseDelay, capped at RetryMaxBackoff. With DefaultRetries the
// retries of one call sleep at most about 2.6 s in all.
const (
	RetryBaseDelay  = 25 * time.Millisecond
	RetryMaxBackoff = time.Second
)

// transientCodes are S3 error codes that a retry may cure beyond the SDK's
// defaults (5xx, throttling such as SlowDown, RequestTimeout, connection
// errors). ConditionalRequestConflict (409) is S3's answer to a
// conditional write racing another write of the same key; the write was
// not applied and S3 documents that it can be retried. PreconditionFailed
// (412) is deliberately absent: it is a definite answer.
var transientCodes = map[string]struct{}{
	"ConditionalRequestConflict": {},
	"InternalError":              {},
	"ServiceUnavailable":         {},
}

// Options configure Open.
type Options struct {
	// Bucket is the bucket's name (required).
	Bucket string
	// Prefix is prepended to every key, with a '/' between ("" for none);
	// slashes at either end are ignored.
	Prefix string
	// Endpoint overrides the S3 endpoint (s3local, LocalStack, MinIO): the
	// client then uses path-style addressing, checksums only where an
	// operation requires them, and static dummy credentials unless
	// credentials are configured (environment or shared files; the EC2
	// instance metadata service is never asked). Empty: AWS.
	Endpoint string
	// Region defaults to the AWS configuration's, or to DefaultRegion with
	// an Endpoint.
	Region string
	// ListPageSize is the keys per LIST request (0: DefaultListPageSize;
	// S3 returns at most 1000).
	ListPageSize int32
	// Retries is the retries after a first attempt (0: DefaultRetries,
	// negative: a single attempt).
	Retries int
	// HeaderTimeout is DefaultHeaderTimeout when 0.
	HeaderTimeout time.Duration
	// ClientOptions apply last to the SDK client (tests count or redirect
	// requests through them).
	ClientOptions []func(*s3.Options)
}

func (o Options) validate() error {
	switch {
	case o.Bucket == "":
		return errors.New("no bucket")
	case o.ListPageSize < 0 || o.ListPageSize > DefaultListPageSize:
		return fmt.Errorf("list page size %d out of 1..%d", o.ListPageSize, DefaultListPageSize)
	case o.HeaderTimeout < 0:
		return fmt.Errorf("negative header timeout %v", o.HeaderTimeout)
	}
	return nil
}

// Open builds an S3 client from opts (see NewClient) and returns a Store
// on opts.Bucket under opts.Prefix. It does not check that the bucket
// exists.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("s3store: %w", err)
	}
	client, err := NewClient(ctx, opts)
	if err != nil {
		return nil, err
	}
	s := New(client, opts.Bucket, opts.Prefix)
	if opts.ListPageSize > 0 {
		s.pageSize = opts.ListPageSize
	}
	return s, nil
}

// NewClient builds the S3 client Open uses, from the default AWS
// configuration (environment, shared files, instance role) with
// Retryer(opts.Retries) and opts.HeaderTimeout. With opts.Endpoint it sets
// BaseEndpoint, path-style addressing and WhenRequired checksums (without
// them the SDK may send aws-chunked bodies with trailing checksums, which
// gofakes3 stores verbatim), disables the instance metadata service and
// falls back to static dummy credentials when none are configured. Only
// main packages and test helpers should call it: libraries take a client.
func NewClient(ctx context.Context, opts Options) (*s3.Client, error) {
	timeout := opts.HeaderTimeout
	if timeout == 0 {
		timeout = DefaultHeaderTimeout
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = timeout
	})
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return Retryer(opts.Retries) }),
		config.WithHTTPClient(httpClient),
	}
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	if opts.Endpoint != "" {
		load = append(load, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3 client: load aws config: %w", err)
	}
	if opts.Endpoint == "" {
		if cfg.Region == "" {
			return nil, errors.New("s3 client: no region (set AWS_REGION or pass one)")
		}
		return s3.NewFromConfig(cfg, opts.ClientOptions...), nil
	}
	if !strings.HasPrefix(opts.Endpoint, "http://") && !strings.HasPrefix(opts.Endpoint, "https://") {
		return nil, fmt.Errorf("s3 client: endpoint %q is not an http(s) URL", opts.Endpoint)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if !haveCredentials(ctx, cfg.Credentials) {
		cfg.Credentials = credentials.NewStaticCredentialsProvider("strata", "strata", "")
	}
	cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	local := func(o *s3.Options) {
		o.BaseEndpoint = aws.String(opts.Endpoint)
		o.UsePathStyle = true
	}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){local}, opts.ClientOptions...)...), nil
}

// haveCredentials reports whether p yields credentials within a second.
func haveCredentials(ctx context.Context, p aws.CredentialsProvider) bool {
	if p == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := p.Retrieve(ctx)
	return err == nil && c.HasKeys()
}

// Retryer returns the retryer NewClient installs: the SDK's standard
// retryer (5xx, throttling, connection errors) plus ConditionalRequestConflict,
// with retries+1 attempts, full-jitter backoff from RetryBaseDelay capped
// at RetryMaxBackoff, and the SDK's retry quota (a client that keeps
// failing stops retrying early). A 412 PreconditionFailed is never
// retried. retries 0 means DefaultRetries; a negative value means a
// single attempt.
func Retryer(retries int) aws.Retryer {
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = retries + 1
		o.MaxBackoff = RetryMaxBackoff
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return backoff(attempt, RetryBaseDelay, RetryMaxBackoff), nil
		})
		o.Retryables = append(o.Retryables, retry.RetryableErrorCode{Codes: transientCodes})
	})
}

// backoff is a full-jitter delay before retry number attempt (1-based).
func backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base << min(attempt-1, 20)
	if d <= 0 || d > limit {
		d = limit
	}
	return rand.N(d) + time.Millisecond
}
