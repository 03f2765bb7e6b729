package cli

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProgressBar(t *testing.T) {
	t.Parallel()
	require.Equal(t, "[>                   ]", progressBar(0, 14))
	require.Equal(t, "[==========>         ]", progressBar(7, 14))
	require.Equal(t, "[====================]", progressBar(14, 14))
	require.Equal(t, "[====================]", progressBar(0, 0))
	require.Equal(t, "[===================>]", progressBar(99, 100))

	// Not a terminal: one line per change, no carriage returns.
	var buf bytes.Buffer
	p := NewProgress(&buf)
	p.Update(0, 2, "partitions reassigned")
	p.Update(0, 2, "partitions reassigned")
	p.Update(1, 2, "partitions reassigned")
	p.Update(2, 2, "partitions reassigned")
	p.Finish()
	require.Equal(t, "[>                   ] 0/2 partitions reassigned\n"+
		"[==========>         ] 1/2 partitions reassigned\n"+
		"[====================] 2/2 partitions reassigned\n", buf.String())
	require.NotContains(t, buf.String(), "\r")

	// A terminal redraws in place.
	p = &Progress{w: &buf, tty: true}
	buf.Reset()
	p.Update(1, 2, "long text here")
	p.Update(2, 2, "short")
	p.Finish()
	require.Equal(t, "\r[==========>         ] 1/2 long text here\r[====================] 2/2 short         \n", buf.String())
}
