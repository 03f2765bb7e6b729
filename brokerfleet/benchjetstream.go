package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// benchJetStreamCmd is the hidden subcommand bench starts for its
// jetstream target: a three-node NATS cluster with JetStream (file
// storage under the given directory), in one process of its own, so the
// bench compares Strata's replicated acknowledgements with a
// Raft-replicated peer's in the same run. NATS JetStream is the peer
// issue 27 names; nats-server is embedded as a library (its own module)
// rather than a binary to install.
const benchJetStreamCmd = "bench-jetstream"

func runBenchJetStream(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return usageError{errors.New("bench-jetstream: want one argument, the storage directory")}
	}
	dir := args[0]
	var servers []*natsserver.Server
	defer func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}()
	// Route ports known up front: each node routes to all three (a node
	// with no route cannot start clustered JetStream).
	base, err := freePorts(3)
	if err != nil {
		return err
	}
	var routes []*url.URL
	for i := range 3 {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", base+i)})
	}
	for i := range 3 {
		opts := &natsserver.Options{
			ServerName: fmt.Sprintf("bench-%d", i),
			Host:       "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprintf("n%d", i)),
			Cluster: natsserver.ClusterOpts{Name: "strata-bench", Host: "127.0.0.1", Port: base + i},
			Routes:  routes,
			NoLog:   os.Getenv("STRATA_BENCH_NATS_LOG") == "", NoSigs: true,
		}
		s, err := natsserver.NewServer(opts)
		if err != nil {
			return fmt.Errorf("nats server %d: %w", i, err)
		}
		if !opts.NoLog {
			s.ConfigureLogger()
		}
		servers = append(servers, s)
		go s.Start()
	}
	for i, s := range servers {
		if !s.ReadyForConnections(30 * time.Second) {
			return fmt.Errorf("nats server %d did not start within 30 s", i)
		}
	}
	// JetStream serves once the three have elected a meta leader.
	deadline := time.Now().Add(60 * time.Second)
	for !leaderElected(servers) {
		if time.Now().After(deadline) {
			return errors.New("the JetStream cluster elected no meta leader within 60 s")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	fmt.Fprintf(stdout, "jetstream ready: bootstrap %s\n", strings.Join(urls, ","))
	<-ctx.Done()
	return nil
}

func leaderElected(servers []*natsserver.Server) bool {
	for _, s := range servers {
		if s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}
