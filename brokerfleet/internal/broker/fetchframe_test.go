package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stratamq/strata/brokerfleet/internal/wire"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchFrameMatchesKmsg: for every Fetch version, the frame written
// from pieces is byte for byte the frame kmsg encodes, with small and
// large record sets, empty ones, errors and tagged fields mixed, and the
// response is left unchanged.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	set := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	for v := int16(0); v <= (&kmsg.FetchResponse{}).MaxVersion(); v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			resp.SessionID = 7
			sizes := [][]int{{0, 100, vectorMinBytes, 200 << 10}, {vectorMinBytes - 1, 1 << 20}, {0}, {300 << 10, 300 << 10}}
			for ti, ps := range sizes {
				st := kmsg.NewFetchResponseTopic()
				st.Topic = fmt.Sprintf("topic-%d", ti)
				st.TopicID[0] = byte(ti + 1)
				for pi, n := range ps {
					sp := kmsg.NewFetchResponseTopicPartition()
					sp.Partition = int32(pi)
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = 1000, 1000, 10
					sp.RecordBatches = set(n)
					if pi == 1 {
						sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = 2, 9
						sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = 3, 77
					}
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			want := wire.AppendResponse(nil, 42, resp)
			before := wire.AppendResponse(nil, 42, resp)

			pieces, _, ok := fetchFrame(make([]byte, 0, 16), 42, resp, nil)
			require.True(t, ok)
			var got bytes.Buffer
			err := writePieces(&got, pieces)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got.Bytes()), "frame differs: %d vs %d bytes", len(want), got.Len())
			require.True(t, bytes.Equal(before, wire.AppendResponse(nil, 42, resp)), "fetchFrame changed the response")
		})
	}
}

// TestFetchFrameSmallSetsAreCopied: a response with no large record set
// goes the ordinary way.
func TestFetchFrameSmallSetsAreCopied(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	st := kmsg.NewFetchResponseTopic()
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.RecordBatches = make([]byte, 100)
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	_, _, ok := fetchFrame(nil, 1, resp, nil)
	require.False(t, ok)
}

func BenchmarkFetchResponseWrite(b *testing.B) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	for ti := 0; ti < 12; ti++ {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = fmt.Sprintf("topic-%d", ti)
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.RecordBatches = make([]byte, 1<<20)
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
	}
	b.Run("kmsg-copy", func(b *testing.B) {
		var buf []byte
		b.SetBytes(12 << 20)
		for b.Loop() {
			buf = wire.AppendResponse(buf[:0], 1, resp)
		}
	})
	b.Run("vectored", func(b *testing.B) {
		var buf []byte
		b.SetBytes(12 << 20)
		for b.Loop() {
			var ok bool
			if _, buf, ok = fetchFrame(buf, 1, resp, nil); !ok {
				b.Fatal("not vectored")
			}
		}
	})
}
