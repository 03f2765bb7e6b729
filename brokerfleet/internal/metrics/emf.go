package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CloudWatch Embedded Metric Format (EMF): one JSON line per interval on
// stdout, which the awslogs driver ships to CloudWatch Logs, where the
// "_aws" member turns it into metrics. The namespace, dimension and metric
// names are what the CDK stack's alarms and dashboard use; keep them
// exact. Every value is read from the broker's Prometheus registry, so the
// two views cannot disagree.
//
// Each broker writes its own line with the one dimension Cluster: the
// partition counts, bytes and errors are this broker's share (sum them
// over the brokers, CloudWatch statistic Sum), the lags are its maxima
// (statistic Maximum). Offline partitions come from the controller alone.
const (
	// EMFNamespace is the CloudWatch namespace of the broker metrics.
	EMFNamespace = "Strata"
	// EMFDimension is the one dimension, whose value is the cluster id.
	EMFDimension = "Cluster"
)

// The metrics of an EMF line, in order, with their CloudWatch units.
var emfMetrics = []emfMetric{
	{Name: "MaxConsumerGroupLag", Unit: "Count"},
	{Name: "UnderReplicatedPartitions", Unit: "Count"},
	{Name: "OfflinePartitions", Unit: "Count"},
	{Name: "UnderMinIsrPartitions", Unit: "Count"},
	{Name: "ProduceErrors", Unit: "Count"},
	{Name: "ProduceBytes", Unit: "Bytes"},
	{Name: "FetchBytes", Unit: "Bytes"},
	{Name: "S3UploadLagSeconds", Unit: "Seconds"},
	{Name: "ShareRecordsAvailable", Unit: "Count"},
	{Name: "ShareOldestAvailableAgeSeconds", Unit: "Seconds"},
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// emfLine is one EMF document. Broker is a property, not a dimension: it
// lets a log query find which broker wrote a line without multiplying the
// metrics.
type emfLine struct {
	AWS                       emfMeta `json:"_aws"`
	Cluster                   string  `json:"Cluster"`
	Broker                    int32   `json:"Broker"`
	MaxConsumerGroupLag       float64 `json:"MaxConsumerGroupLag"`
	UnderReplicatedPartitions float64 `json:"UnderReplicatedPartitions"`
	OfflinePartitions         float64 `json:"OfflinePartitions"`
	UnderMinIsrPartitions     float64 `json:"UnderMinIsrPartitions"`
	ProduceErrors             float64 `json:"ProduceErrors"`
	ProduceBytes              float64 `json:"ProduceBytes"`
	FetchBytes                float64 `json:"FetchBytes"`
	S3UploadLagSeconds        float64 `json:"S3UploadLagSeconds"`
	// Over the share partitions this broker leads: records available
	// (summed) and the oldest available record's age (the largest).
	ShareRecordsAvailable          float64 `json:"ShareRecordsAvailable"`
	ShareOldestAvailableAgeSeconds float64 `json:"ShareOldestAvailableAgeSeconds"`
}

// EMF renders EMF lines from a registry. The counters (errors, bytes) are
// reported as their increase since the previous line; the first line
// reports their increase since zero. Not safe for concurrent use.
type EMF struct {
	g       prometheus.Gatherer
	cluster string
	broker  int32
	prev    emfTotals
}

// emfTotals are the counters an EMF line reports the increase of.
type emfTotals struct {
	produceErrors, produceBytes, fetchBytes float64
}

// NewEMF returns an EMF renderer over a broker's registry.
func NewEMF(g prometheus.Gatherer, cluster string, broker int32) *EMF {
	return &EMF{g: g, cluster: cluster, broker: broker}
}

// EMFShareGroupDimension is the second dimension of the share group
// documents: the group's name.
const EMFShareGroupDimension = "ShareGroup"

// The metrics of a share group's document: over the group's share
// partitions this broker leads, records available (summed) and the
// oldest available record's age (the largest). The CDK stack's per-group
// alarms read them with the dimensions Cluster and ShareGroup.
var emfShareMetrics = []emfMetric{
	{Name: "ShareRecordsAvailable", Unit: "Count"},
	{Name: "ShareOldestAvailableAgeSeconds", Unit: "Seconds"},
}

// emfShareLine is one share group's EMF document.
type emfShareLine struct {
	AWS                            emfMeta `json:"_aws"`
	Cluster                        string  `json:"Cluster"`
	ShareGroup                     string  `json:"ShareGroup"`
	Broker                         int32   `json:"Broker"`
	ShareRecordsAvailable          float64 `json:"ShareRecordsAvailable"`
	ShareOldestAvailableAgeSeconds float64 `json:"ShareOldestAvailableAgeSeconds"`
}

// Line gathers the registry and returns one EMF JSON document stamped now,
// without a trailing newline.
func (e *EMF) Line(now time.Time) ([]byte, error) {
	line, _, err := e.Lines(now)
	return line, err
}

// Lines gathers the registry once and returns the broker's EMF document
// (Line's) and one document per share group with a share partition this
// broker leads, in group order, stamped now, without trailing newlines.
// A group's documents stop when this broker leads none of its
// partitions; another broker's take over.
func (e *EMF) Lines(now time.Time) ([]byte, [][]byte, error) {
	fams, err := e.g.Gather()
	if err != nil && len(fams) == 0 {
		return nil, nil, fmt.Errorf("gather metrics: %w", err)
	}
	shares := map[string]*emfShareLine{}
	share := func(group string) *emfShareLine {
		sl, ok := shares[group]
		if !ok {
			sl = &emfShareLine{
				AWS: emfMeta{Timestamp: now.UnixMilli(), CloudWatchMetrics: []emfDirective{{
					Namespace: EMFNamespace, Dimensions: [][]string{{EMFDimension, EMFShareGroupDimension}}, Metrics: emfShareMetrics,
				}}},
				Cluster: e.cluster, ShareGroup: group, Broker: e.broker,
			}
			shares[group] = sl
		}
		return sl
	}
	// A partial gather (one collector failed) still yields a line.
	var cur emfTotals
	l := emfLine{
		AWS: emfMeta{Timestamp: now.UnixMilli(), CloudWatchMetrics: []emfDirective{{
			Namespace: EMFNamespace, Dimensions: [][]string{{EMFDimension}}, Metrics: emfMetrics,
		}}},
		Cluster: e.cluster,
		Broker:  e.broker,
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			}
			switch f.GetName() {
			case "strata_consumer_group_lag":
				l.MaxConsumerGroupLag = max(l.MaxConsumerGroupLag, v)
			case "strata_under_replicated_partitions":
				l.UnderReplicatedPartitions += v
			case "strata_offline_partitions":
				l.OfflinePartitions += v
			case "strata_under_min_isr_partitions":
				l.UnderMinIsrPartitions += v
			case "strata_share_records_available":
				l.ShareRecordsAvailable += v
				share(label(m.GetLabel(), "group")).ShareRecordsAvailable += v
			case "strata_share_oldest_available_age_seconds":
				l.ShareOldestAvailableAgeSeconds = max(l.ShareOldestAvailableAgeSeconds, v)
				sl := share(label(m.GetLabel(), "group"))
				sl.ShareOldestAvailableAgeSeconds = max(sl.ShareOldestAvailableAgeSeconds, v)
			case "strata_tier_upload_lag_seconds":
				l.S3UploadLagSeconds = max(l.S3UploadLagSeconds, v)
			case "strata_produce_bytes_total":
				cur.produceBytes += v
			case "strata_fetch_bytes_total":
				cur.fetchBytes += v
			case "strata_request_errors_total":
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "api" && lp.GetValue() == "Produce" {
						cur.produceErrors += v
					}
				}
			}
		}
	}
	// A counter that went down (a series dropped) reports 0, not a
	// negative increase.
	l.ProduceErrors = max(0, cur.produceErrors-e.prev.produceErrors)
	l.ProduceBytes = max(0, cur.produceBytes-e.prev.produceBytes)
	l.FetchBytes = max(0, cur.fetchBytes-e.prev.fetchBytes)
	e.prev = cur
	line, err := json.Marshal(l)
	if err != nil {
		return nil, nil, err
	}
	var groups [][]byte
	for _, g := range slices.Sorted(maps.Keys(shares)) {
		b, err := json.Marshal(shares[g])
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, b)
	}
	return line, groups, nil
}

// label is the value of the label name among labels ("" without it).
func label[L interface {
	GetName() string
	GetValue() string
}](labels []L, name string) string {
	for _, lp := range labels {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// Run writes the EMF lines of Lines to w every interval until ctx ends,
// the broker's first. Each line is one Write call, so lines of several brokers sharing w (if w serializes
// writes) do not interleave.
func (e *EMF) Run(ctx context.Context, w io.Writer, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval) // EMF timestamps are wall time by definition
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			line, groups, err := e.Lines(now)
			if err != nil {
				log.Warn("emf: render metrics", "err", err)
				continue
			}
			for _, l := range append([][]byte{line}, groups...) {
				if _, err := w.Write(append(l, '\n')); err != nil {
					log.Warn("emf: write metrics", "err", err)
					break
				}
			}
		}
	}
}
