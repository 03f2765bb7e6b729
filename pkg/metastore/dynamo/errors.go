package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stratamq/strata/pkg/metastore"
)

// DefaultRetries is the number of retries after a first attempt that
// NewClient's retryer makes when asked for 0.
const DefaultRetries = 7

// Backoff bounds of Retryer: full jitter over an exponential from
// RetryBaseDelay, capped at RetryMaxBackoff. With DefaultRetries the
// retries of one call sleep at most about 2.6 s in all.
const (
	RetryBaseDelay  = 25 * time.Millisecond
	RetryMaxBackoff = time.Second
)

// transientCodes are DynamoDB error codes that a retry may cure, beyond the
// SDK's throttling codes: a write to an item that a transaction is
// changing.
var transientCodes = map[string]struct{}{
	"TransactionConflictException": {},
	"InternalServerError":          {},
	"ServiceUnavailable":           {},
}

// unsupportedCodes are what a service answers to an operation it lacks.
var unsupportedCodes = map[string]struct{}{
	"UnknownOperationException": {},
	"UnknownOperation":          {},
	"InvalidAction":             {},
}

// Retryer returns the retryer NewClient installs: the SDK's standard
// retryer (throttling, 5xx, connection errors, TransactionConflict) with
// retries+1 attempts, full-jitter backoff from RetryBaseDelay capped at
// RetryMaxBackoff, and the SDK's retry quota (a client that keeps failing
// stops retrying early, so callers see ErrUnavailable sooner). retries 0
// means DefaultRetries; a negative value means a single attempt.
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

var transient = retry.IsErrorRetryables(append(append([]retry.IsErrorRetryable{}, retry.DefaultRetryables...),
	retry.RetryableErrorCode{Codes: transientCodes}))

// classify maps an SDK error of operation op ("put a/b if absent") onto
// the metastore's sentinels. ambiguous says an earlier attempt of the same
// call may have been applied.
func classify(op string, err error, ambiguous bool) error {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf) && ambiguous:
		return fmt.Errorf("%s: condition failed after a retried attempt that may have been applied: %w: %w", op, metastore.ErrUnavailable, err)
	case errors.As(err, &ccf):
		return fmt.Errorf("%s: %w", op, metastore.ErrConditionFailed)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", op, err)
	case isUnavailable(err):
		return fmt.Errorf("%s: %w: %w", op, metastore.ErrUnavailable, err)
	case isUnsupported(err):
		return fmt.Errorf("%s: %w: %w", op, metastore.ErrUnsupported, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isUnsupported reports whether err says the service lacks the operation:
// an unknown-operation code, or a 400 whose body is not a DynamoDB error
// at all (minidyn answers unknown operations in plain text).
func isUnsupported(err error) bool {
	var (
		ae smithy.APIError
		de *smithy.DeserializationError
		re *smithyhttp.ResponseError
	)
	if errors.As(err, &ae) {
		_, ok := unsupportedCodes[ae.ErrorCode()]
		return ok
	}
	return errors.As(err, &de) && errors.As(err, &re) && re.HTTPStatusCode() == 400
}

func isUnavailable(err error) bool {
	var (
		mae   *retry.MaxAttemptsError
		quota ratelimit.QuotaExceededError
		ne    net.Error
	)
	switch {
	case errors.As(err, &mae), errors.As(err, &quota), errors.As(err, &ne):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return transient.IsErrorRetryable(err) == aws.TrueTernary
}
