package compat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseExpected(t *testing.T) {
	got, err := ParseExpected(strings.NewReader(`
# comment
TestTxn: transactions are not built
TestTxnEtl [hangs]: waits for transactions until the timeout
`))
	require.NoError(t, err)
	require.Equal(t, []Expectation{
		{Test: "TestTxn", Reason: "transactions are not built"},
		{Test: "TestTxnEtl", Reason: "waits for transactions until the timeout"},
	}, got)

	for _, bad := range []string{
		"TestNoReason",
		"TestNoReason:",
		"NotATest: reason",
		"TestA/sub: subtests are judged by their parent",
		"TestA: one\nTestA: twice",
	} {
		_, err := ParseExpected(strings.NewReader(bad))
		require.Error(t, err, "%q", bad)
	}
}

func TestResultsAndJudge(t *testing.T) {
	out := strings.Join([]string{
		`{"Action":"run","Test":"TestGood"}`,
		`{"Action":"run","Test":"TestGood/sub"}`,
		`{"Action":"fail","Test":"TestGood/sub"}`, // a subtest's failure is its parent's
		`{"Action":"pass","Test":"TestGood"}`,
		`{"Action":"run","Test":"TestBroken"}`,
		`{"Action":"fail","Test":"TestBroken"}`,
		`{"Action":"run","Test":"TestKnown"}`,
		`{"Action":"fail","Test":"TestKnown"}`,
		`{"Action":"run","Test":"TestFixed"}`,
		`{"Action":"pass","Test":"TestFixed"}`,
		`{"Action":"run","Test":"TestSkipped"}`,
		`{"Action":"skip","Test":"TestSkipped"}`,
		`{"Action":"run","Test":"TestPanicked"}`, // the binary died under it
		`{"Action":"output","Output":"panic: test timed out\n"}`,
	}, "\n")
	res, err := Results(strings.NewReader(out))
	require.NoError(t, err)
	require.Equal(t, map[string]Outcome{
		"TestGood": Pass, "TestBroken": Fail, "TestKnown": Fail, "TestFixed": Pass,
		"TestSkipped": Skip, "TestPanicked": Fail,
	}, res)

	v := Judge(res, []Expectation{{Test: "TestKnown"}, {Test: "TestFixed"}, {Test: "TestGone"}, {Test: "TestPanicked"}})
	require.False(t, v.OK())
	require.Equal(t, []string{"TestBroken"}, v.Unexpected)
	require.Equal(t, []string{"TestFixed"}, v.NowPassing)
	require.Equal(t, []string{"TestGone"}, v.NotRun)
	require.Equal(t, 2, v.Passed)
	require.Equal(t, 3, v.Failed)
	require.Equal(t, 1, v.Skipped)

	require.True(t, Judge(map[string]Outcome{"TestKnown": Fail, "TestGood": Pass}, []Expectation{{Test: "TestKnown"}}).OK())
}

func TestOutput(t *testing.T) {
	out := `{"Action":"output","Test":"TestA","Output":"a1\n"}
{"Action":"output","Test":"TestB","Output":"b\n"}
{"Action":"output","Test":"TestA/x","Output":"a2\n"}`
	require.Equal(t, []string{"a1\n", "a2\n"}, Output(strings.NewReader(out), "TestA"))
}
