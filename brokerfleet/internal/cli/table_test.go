package cli_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

func TestTableAlignsColumns(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tw := cli.NewTable(&buf)
	tw.Row("TOPIC", "PARTITIONS", "LAG")
	tw.Row("orders", "12", cli.Int64(nil))
	tw.Row("a", "1", "7")
	require.Empty(t, buf.String(), "nothing is written before Flush")
	require.NoError(t, tw.Flush())
	require.Equal(t, ""+
		"TOPIC   PARTITIONS  LAG\n"+
		"orders  12          -\n"+
		"a       1           7\n", buf.String())
}

func TestTableEmptyRowStartsNewColumns(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tw := cli.NewTable(&buf)
	tw.Row("a-long-cell", "x")
	tw.Row()
	tw.Row("b", "y")
	require.NoError(t, tw.Flush())
	require.Equal(t, "a-long-cell  x\n\nb  y\n", buf.String())
}

func TestCells(t *testing.T) {
	t.Parallel()
	v := int64(-3)
	require.Equal(t, "-", cli.Dash(""))
	require.Equal(t, "x", cli.Dash("x"))
	require.Equal(t, "-", cli.Int64(nil))
	require.Equal(t, "-3", cli.Int64(&v))
	require.Equal(t, "-", cli.Int32s(nil))
	require.Equal(t, "2,0,1", cli.Int32s([]int32{2, 0, 1}))
}

func TestWriteJSONIndents(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, cli.WriteJSON(&buf, struct {
		Topics []string `json:"topics"`
		Lag    *int64   `json:"lag"`
	}{Topics: []string{"a", "b"}}))
	require.Equal(t, "{\n  \"topics\": [\n    \"a\",\n    \"b\"\n  ],\n  \"lag\": null\n}\n", buf.String())
}

func TestPrintChoosesJSONOrText(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	text := func() error {
		buf.WriteString("text\n")
		return errors.New("from text")
	}
	require.EqualError(t, cli.Print(&buf, false, map[string]int{"n": 1}, text), "from text")
	require.Equal(t, "text\n", buf.String())

	buf.Reset()
	require.NoError(t, cli.Print(&buf, true, map[string]int{"n": 1}, text))
	require.Equal(t, "{\n  \"n\": 1\n}\n", buf.String())
}
