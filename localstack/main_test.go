package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore/dynamo"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// named answers every request with its name, so a test sees where the
// router sent a request.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) })
}

func TestRoutesByTargetHeader(t *testing.T) {
	srv := httptest.NewServer(newRouter(named("dynamodb"), named("s3")))
	defer srv.Close()
	for _, tc := range []struct {
		method, path, target string
		status               int
		want                 string
	}{
		{"POST", "/", "DynamoDB_20120810.PutItem", 200, "dynamodb"},
		{"POST", "/some-bucket", "DynamoDB_20120810.Query", 200, "dynamodb"},
		{"GET", "/", "", 200, "s3"},
		{"PUT", "/strata/tier/x.log", "", 200, "s3"},
		{"POST", "/strata?delete", "", 200, "s3"},
		{"GET", "/_localstack/health", "", 200, `"dynamodb":"running"`},
		{"POST", "/", "DynamoDBStreams_20120810.ListStreams", 400, "UnknownOperationException"},
		{"POST", "/", "Logs_20140328.PutLogEvents", 400, "UnknownOperationException"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		require.NoError(t, err)
		if tc.target != "" {
			req.Header.Set("X-Amz-Target", tc.target)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, "%s %s target %q: %s", tc.method, tc.path, tc.target, body)
		require.Contains(t, string(body), tc.want, "%s %s target %q", tc.method, tc.path, tc.target)
	}
}

func TestHealth(t *testing.T) {
	srv := httptest.NewServer(newRouter(named("dynamodb"), named("s3")))
	defer srv.Close()
	resp, err := http.Get(srv.URL + healthPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var h struct{ Services map[string]string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	require.Equal(t, map[string]string{"s3": "running", "dynamodb": "running"}, h.Services)

	resp, err = http.Post(srv.URL+healthPath, "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the message
	}{
		{[]string{"-listen", "0.0.0.0:4566"}, "-listen"},
		{[]string{"-listen", ":4566"}, "-listen"},
		{[]string{"-listen", "192.0.2.1:4566"}, "-listen"},
		{[]string{"-listen", "127.0.0.1"}, "-listen"},
		{[]string{"-bucket", "Not_A_Bucket"}, "-bucket"},
		{[]string{"-bucket", "ok", "-bucket", "x"}, "-bucket"},
		{[]string{"-table", "ab"}, "-table"},
		{[]string{"-table", "no spaces"}, "-table"},
		{[]string{"-allow-remote=maybe"}, "-allow-remote"},
		{[]string{"-no-such-flag"}, "-no-such-flag"},
		{[]string{"serve"}, `"serve"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		require.Equal(t, 2, code, "%q: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, "%q", tc.args)
		require.Empty(t, stdout.String(), "%q", tc.args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%q: one line: %s", tc.args, stderr.String())
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "-allow-remote")
}

func TestAllowRemote(t *testing.T) {
	require.Error(t, checkListen("0.0.0.0:4566", false))
	require.NoError(t, checkListen("0.0.0.0:4566", true))
	require.NoError(t, checkListen("localhost:4566", false))
	require.NoError(t, checkListen("[::1]:0", false))
	require.Error(t, checkListen("[::]:0", false))
}

// standIn is run in this process.
type standIn struct {
	url    string
	stderr *syncBuffer
	cancel context.CancelFunc
	code   chan int
}

// startInProcess runs the command with args (plus -listen 127.0.0.1:0)
// and waits for its ready line.
func startInProcess(t *testing.T, args ...string) *standIn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &standIn{stderr: &syncBuffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() {
		s.code <- run(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), pw, s.stderr)
		pw.Close()
	}()
	t.Cleanup(func() { s.stop(t) })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-lines:
		require.True(t, strings.HasPrefix(l, readyPrefix), "ready line %q", l)
		s.url = strings.TrimPrefix(l, readyPrefix)
	case code := <-s.code:
		t.Fatalf("exited with %d before ready: %s", code, s.stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("not ready in 20s: %s", s.stderr)
	}
	return s
}

// stop cancels the run (as a signal would) and checks it exits with 0.
func (s *standIn) stop(t *testing.T) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case code := <-s.code:
		require.Equal(t, 0, code, s.stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("did not stop within 10s: %s", s.stderr)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestServesBothOnOneAddress: the SDK clients for S3 and DynamoDB share
// the endpoint; -bucket and -table exist at the ready line; S3 data
// outlives a restart with -data and DynamoDB's does not.
func TestServesBothOnOneAddress(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startInProcess(t, "-data", dir, "-bucket", "strata", "-bucket", "other", "-table", "strata", "-table", "second")
	require.Contains(t, s.stderr.String(), "DynamoDB in memory")

	store, err := s3store.Open(ctx, s3store.Options{Bucket: "strata", Endpoint: s.url})
	require.NoError(t, err)
	require.NoError(t, store.Put(ctx, "a/b", []byte("hello"), objstore.PutOptions{}))
	db, err := dynamo.NewClient(ctx, s.url, "", 0)
	require.NoError(t, err)
	for _, table := range []string{"strata", "second"} {
		_, err = db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		require.NoError(t, err, "table %s", table)
	}
	// The broker's metastore works on the pre-created table.
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("strata"), Item: map[string]types.AttributeValue{
		dynamo.AttrPK: &types.AttributeValueMemberS{Value: "p"}, dynamo.AttrSK: &types.AttributeValueMemberS{Value: "s"},
	}})
	require.NoError(t, err)
	s.stop(t)

	s = startInProcess(t, "-data", dir)
	store, err = s3store.Open(ctx, s3store.Options{Bucket: "strata", Endpoint: s.url})
	require.NoError(t, err)
	got, err := store.Get(ctx, "a/b", 0, -1)
	require.NoError(t, err, "S3 data survives a restart with -data")
	require.Equal(t, "hello", string(got))
	db, err = dynamo.NewClient(ctx, s.url, "", 0)
	require.NoError(t, err)
	_, err = db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("strata")})
	var nf *types.ResourceNotFoundException
	require.ErrorAs(t, err, &nf, "DynamoDB is in memory")
}
