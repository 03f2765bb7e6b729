package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const healthHelp = `usage: brokerfleet health [flags]

Asks a broker's HTTP server (serve -http) whether the broker is live
(/healthz: the process works, whatever the metastore does), or with
-ready whether it is ready (/readyz: it has been registered and caught up
on every partition it hosts, latched from then on; what a deployment that
replaces brokers one at a time must wait for, and safe as a container
health check: a metastore outage never fails it for a ready broker).
Exits 0 when it answers 200, 1 otherwise
(the reason on stderr), 2 on bad flags. Meant as the container health
check: like serve, it reads STRATA_HTTP, so the same environment points
it at the broker; a wildcard host (":9644", "0.0.0.0:9644") is asked on
the loopback address.

flags:
`

func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	addr, timeout := "127.0.0.1:9644", 2*time.Second
	fs := cli.NewFlagSet("health", healthHelp)
	fs.StringVar(&addr, "http", addr, "the broker's -http address (host:port)")
	fs.DurationVar(&timeout, "timeout", timeout, "give up after this long")
	ready := false
	fs.BoolVar(&ready, "ready", ready, "ask for readiness (/readyz): registered and caught up on every hosted partition (latched)")
	if err := parseFlags(fs, args, stderr, true); err != nil {
		return err
	}
	if timeout <= 0 {
		return cli.BadFlag("timeout", timeout, "want a positive duration")
	}
	url, err := healthURL(addr)
	if err != nil {
		return usageError{err}
	}
	if ready {
		url = strings.TrimSuffix(url, "/healthz") + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usageError{fmt.Errorf("invalid value %q for flag -http: %v", addr, err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: no answer within %v", url, timeout)
		}
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		if msg == "" {
			msg = resp.Status
		}
		return fmt.Errorf("unhealthy (%d): %s", resp.StatusCode, msg)
	}
	fmt.Fprintln(stdout, msg)
	return nil
}

// healthURL returns the /healthz URL of an -http address, asking a
// wildcard host on the loopback address.
func healthURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("invalid value %q for flag -http: want host:port", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
