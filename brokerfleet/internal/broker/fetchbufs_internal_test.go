package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchBufsReuse: a buffer grown by a read goes back to the pool at
// its new size once the answer is written, and an idle partition takes
// none.
func TestFetchBufsReuse(t *testing.T) {
	var bs fetchBufs
	_, took := bs.take(5, 5)
	require.False(t, took, "nothing to read: no buffer")
	require.Empty(t, bs.pooled)
	buf, took := bs.take(0, 10)
	require.True(t, took)
	data := append(buf, make([]byte, 1<<20)...) // the read grew it
	bs.keep(took, data)
	require.Len(t, bs.pooled, 1)
	require.Equal(t, cap(data), cap(*bs.pooled[0]), "the grown array is the one pooled")
	resp := kmsg.NewPtrFetchResponse()
	bs.sendWith(resp)
	_, registered := pooledAnswers.Load(resp)
	require.True(t, registered)
	answered(resp)
	_, registered = pooledAnswers.Load(resp)
	require.False(t, registered, "released once written")
}
