package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The EMF line has exactly the structure and names CloudWatch and the CDK
// stack expect, and its values are the registry's: maxima for lags, sums
// for partition counts, increases since the previous line for counters.
func TestEMFLine(t *testing.T) {
	reg := prometheus.NewRegistry()
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_consumer_group_lag"}, []string{"group", "topic", "partition"})
	under := prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_under_replicated_partitions"})
	offline := prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_offline_partitions"})
	minISR := prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_under_min_isr_partitions"})
	tierLag := prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_tier_upload_lag_seconds"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_request_errors_total"}, []string{"api", "error"})
	produced := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_produce_bytes_total"}, []string{"topic"})
	fetched := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_fetch_bytes_total"}, []string{"topic"})
	reg.MustRegister(lag, under, offline, minISR, tierLag, errs, produced, fetched)

	lag.WithLabelValues("g1", "a", "0").Set(7)
	lag.WithLabelValues("g1", "a", "1").Set(42)
	lag.WithLabelValues("g2", "b", "0").Set(3)
	under.Set(2)
	offline.Set(1)
	minISR.Set(1)
	tierLag.Set(12.5)
	errs.WithLabelValues("Produce", "NOT_LEADER_OR_FOLLOWER").Add(3)
	errs.WithLabelValues("Produce", "REQUEST_TIMED_OUT").Add(1)
	errs.WithLabelValues("Fetch", "OFFSET_OUT_OF_RANGE").Add(5) // not a produce error
	produced.WithLabelValues("a").Add(1000)
	produced.WithLabelValues("b").Add(24)
	fetched.WithLabelValues("a").Add(500)

	e := NewEMF(reg, "prod-eu", 2)
	at := time.UnixMilli(1_700_000_000_123)
	line, err := e.Line(at)
	require.NoError(t, err)
	require.NotContains(t, string(line), "\n")

	var doc map[string]any
	require.NoError(t, json.Unmarshal(line, &doc))
	aws := doc["_aws"].(map[string]any)
	require.Equal(t, float64(1_700_000_000_123), aws["Timestamp"])
	cwm := aws["CloudWatchMetrics"].([]any)
	require.Len(t, cwm, 1)
	directive := cwm[0].(map[string]any)
	require.Equal(t, "Strata", directive["Namespace"])
	require.Equal(t, []any{[]any{"Cluster"}}, directive["Dimensions"])
	require.Equal(t, []any{
		map[string]any{"Name": "MaxConsumerGroupLag", "Unit": "Count"},
		map[string]any{"Name": "UnderReplicatedPartitions", "Unit": "Count"},
		map[string]any{"Name": "OfflinePartitions", "Unit": "Count"},
		map[string]any{"Name": "UnderMinIsrPartitions", "Unit": "Count"},
		map[string]any{"Name": "ProduceErrors", "Unit": "Count"},
		map[string]any{"Name": "ProduceBytes", "Unit": "Bytes"},
		map[string]any{"Name": "FetchBytes", "Unit": "Bytes"},
		map[string]any{"Name": "S3UploadLagSeconds", "Unit": "Seconds"},
		map[string]any{"Name": "ShareRecordsAvailable", "Unit": "Count"},
		map[string]any{"Name": "ShareOldestAvailableAgeSeconds", "Unit": "Seconds"},
	}, directive["Metrics"])
	// Every metric named in the directive has a value at the top level,
	// as does the dimension.
	require.Equal(t, "prod-eu", doc["Cluster"])
	want := map[string]float64{
		"MaxConsumerGroupLag": 42, "UnderReplicatedPartitions": 2, "OfflinePartitions": 1,
		"UnderMinIsrPartitions": 1, "ProduceErrors": 4, "ProduceBytes": 1024, "FetchBytes": 500,
		"S3UploadLagSeconds": 12.5, "ShareRecordsAvailable": 0, "ShareOldestAvailableAgeSeconds": 0,
	}
	for name, v := range want {
		require.Equal(t, v, doc[name], name)
	}

	// The next line reports the counters' increase since this one.
	errs.WithLabelValues("Produce", "NOT_LEADER_OR_FOLLOWER").Add(2)
	produced.WithLabelValues("a").Add(10)
	line, err = e.Line(at.Add(time.Minute))
	require.NoError(t, err)
	doc = map[string]any{}
	require.NoError(t, json.Unmarshal(line, &doc))
	require.Equal(t, 2.0, doc["ProduceErrors"])
	require.Equal(t, 10.0, doc["ProduceBytes"])
	require.Equal(t, 0.0, doc["FetchBytes"])
	require.Equal(t, 42.0, doc["MaxConsumerGroupLag"], "gauges are reported as they are")
}

// With no series at all (a fresh broker) every value is 0, not absent.
func TestEMFLineEmptyRegistry(t *testing.T) {
	line, err := NewEMF(prometheus.NewRegistry(), "c", 0).Line(time.Now())
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(line, &doc))
	for _, m := range emfMetrics {
		require.Equal(t, 0.0, doc[m.Name], m.Name)
	}
}

// Each share group with a partition the broker leads gets a document of
// its own, dimensions Cluster and ShareGroup, with the group's sum of
// available records and its oldest available record's age; the broker's
// document keeps the cluster-wide values.
func TestEMFShareGroupLines(t *testing.T) {
	reg := prometheus.NewRegistry()
	labels := []string{"group", "topic", "partition"}
	avail := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_share_records_available"}, labels)
	oldest := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_share_oldest_available_age_seconds"}, labels)
	reg.MustRegister(avail, oldest)
	avail.WithLabelValues("workers", "jobs", "0").Set(5)
	avail.WithLabelValues("workers", "jobs", "1").Set(7)
	oldest.WithLabelValues("workers", "jobs", "0").Set(30)
	oldest.WithLabelValues("workers", "jobs", "1").Set(90)
	avail.WithLabelValues("mailers", "mail", "0").Set(0)
	oldest.WithLabelValues("mailers", "mail", "0").Set(0)

	at := time.UnixMilli(1_700_000_000_123)
	line, groups, err := NewEMF(reg, "prod-eu", 2).Lines(at)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(line, &doc))
	require.Equal(t, 12.0, doc["ShareRecordsAvailable"])
	require.Equal(t, 90.0, doc["ShareOldestAvailableAgeSeconds"])

	require.Len(t, groups, 2)
	for i, want := range []struct {
		group           string
		available, aged float64
	}{{"mailers", 0, 0}, {"workers", 12, 90}} {
		require.NotContains(t, string(groups[i]), "\n")
		var g map[string]any
		require.NoError(t, json.Unmarshal(groups[i], &g))
		aws := g["_aws"].(map[string]any)
		require.Equal(t, float64(at.UnixMilli()), aws["Timestamp"])
		require.Equal(t, []any{map[string]any{
			"Namespace":  "Strata",
			"Dimensions": []any{[]any{"Cluster", "ShareGroup"}},
			"Metrics": []any{
				map[string]any{"Name": "ShareRecordsAvailable", "Unit": "Count"},
				map[string]any{"Name": "ShareOldestAvailableAgeSeconds", "Unit": "Seconds"},
			},
		}}, aws["CloudWatchMetrics"])
		require.Equal(t, "prod-eu", g["Cluster"])
		require.Equal(t, want.group, g["ShareGroup"])
		require.Equal(t, 2.0, g["Broker"])
		require.Equal(t, want.available, g["ShareRecordsAvailable"], want.group)
		require.Equal(t, want.aged, g["ShareOldestAvailableAgeSeconds"], want.group)
	}

	// No share group, no group documents.
	_, groups, err = NewEMF(prometheus.NewRegistry(), "c", 0).Lines(at)
	require.NoError(t, err)
	require.Empty(t, groups)
}

// lockedBuffer is an io.Writer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }

// Run writes the broker's line, then each share group's, one line each.
func TestEMFRunWritesShareGroupLines(t *testing.T) {
	reg := prometheus.NewRegistry()
	oldest := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_share_oldest_available_age_seconds"}, []string{"group", "topic", "partition"})
	reg.MustRegister(oldest)
	oldest.WithLabelValues("workers", "jobs", "0").Set(4)
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewEMF(reg, "c", 1).Run(ctx, &out, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	require.Eventually(t, func() bool { return strings.Count(out.String(), "\n") >= 4 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-done
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for i, l := range lines[:len(lines)/2*2] {
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &doc), l)
		if i%2 == 0 {
			require.NotContains(t, doc, "ShareGroup", "the broker's line first")
			require.Contains(t, doc, "MaxConsumerGroupLag")
		} else {
			require.Equal(t, "workers", doc["ShareGroup"])
			require.Equal(t, 4.0, doc["ShareOldestAvailableAgeSeconds"])
		}
	}
}
