package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

func TestLagBadInput(t *testing.T) {
	t.Parallel()
	checkBadInput(t, []badInputCase{
		{"argument", []string{"lag", "", "billing"}, []string{`unexpected argument "billing"`, "-group"}},
		{"zero interval", []string{"lag", "", "-watch", "0s"}, []string{"flag -watch"}},
		{"bad interval", []string{"lag", "", "-watch", "often"}, []string{"flag -watch", `"often"`}},
		{"unknown flag", []string{"lag", "", "-frob"}, []string{"-frob"}},
	})
}

// lagEnv is one broker with orders (partition 0: 10 records, 1: 6) and
// two groups: billing committed 4 and 6 (lag 6 + 0), audit committed 10 on
// partition 0 only (lag 0).
func lagEnv(t *testing.T) *adminEnv {
	e := newAdminEnv(t, 1)
	e.createTopic("orders", 2, 1, nil)
	e.produce("orders", 0, 10)
	e.produce("orders", 1, 6)
	for group, os := range map[string]map[int32]int64{"billing": {0: 4, 1: 6}, "audit": {0: 10}} {
		var ko kadm.Offsets
		for p, at := range os {
			ko.AddOffset("orders", p, at, -1)
		}
		require.NoError(t, e.adm.CommitAllOffsets(e.ctx, group, ko))
	}
	return e
}

func TestGoldenLag(t *testing.T) {
	t.Parallel()
	e := lagEnv(t)
	golden(t, "lag", e.mustRun("lag", "", "-once"))
	// Standard output is not a terminal here: without -once or -watch,
	// the view is printed once too.
	golden(t, "lag_billing", e.mustRun("lag", "", "-group", "billing"))

	code, out, errOut := e.run("lag", "", "-once", "-group", "billing,nosuch")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "group nosuch does not exist (flag -group)")
}

func TestLagJSON(t *testing.T) {
	t.Parallel()
	e := lagEnv(t)
	var doc lagJSON
	out := e.mustRun("lag", "", "--once", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.WithinDuration(t, time.Now(), doc.Time, time.Minute)
	require.Equal(t, int64(6), doc.TotalLag)
	require.Equal(t, []lagGroupJSON{
		{Group: "audit", State: "Empty", TotalLag: i64p(0), Partitions: []lagPartitionJSON{
			{Topic: "orders", Partition: 0, CurrentOffset: i64p(10), LogEndOffset: i64p(10), Lag: i64p(0)},
			{Topic: "orders", Partition: 1, LogEndOffset: i64p(6)}, // a partition of a topic it commits to
		}},
		{Group: "billing", State: "Empty", TotalLag: i64p(6), Partitions: []lagPartitionJSON{
			{Topic: "orders", Partition: 0, CurrentOffset: i64p(4), LogEndOffset: i64p(10), Lag: i64p(6)},
			{Topic: "orders", Partition: 1, CurrentOffset: i64p(6), LogEndOffset: i64p(6), Lag: i64p(0)},
		}},
	}, doc.Groups)

	// No groups at all.
	empty := newAdminEnv(t, 1)
	out = empty.mustRun("lag", "", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Empty(t, doc.Groups)
	require.Equal(t, "no groups\n", empty.mustRun("lag", "", "-once"))
}

// TestLagWatch runs the live view with an explicit -watch on a standard
// output that is not a terminal: views are appended, without ANSI codes,
// until the context ends; new records show up in later views.
func TestLagWatch(t *testing.T) {
	t.Parallel()
	e := lagEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runLag(ctx, []string{"-bootstrap", e.brokers[0].Addr, "-group", "billing", "-watch", "100ms"}, &out, io.Discard)
	}()
	require.Eventually(t, func() bool { return strings.Count(out.String(), "lag every 100ms at ") >= 2 }, 10*time.Second, 20*time.Millisecond)
	e.produce("orders", 1, 3)
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(tableRows(out.String(), "billing"), func(r []string) bool {
			return slices.Equal(r, []string{"billing", "Empty", "0", "9"})
		})
	}, 10*time.Second, 20*time.Millisecond, out.String())
	cancel()
	require.NoError(t, <-done)
	require.NotContains(t, out.String(), "\x1b[")

	// -json with -watch: a stream of documents.
	ctx, cancel = context.WithCancel(context.Background())
	var jout lockedBuffer
	go func() {
		done <- runLag(ctx, []string{"-bootstrap", e.brokers[0].Addr, "-watch", "100ms", "-json"}, &jout, io.Discard)
	}()
	require.Eventually(t, func() bool {
		return strings.Count(jout.String(), `"totalLag": 9,`) >= 1 && strings.Count(jout.String(), "\n}\n") >= 2
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	dec := json.NewDecoder(strings.NewReader(jout.String()))
	n := 0
	for dec.More() {
		var doc lagJSON
		require.NoError(t, dec.Decode(&doc))
		require.Len(t, doc.Groups, 2)
		n++
	}
	require.GreaterOrEqual(t, n, 2)
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
