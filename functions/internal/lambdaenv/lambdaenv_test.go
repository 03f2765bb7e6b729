package lambdaenv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEnv(t *testing.T) {
	vars := map[string]string{"A": " x , y ,", "N": "12", "D": "1.5s", "B": "false", "BAD": "soon"}
	e := Env{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	var list []string
	n, d, b, s := 1, time.Second, true, "keep"
	e.List(&list, "A")
	e.Int(&n, "N")
	e.Duration(&d, "D")
	e.Bool(&b, "B")
	e.String(&s, "UNSET")
	require.NoError(t, e.Err)
	require.Equal(t, []string{"x", "y"}, list)
	require.Equal(t, 12, n)
	require.Equal(t, 1500*time.Millisecond, d)
	require.False(t, b)
	require.Equal(t, "keep", s, "unset variables leave defaults")
	e.Duration(&d, "BAD")
	require.ErrorContains(t, e.Err, `invalid value "soon" for BAD`)
}
