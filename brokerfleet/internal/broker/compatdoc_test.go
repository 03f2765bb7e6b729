package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiNotes says what a served API does not do as Kafka does, for
// docs/compatibility.md. A key absent here is served as Kafka serves it
// at the versions listed.
var apiNotes = map[int16]string{
	0:  "acks 0, 1 and all; idempotent producers (5 batches deduplicated per producer and partition); transactional batches verified with their coordinator (KIP-890 part 1); v12 (transaction version 2) not served",
	1:  "long poll, fetch sessions (KIP-227), reading from an in-sync follower in the consumer's rack (KIP-392), topics by id (v13, KIP-516); v14+ not served",
	2:  "earliest, latest, by timestamp, max timestamp, isolation level; answered by partition leaders only; v0 (for older clients such as Burrow 1.2) answers one offset, not Kafka 3's list of segment offsets",
	8:  "v2-v4 retention time is ignored (offsets are kept while the group lives); v9 fences consumer-protocol members by member epoch (KIP-848, KIP-1251); v10 (topic ids) not served",
	9:  "v9 checks a consumer-protocol member's epoch; v10 (topic ids) not served",
	19: "manual replica assignment refused (INVALID_REQUEST): replicas are placed by the cluster",
	21: "moves the leader's log start only: followers do not learn it, so a new leader may serve the deleted records until retention removes them",
	22: "idempotent and transactional producers, epoch bumps fencing older instances, KIP-360 recovery",
	24: "v0-3 from producers, v4 verification between brokers (KIP-890 part 1)",
	26: "v5 (transaction version 2, KIP-890 part 2) not served",
	48: "user and client-id entities; ip entities refused (INVALID_REQUEST)",
	49: "producer_byte_rate, consumer_byte_rate, request_percentage; ip entities and controller_mutation_rate refused (INVALID_REQUEST)",
	68: "uniform and range assignors, topic-list and RE2 regex subscriptions, static members, online migration with classic groups; per-group consumer.session.timeout.ms and consumer.heartbeat.interval.ms overrides not served; no rack-aware assignment",
}

const (
	compatBegin = "<!-- api-table:begin (generated from the route registry by TestCompatibilityDoc) -->"
	compatEnd   = "<!-- api-table:end -->"
)

// compatTable is the generated part of docs/compatibility.md: every
// advertised key with the versions served, the newest version franz-go's
// kmsg knows, and its note.
func compatTable() string {
	var b strings.Builder
	b.WriteString("| Key | API | Versions served | Newest known to kmsg | Notes |\n")
	b.WriteString("|----:|-----|-----------------|---------------------:|-------|\n")
	for _, k := range apiVersions() {
		newest := "?"
		if req := kmsg.RequestForKey(k.ApiKey); req != nil {
			newest = fmt.Sprint(req.MaxVersion())
		}
		note := apiNotes[k.ApiKey]
		if routes[k.ApiKey].public {
			note = strings.TrimPrefix(note+"; served before authentication", "; ")
		}
		fmt.Fprintf(&b, "| %d | %s | %d-%d | %s | %s |\n", k.ApiKey, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, newest, note)
	}
	return b.String()
}

// TestCompatibilityDoc: the API table of docs/compatibility.md is what the
// route registry serves, so the page cannot drift from the broker. Run
// with STRATA_UPDATE_DOCS=1 to rewrite the table after changing a route.
func TestCompatibilityDoc(t *testing.T) {
	for key := range apiNotes {
		require.NotNil(t, routes[key], "apiNotes names key %d (%s), which is not served", key, kmsg.NameForKey(key))
	}
	path := filepath.Join("..", "..", "..", "docs", "compatibility.md")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(raw)
	i, j := strings.Index(doc, compatBegin), strings.Index(doc, compatEnd)
	require.True(t, i >= 0 && j > i, "%s has no %q ... %q markers", path, compatBegin, compatEnd)
	want := doc[:i+len(compatBegin)] + "\n" + compatTable() + doc[j:]
	if os.Getenv("STRATA_UPDATE_DOCS") != "" {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	require.Equal(t, want, doc, "docs/compatibility.md is stale: run STRATA_UPDATE_DOCS=1 go test -run TestCompatibilityDoc ./brokerfleet/internal/broker/")
}
