package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// /healthz answers 200 "ok" while the broker runs and 503 with the reason
// once it is closed; /metrics serves the broker's series beside the
// runtime's.
func TestHealthEndpointAndMetrics(t *testing.T) {
	b := brokertest.Start(t)
	srv := httptest.NewServer(metricsHandler(b.Broker))
	defer srv.Close()

	code, body := get(t, srv.URL+"/healthz")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ok", strings.TrimSpace(body))

	code, body = get(t, srv.URL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, name := range []string{"strata_partitions ", "strata_controller 1", "strata_metastore_requests_total{", "go_goroutines "} {
		require.Contains(t, body, name)
	}

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"health", "-http", strings.TrimPrefix(srv.URL, "http://")}, &stdout, &stderr), stderr.String())

	require.NoError(t, b.Close())
	code, body = get(t, srv.URL+"/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "broker closed")
	stderr.Reset()
	require.Equal(t, 1, run([]string{"health", "-http", strings.TrimPrefix(srv.URL, "http://")}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "broker closed")
}

// A metastore outage makes a broker lose its lease (it can no longer act),
// but neither its liveness nor its (latched) readiness: a container
// health check must never make ECS replace a healthy fleet, and with it
// every segment not yet in S3, because DynamoDB was unreachable.
func TestHealthSurvivesAMetastoreOutage(t *testing.T) {
	flaky := &brokertest.FlakyStore{Store: brokertest.NewMeta(t).Store()}
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Meta = metastore.New(flaky)
		c.Lease = metastore.LeaseOptions{Duration: 1500 * time.Millisecond, Margin: 300 * time.Millisecond}
	})
	srv := httptest.NewServer(metricsHandler(b.Broker))
	defer srv.Close()
	deadline := time.Now().Add(30 * time.Second)
	for b.Ready() != nil {
		require.True(t, time.Now().Before(deadline), "never ready")
		time.Sleep(20 * time.Millisecond)
	}
	flaky.Down.Store(true)
	for b.Healthy() == nil {
		require.True(t, time.Now().Before(deadline), "still able to act without a metastore")
		time.Sleep(20 * time.Millisecond)
	}
	code, body := get(t, srv.URL+"/healthz")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "cannot act: broker registration lease not held")
	code, body = get(t, srv.URL+"/readyz")
	require.Equal(t, http.StatusOK, code, body)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"health", "-ready", "-http", strings.TrimPrefix(srv.URL, "http://")}, &stdout, &stderr), stderr.String())

	// Back: it may act again within a lease.
	flaky.Down.Store(false)
	for b.Healthy() != nil {
		require.True(t, time.Now().Before(deadline), "never acted again")
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHealthCommandExitCodes(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/healthz", r.URL.Path)
		io.WriteString(w, "ok\n")
	}))
	defer ok.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broker registration lease not held", http.StatusServiceUnavailable)
	}))
	defer sick.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := ln.Addr().String()
	ln.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	_, port, _ := net.SplitHostPort(addr(ok))

	for _, c := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"-http", addr(ok)}, 0, ""},
		{[]string{"-http", ":" + port}, 0, ""}, // a wildcard host is asked on loopback
		{[]string{"-http", addr(sick)}, 1, "lease not held"},
		{[]string{"-http", addr(slow), "-timeout", "100ms"}, 1, "no answer within 100ms"},
		{[]string{"-http", refused}, 1, "refused"},
		{[]string{"-http", "nohost"}, 2, "-http"},
		{[]string{"-timeout", "0s"}, 2, "-timeout"},
		{[]string{"-bogus"}, 2, "bogus"},
		{[]string{"extra"}, 2, "unexpected argument"},
	} {
		var stdout, stderr bytes.Buffer
		got := run(append([]string{"health"}, c.args...), &stdout, &stderr)
		require.Equal(t, c.code, got, "%v: stderr %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
}

// serve -emf-interval prints its ready line first, then one CloudWatch EMF
// line per interval; `brokerfleet health` passes while it runs and fails
// once it has stopped.
func TestServeEMFAndHealth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	httpAddr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(binPath, "serve", "-listen", "127.0.0.1:0", "-http", httpAddr, "-data", t.TempDir(),
		"-cluster-id", "emf-test", "-emf-interval", "100ms")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "stdout closed\n%s", stderr.String())
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("no stdout line in 30s\n%s", stderr.String())
		}
		return ""
	}
	require.Contains(t, next(), "strata ready: bootstrap ", "the ready line comes first")
	for i := 0; i < 2; i++ {
		var doc struct {
			AWS struct {
				Timestamp         int64
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
			Cluster           string
			OfflinePartitions *float64
		}
		l := next()
		require.NoError(t, json.Unmarshal([]byte(l), &doc), l)
		require.Equal(t, "emf-test", doc.Cluster)
		require.Len(t, doc.AWS.CloudWatchMetrics, 1)
		require.Equal(t, "Strata", doc.AWS.CloudWatchMetrics[0].Namespace)
		require.Equal(t, [][]string{{"Cluster"}}, doc.AWS.CloudWatchMetrics[0].Dimensions)
		var names []string
		for _, m := range doc.AWS.CloudWatchMetrics[0].Metrics {
			names = append(names, m.Name)
		}
		require.Equal(t, []string{"MaxConsumerGroupLag", "UnderReplicatedPartitions", "OfflinePartitions", "UnderMinIsrPartitions",
			"ProduceErrors", "ProduceBytes", "FetchBytes", "S3UploadLagSeconds", "ShareRecordsAvailable", "ShareOldestAvailableAgeSeconds"}, names)
		require.NotNil(t, doc.OfflinePartitions)
		require.InDelta(t, time.Now().UnixMilli(), doc.AWS.Timestamp, float64(time.Minute.Milliseconds()))
	}

	var out, errOut bytes.Buffer
	waitHealthy := time.Now().Add(10 * time.Second)
	for run([]string{"health", "-http", httpAddr}, &out, &errOut) != 0 {
		require.True(t, time.Now().Before(waitHealthy), "never healthy: %s", errOut.String())
		time.Sleep(50 * time.Millisecond)
		errOut.Reset()
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "clean exit\n%s", stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not exit within 15s of SIGTERM")
	}
	errOut.Reset()
	require.Equal(t, 1, run([]string{"health", "-http", httpAddr}, &out, &errOut))
	require.Contains(t, errOut.String(), "refused")
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
