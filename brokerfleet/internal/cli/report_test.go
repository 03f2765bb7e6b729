package cli_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

func TestReport(t *testing.T) {
	t.Parallel()
	report := func(json bool, outs ...cli.Outcome) (string, error) {
		args := []string{"-bootstrap", "h:1"}
		if json {
			args = append(args, "-json")
		}
		a := cli.NewAdmin("topics delete", "")
		_, err := a.Parse(args, io.Discard)
		require.NoError(t, err)
		var out bytes.Buffer
		err = a.Report(&out, "topic", "deleted", outs, map[string]int{"n": len(outs)})
		return out.String(), err
	}
	done := cli.Outcome{Name: "a", Done: true}
	created := cli.Outcome{Name: "b", Done: true, Text: "created with 3 partition(s)"}
	missing := cli.Outcome{Name: "c", Error: "it does not exist"}

	out, err := report(false, done, created)
	require.NoError(t, err)
	require.Equal(t, "topic a: deleted\ntopic b: created with 3 partition(s)\n", out)

	out, err = report(false, missing)
	require.EqualError(t, err, "topic c not deleted: it does not exist")
	require.Equal(t, "topic c: not deleted: it does not exist\n", out)

	out, err = report(true, done, missing, missing)
	require.EqualError(t, err, "2 of 3 topics not deleted")
	require.Equal(t, "{\n  \"n\": 3\n}\n", out, "-json prints the document instead")
}
