// Package lambdaenv reads the STRATA_* environment variables of the
// functions' Lambda mains and builds their AWS clients (Lambda, Secrets
// Manager). Errors name the variable at fault.
package lambdaenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Env reads variables, remembering the first error.
type Env struct {
	Lookup func(string) (string, bool) // os.LookupEnv when nil
	Err    error
}

func (e *Env) get(name string) (string, bool) {
	if e.Lookup == nil {
		e.Lookup = os.LookupEnv
	}
	v, ok := e.Lookup(name)
	return strings.TrimSpace(v), ok && strings.TrimSpace(v) != ""
}

func (e *Env) fail(name, v string, err error) {
	if e.Err == nil {
		e.Err = fmt.Errorf("invalid value %q for %s: %v", v, name, err)
	}
}

// String sets *dst from name when set.
func (e *Env) String(dst *string, name string) {
	if v, ok := e.get(name); ok {
		*dst = v
	}
}

// List sets *dst from a comma-separated name when set.
func (e *Env) List(dst *[]string, name string) {
	if v, ok := e.get(name); ok {
		*dst = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*dst = append(*dst, s)
			}
		}
	}
}

// Int sets *dst from name when set.
func (e *Env) Int(dst *int, name string) {
	if v, ok := e.get(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.fail(name, v, err)
			return
		}
		*dst = n
	}
}

// Bool sets *dst from name when set.
func (e *Env) Bool(dst *bool, name string) {
	if v, ok := e.get(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.fail(name, v, err)
			return
		}
		*dst = b
	}
}

// Duration sets *dst from name when set.
func (e *Env) Duration(dst *time.Duration, name string) {
	if v, ok := e.get(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.fail(name, v, err)
			return
		}
		*dst = d
	}
}

// LambdaClient builds the Lambda API client from the default AWS
// configuration, with endpoint (when not empty) as its base endpoint.
func LambdaClient(ctx context.Context, endpoint string) (*lambda.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	return lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// SecretsManagerClient builds the Secrets Manager client from the default
// AWS configuration, with endpoint (when not empty) as its base endpoint.
func SecretsManagerClient(ctx context.Context, endpoint string) (*secretsmanager.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	return secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
