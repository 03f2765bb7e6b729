package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratamq/strata/pkg/latency"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// metaFlags select the control-plane store.
type metaFlags struct {
	spec     string // "embedded", "embedded:PATH" or "dynamodb://TABLE"
	endpoint string
	region   string
	create   bool
	// latency, for the embedded store only: what each request waits
	// first (dev's -metastore-latency, the bench's latency models).
	latency *latency.Injector
}

func (m *metaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.spec, "metastore", "embedded", "control-plane store: embedded (a file under -data), embedded:PATH, or dynamodb://TABLE")
	fs.StringVar(&m.endpoint, "aws-endpoint", "", "AWS endpoint override for DynamoDB and S3 (LocalStack; dynalite with -metastore dynamodb://...); empty for AWS")
	fs.StringVar(&m.region, "aws-region", "", "AWS region for DynamoDB (default: the SDK's, else us-east-1 with an endpoint override)")
	fs.BoolVar(&m.create, "create-table", false, "create the DynamoDB table if it does not exist (for local runs; in AWS the CDK app creates it)")
}

// open returns the store described by the flags.
func (m *metaFlags) open(ctx context.Context, dataDir string) (*metastore.Meta, io.Closer, error) {
	switch {
	case m.spec == "embedded" || strings.HasPrefix(m.spec, "embedded:"):
		path := strings.TrimPrefix(strings.TrimPrefix(m.spec, "embedded"), ":")
		if path == "" {
			path = filepath.Join(dataDir, "metastore.db")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, nil, fmt.Errorf("flag -metastore: %w", err)
		}
		s, err := embedded.Open(path)
		if err != nil {
			return nil, nil, err
		}
		if m.latency != nil {
			return metastore.New(metastore.NewDelayed(s, m.latency)), s, nil
		}
		return metastore.New(s), s, nil
	case strings.HasPrefix(m.spec, "dynamodb://"):
		return m.openDynamo(ctx, strings.TrimPrefix(m.spec, "dynamodb://"))
	}
	return nil, nil, usageError{fmt.Errorf("invalid value %q for flag -metastore: want embedded, embedded:PATH or dynamodb://TABLE", m.spec)}
}
