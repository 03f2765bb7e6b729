package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestHeadersRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123e6, time.UTC)
	st := State{
		Attempts: 3, OriginTopic: "orders", OriginPartition: 7, OriginOffset: 12345,
		FirstFailure: at, LastError: "payment declined: <script>", NotBefore: at.Add(time.Minute), Function: "billing",
		History:    []Failure{{1, at, "timeout"}, {2, at.Add(time.Second), "declined"}, {3, at.Add(2 * time.Second), "payment declined: <script>"}},
		ReplayedAt: at.Add(time.Hour), Replays: 1,
	}
	user := []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: HeaderAttempts, Value: []byte("1")}}
	hs := st.Headers(user)
	require.Equal(t, "trace", hs[0].Key, "the record's own headers stay first")
	n := 0
	for _, h := range hs {
		if h.Key == HeaderAttempts {
			n++
		}
	}
	require.Equal(t, 1, n, "old retry headers are replaced, not repeated")
	got, ok, err := Parse(hs)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, st, got)

	_, ok, err = Parse(user[:1])
	require.NoError(t, err)
	require.False(t, ok, "a first delivery has no retry state")
	_, _, err = Parse([]kgo.RecordHeader{{Key: HeaderAttempts, Value: []byte("three")}})
	require.ErrorContains(t, err, HeaderAttempts)
	require.Equal(t, "orders.retry", RetryTopic("orders"))
	require.Equal(t, "orders.dlq", DLQTopic("orders"))
}
