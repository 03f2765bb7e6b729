package main

import (
	"context"
	"fmt"
	"io"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/dynamo"
)

// openDynamo builds the SDK client (the only place outside tests that
// does) and the DynamoDB store.
func (m *metaFlags) openDynamo(ctx context.Context, table string) (*metastore.Meta, io.Closer, error) {
	if table == "" {
		return nil, nil, usageError{fmt.Errorf("invalid value %q for flag -metastore: the table name is empty", m.spec)}
	}
	client, err := dynamo.NewClient(ctx, m.endpoint, m.region, dynamo.DefaultRetries)
	if err != nil {
		return nil, nil, err
	}
	if m.create {
		if err := dynamo.CreateTable(ctx, client, table); err != nil {
			return nil, nil, fmt.Errorf("flag -create-table: %w", err)
		}
	}
	s := dynamo.New(client, table)
	return metastore.New(s), s, nil
}
