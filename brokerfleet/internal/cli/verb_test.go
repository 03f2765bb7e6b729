package cli_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

func TestRunVerbs(t *testing.T) {
	t.Parallel()
	var got []string
	verb := func(name string) cli.Verb {
		return cli.Verb{Name: name, Run: func(_ context.Context, args []string, _, _ io.Writer) error {
			got = append(append(got, name), args...)
			return nil
		}}
	}
	verbs := []cli.Verb{verb("list"), verb("describe"), verb("delete")}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := cli.RunVerbs(context.Background(), "groups", "the help\n", verbs, args, &out, io.Discard)
		return out.String(), err
	}

	_, err := run("describe", "g", "-json")
	require.NoError(t, err)
	require.Equal(t, []string{"describe", "g", "-json"}, got)

	_, err = run()
	require.True(t, cli.IsUsage(err))
	require.EqualError(t, err, "missing verb: want list, describe or delete (see 'brokerfleet groups -help')")
	_, err = run("frob")
	require.True(t, cli.IsUsage(err))
	require.EqualError(t, err, `unknown verb "frob": want list, describe or delete`)
	for _, h := range []string{"help", "-h", "-help", "--help"} {
		out, err := run(h)
		require.NoError(t, err)
		require.Equal(t, "the help\n", out)
	}
}
