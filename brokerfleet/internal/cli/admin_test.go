package cli_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

func TestAdminFlags(t *testing.T) {
	t.Setenv("STRATA_BOOTSTRAP", "")
	a := cli.NewAdmin("topics list", "help\n")
	internal := a.Flags.Bool("internal", false, "")
	pos, err := a.Parse([]string{"x", "-json", "-internal", "-timeout", "3s", "-bootstrap", "h1:1, h2:2"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, pos)
	require.True(t, a.JSON)
	require.True(t, *internal)
	require.Equal(t, 3*time.Second, a.Timeout)
	for _, name := range []string{"bootstrap", "json", "timeout", "tls", "tls-ca", "tls-cert", "tls-key", "sasl-mechanism", "sasl-user", "sasl-password"} {
		require.NotNil(t, a.Flags.Lookup(name), "-%s", name)
	}
	require.Equal(t, cli.DefaultBootstrap, a.Flags.Lookup("bootstrap").DefValue)
	require.Equal(t, "10s", a.Flags.Lookup("timeout").DefValue)
}

func TestAdminParseErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		env  string // STRATA_BOOTSTRAP
		args []string
		want string
	}{
		{"", []string{"-bootstrap", "nohost"}, `invalid value "nohost" for flag -bootstrap: "nohost" is not host:port`},
		{"", []string{"-bootstrap", " , "}, `invalid value " , " for flag -bootstrap: want host:port[,host:port...]`},
		{"h:1,nohost", nil, `invalid value "h:1,nohost" for STRATA_BOOTSTRAP: "nohost" is not host:port`},
		{"nohost", []string{"-bootstrap", "alsobad"}, "for flag -bootstrap"},
		{"", []string{"-timeout", "0s"}, "invalid value 0s for flag -timeout: must be positive"},
		{"", []string{"-timeout", "soon"}, "-timeout"},
	} {
		t.Run(strings.Join(c.args, " ")+c.env, func(t *testing.T) {
			t.Setenv("STRATA_BOOTSTRAP", c.env)
			_, err := cli.NewAdmin("groups list", "").Parse(c.args, io.Discard)
			require.True(t, cli.IsUsage(err), "%v", err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func TestAdminClientFlagErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "ca.pem")
	for _, c := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"-sasl-user", "u", "-sasl-mechanism", "GSSAPI"}, "flag -sasl-mechanism", true},
		{[]string{"-tls-ca", missing}, "flag -tls-ca", false},
		{[]string{"-tls-cert", missing}, "flags -tls-cert, -tls-key", false},
	} {
		a := cli.NewAdmin("users list", "")
		_, err := a.Parse(append(c.args, "-bootstrap", "127.0.0.1:1"), io.Discard)
		require.NoError(t, err)
		called := false
		err = a.Run(context.Background(), func(context.Context, *kadm.Client) error { called = true; return nil })
		require.ErrorContains(t, err, c.want)
		require.Equal(t, c.usage, cli.IsUsage(err), "%v", err)
		require.False(t, called)
	}

	a := cli.NewAdmin("users list", "")
	_, err := a.Parse([]string{"-bootstrap", "127.0.0.1:1", "-timeout", "50ms"}, io.Discard)
	require.NoError(t, err)
	err = a.Run(context.Background(), func(ctx context.Context, adm *kadm.Client) error {
		require.NotNil(t, adm)
		deadline, ok := ctx.Deadline()
		require.True(t, ok)
		require.WithinDuration(t, time.Now().Add(50*time.Millisecond), deadline, time.Second)
		return io.ErrUnexpectedEOF
	})
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "Run returns what call returns")
}

func TestAdminFailNamesTheTimeout(t *testing.T) {
	t.Parallel()
	a := cli.NewAdmin("groups list", "")
	_, err := a.Parse([]string{"-bootstrap", "h:1", "-timeout", "2s"}, io.Discard)
	require.NoError(t, err)
	err = a.Fail("list groups", fmt.Errorf("request: %w", context.DeadlineExceeded))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualError(t, err, "list groups: no answer from h:1 within 2s (flag -timeout): request: context deadline exceeded")
	require.EqualError(t, a.Fail("list groups", io.EOF), "list groups: EOF")
}

func TestAdminWaitTimeout(t *testing.T) {
	t.Parallel()
	a := cli.NewAdmin("brokers drain", "")
	_, err := a.Parse(nil, io.Discard)
	require.NoError(t, err)
	a.WaitTimeout(false)
	require.Equal(t, 10*time.Second, a.Timeout)
	a.WaitTimeout(true)
	require.Equal(t, time.Hour, a.Timeout)

	a = cli.NewAdmin("brokers drain", "")
	_, err = a.Parse([]string{"-timeout", "5s"}, io.Discard)
	require.NoError(t, err)
	a.WaitTimeout(true)
	require.Equal(t, 5*time.Second, a.Timeout, "a -timeout given stays")
}
