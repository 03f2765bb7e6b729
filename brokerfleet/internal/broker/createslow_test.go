package broker_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/segment"
)

// gatedMkdirFS holds every directory made for a topic named slow-* until
// open is closed (a disk that takes long to open a large topic's
// partition logs).
type gatedMkdirFS struct {
	segment.FS
	open chan struct{}
}

func (f *gatedMkdirFS) MkdirAll(path string, perm os.FileMode) error {
	if strings.Contains(path, "slow-") {
		<-f.open
	}
	return f.FS.MkdirAll(path, perm)
}

// TestCreateTopicBeforeItsLogsOpen: CreateTopics answers success once
// the topic is created, without waiting for this broker to open its
// partition logs when that takes long (Kafka answers once its controller
// committed the topic): a client waiting longer than its request timeout
// would retry into TOPIC_ALREADY_EXISTS, as a 4,000-partition topic did.
// The partitions get their leader once their logs open.
func TestCreateTopicBeforeItsLogsOpen(t *testing.T) {
	fs := &gatedMkdirFS{FS: segment.NewMemFS(), open: make(chan struct{})}
	var release sync.Once
	defer release.Do(func() { close(fs.open) })
	b := brokertest.Start(t, func(c *broker.Config) { c.FS, c.DataDir = fs, "/data" })
	adm := brokertest.Admin(t, b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The logs stay unopened until the answer came: waiting for them
	// would run into this deadline.
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	r, err := adm.CreateTopic(cctx, 2, 1, nil, "slow-topic")
	ccancel()
	require.NoError(t, err)
	require.NoError(t, r.Err, "created, though its partitions are not open yet")
	release.Do(func() { close(fs.open) })
	require.Eventually(t, func() bool {
		md, err := adm.Metadata(ctx, "slow-topic")
		if err != nil || len(md.Topics["slow-topic"].Partitions) != 2 {
			return false
		}
		for _, p := range md.Topics["slow-topic"].Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond)
}
