package main

// The admin endpoints the console reads, served on the schema registry's
// listener under the registry's own authentication and ACLs
// (registryHandler): what Kafka's protocol does not carry.
//
//	GET /strata/v1/topics/{topic}/sizes
//
// answers what this broker stores of each partition of topic it hosts: its
// local log's bytes and, for the partitions it leads, the bytes and
// segments the tier manifest references in S3:
//
//	{"topic":"t","partitions":[{"broker":0,"partition":0,"leader":true,
//	  "localBytes":1234,"tiered":true,"tierBytes":999,"tierSegments":2}]}
//
// It needs DESCRIBE on the topic; 404 when this broker hosts nothing of
// it. Each broker answers for itself (dev: for all its brokers); the
// console asks every broker.
//
//	GET /strata/v1/groups/{group}/lag
//
// answers the samples the group's coordinator took of its committed
// offsets and log ends (metrics.Broker.GroupLag: every -group-stats-interval,
// the last metrics.LagHistorySamples of each partition, memory only) as
//
//	{"group":"g","partitions":[{"topic":"t","partition":0,
//	  "samples":[{"atMs":1700000000000,"committed":5,"end":9}, ...]}]}
//
// It needs DESCRIBE on the group, and partitions of topics the caller may
// not DESCRIBE are left out (as OffsetFetch does). A broker that does not
// coordinate the group answers 404: ask the coordinator (FindCoordinator)
// at its host and the registry's port, as the console does. In dev one
// listener answers for every broker of the process.

import (
	"encoding/json"
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/pkg/schemaregistry"
)

type lagHistorySampleJSON struct {
	AtMs      int64 `json:"atMs"`
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
}

type lagHistorySeriesJSON struct {
	Topic     string                 `json:"topic"`
	Partition int32                  `json:"partition"`
	Samples   []lagHistorySampleJSON `json:"samples"`
}

type lagHistoryJSON struct {
	Group      string                 `json:"group"`
	Partitions []lagHistorySeriesJSON `json:"partitions"`
}

type partitionSizeJSON struct {
	Broker       int32 `json:"broker"`
	Partition    int32 `json:"partition"`
	Leader       bool  `json:"leader"`
	LocalBytes   int64 `json:"localBytes"`
	Tiered       bool  `json:"tiered"`
	TierBytes    int64 `json:"tierBytes"`
	TierSegments int   `json:"tierSegments"`
}

type topicSizesJSON struct {
	Topic      string              `json:"topic"`
	Partitions []partitionSizeJSON `json:"partitions"`
}

// adminHandler serves the partition sizes and lag history of brokers.
func adminHandler(brokers []*broker.Broker) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /strata/v1/topics/{topic}/sizes", func(w http.ResponseWriter, r *http.Request) {
		topic := r.PathValue("topic")
		if !schemaregistry.Allowed(r.Context(), kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic) {
			lagError(w, http.StatusForbidden, "not authorized to DESCRIBE topic "+topic)
			return
		}
		out := topicSizesJSON{Topic: topic, Partitions: []partitionSizeJSON{}}
		found := false
		for _, b := range brokers {
			sizes, ok := b.PartitionSizes(topic)
			found = found || ok
			for _, s := range sizes {
				out.Partitions = append(out.Partitions, partitionSizeJSON{Broker: s.Broker, Partition: s.Partition, Leader: s.Leader,
					LocalBytes: s.LocalBytes, Tiered: s.Tiered, TierBytes: s.TierBytes, TierSegments: s.TierSegments})
			}
		}
		if !found {
			lagError(w, http.StatusNotFound, "topic "+topic+" is unknown to this broker")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /strata/v1/groups/{group}/lag", func(w http.ResponseWriter, r *http.Request) {
		group := r.PathValue("group")
		if !schemaregistry.Allowed(r.Context(), kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, group) {
			lagError(w, http.StatusForbidden, "not authorized to DESCRIBE group "+group)
			return
		}
		out := lagHistoryJSON{Group: group, Partitions: []lagHistorySeriesJSON{}}
		found := false
		for _, b := range brokers {
			series, ok := b.GroupLag(group)
			if !ok {
				continue
			}
			found = true
			for _, s := range series {
				if !schemaregistry.Allowed(r.Context(), kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, s.Topic) {
					continue
				}
				js := lagHistorySeriesJSON{Topic: s.Topic, Partition: s.Partition, Samples: make([]lagHistorySampleJSON, len(s.Samples))}
				for i, x := range s.Samples {
					js.Samples[i] = lagHistorySampleJSON{x.At.UnixMilli(), x.Committed, x.End}
				}
				out.Partitions = append(out.Partitions, js)
			}
			break // one coordinator per group
		}
		if !found {
			lagError(w, http.StatusNotFound, "no lag history of group "+group+" here: this broker does not coordinate it, or it has no committed offsets yet")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/strata/", func(w http.ResponseWriter, r *http.Request) {
		lagError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func lagError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": status, "message": msg})
}
