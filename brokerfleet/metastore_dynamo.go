package main

import (
	"context"
	"fmt"
	"io"

	"github.com/stratamq/strata/pkg/metastore"
)

func (m *metaFlags) openDynamo(ctx context.Context, table string) (*metastore.Meta, io.Closer, error) {
	return nil, nil, fmt.Errorf("dynamodb metastore %q: not wired yet", table)
}
