package s3store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stratamq/strata/pkg/objstore"
)

var transient = retry.IsErrorRetryables(append(append([]retry.IsErrorRetryable{}, retry.DefaultRetryables...),
	retry.RetryableErrorCode{Codes: transientCodes}))

// classify maps an SDK error of operation op ("put k") onto objstore's
// sentinels, keeping the cause.
func classify(op string, err error) error {
	switch {
	case isStatus(err, http.StatusPreconditionFailed) || isCode(err, "PreconditionFailed"):
		return fmt.Errorf("%s: %w", op, objstore.ErrExists)
	case isNoSuchKey(err):
		return fmt.Errorf("%s: %w", op, objstore.ErrNotFound)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", op, err)
	case isUnavailable(err):
		return fmt.Errorf("%s: %w: %w", op, objstore.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isNoSuchKey reports a missing object, as opposed to a missing bucket
// (also a 404, but a configuration error callers must not mistake for an
// absent object).
func isNoSuchKey(err error) bool {
	var (
		nsk *types.NoSuchKey
		nf  *types.NotFound
	)
	return errors.As(err, &nsk) || errors.As(err, &nf) || isCode(err, "NoSuchKey")
}

func isCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

func isStatus(err error, status int) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == status
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
