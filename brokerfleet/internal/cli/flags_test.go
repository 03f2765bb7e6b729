package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

func TestParseTakesFlagsBetweenArguments(t *testing.T) {
	t.Parallel()
	fs := cli.NewFlagSet("topics describe", "help\n")
	yes := fs.Bool("yes", false, "")
	pos, err := cli.Parse(fs, []string{"a", "-yes", "b", "--", "-c", "d"}, io.Discard)
	require.NoError(t, err)
	require.True(t, *yes)
	require.Equal(t, []string{"a", "b", "-c", "d"}, pos, `"--" ends the flags`)
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs := cli.NewFlagSet("groups list", "usage: brokerfleet groups list\n")
	fs.Int("limit", 1, "the `N` to show")
	_, err := cli.Parse(fs, []string{"-help"}, &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), "usage: brokerfleet groups list\n  -limit N", "help, then the flags")

	for _, args := range [][]string{{"-frob"}, {"-limit", "many"}} {
		_, err = cli.Parse(fs, args, io.Discard)
		require.True(t, cli.IsUsage(err), "%v: %v", args, err)
		require.Contains(t, err.Error(), args[0])
	}
}

func TestIsSetAndSource(t *testing.T) {
	t.Setenv("STRATA_CLI_TEST", "from-env")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	v := fs.String("console", cli.Getenv("STRATA_CLI_TEST", "def"), "")
	require.Equal(t, "from-env", *v, "the variable sets the default")
	require.NoError(t, fs.Parse(nil))
	require.False(t, cli.IsSet(fs, "console"))
	require.Equal(t, "STRATA_CLI_TEST", cli.Source(fs, "console", "STRATA_CLI_TEST"))
	require.NoError(t, fs.Parse([]string{"-console", "x"}))
	require.True(t, cli.IsSet(fs, "console"))
	require.Equal(t, "flag -console", cli.Source(fs, "console", "STRATA_CLI_TEST"))

	t.Setenv("STRATA_CLI_TEST", "")
	require.Equal(t, "def", cli.Getenv("STRATA_CLI_TEST", "def"), "empty is unset")
}

func TestArgumentHelpers(t *testing.T) {
	t.Parallel()
	require.NoError(t, cli.NoArgs(nil))
	err := cli.NoArgs([]string{"g", "h"})
	require.True(t, cli.IsUsage(err))
	require.EqualError(t, err, `unexpected argument "g"`)

	names, err := cli.Names([]string{"b", "a", "b"}, "name a group")
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a"}, names)
	_, err = cli.Names(nil, "name at least one group (100%)")
	require.True(t, cli.IsUsage(err))
	require.EqualError(t, err, "name at least one group (100%)")

	var s cli.Strings
	require.NoError(t, s.Set("a, b,,c"))
	require.NoError(t, s.Set("a"))
	require.Equal(t, cli.Strings{"a", "b", "c", "a"}, s)
	require.Equal(t, "a,b,c,a", s.String())
	require.Equal(t, []string{"a", "b", "c"}, cli.Distinct(s))
}

func TestErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{cli.BadFlag("type", "dirty", "want preferred or unclean"), `invalid value "dirty" for flag -type: want preferred or unclean`},
		{cli.BadFlag("partitions", 0, "want at least 1"), `invalid value 0 for flag -partitions: want at least 1`},
		{cli.Positive("interval", 0), `invalid value 0s for flag -interval: must be positive`},
		{cli.Invalid("STRATA_BOOTSTRAP", "x", "want host:port"), `invalid value "x" for STRATA_BOOTSTRAP: want host:port`},
		{cli.Usagef("%d of %d", 1, 2), "1 of 2"},
	} {
		require.EqualError(t, c.err, c.want)
		require.True(t, cli.IsUsage(c.err), c.want)
	}
	require.NoError(t, cli.Positive("interval", time.Second))
	require.True(t, cli.IsUsage(errors.Join(errors.New("x"), cli.Usagef("y"))), "a wrapped usage error counts")
	require.False(t, cli.IsUsage(errors.New("x")))
}
