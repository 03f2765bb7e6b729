package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// TestKcatProduceConsume drives librdkafka through kcat: a file of keyed
// lines in, the same lines out, per-key order kept.
func TestKcatProduceConsume(t *testing.T) {
	kcat := brokertest.RequireTool(t, "kcat")
	b := brokertest.Start(t)
	const topicName = "kcat-lines"
	brokertest.CreateTopic(t, b.Addr, topicName, 3, nil)

	var in bytes.Buffer
	const n = 5000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "key%02d:line %05d %s\n", i%17, i, strings.Repeat("x", i%50))
	}
	file := filepath.Join(t.TempDir(), "lines.txt")
	require.NoError(t, os.WriteFile(file, in.Bytes(), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, "-b", b.Addr, "-t", topicName, "-P", "-K:", "-l",
		"-X", "acks=all", "-X", "enable.idempotence=true", file).CombinedOutput()
	require.NoError(t, err, "kcat produce: %s", out)

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kcat, "-b", b.Addr, "-t", topicName, "-C", "-e", "-q", "-o", "beginning", "-f", "%k:%s\n")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kcat consume: %s", stderr.String())

	wantLines := strings.Split(strings.TrimSuffix(in.String(), "\n"), "\n")
	gotLines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	require.Len(t, gotLines, n)
	// Per key, order is kept (a key maps to one partition).
	perKey := func(lines []string) map[string][]string {
		m := map[string][]string{}
		for _, l := range lines {
			k, _, _ := strings.Cut(l, ":")
			m[k] = append(m[k], l)
		}
		return m
	}
	require.Equal(t, perKey(wantLines), perKey(gotLines))
	sort.Strings(wantLines)
	sort.Strings(gotLines)
	require.Equal(t, wantLines, gotLines)
}
