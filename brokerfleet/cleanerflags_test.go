package main

import (
	"bytes"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/cleaner"
)

// The -cleaner-* flags set the cleaner's config (and STRATA_CLEANER_*
// variables do, the command line winning); bad values are usage errors
// naming the flag, from parsing or from ValidateSettings.
func TestCleanerFlags(t *testing.T) {
	parse := func(args ...string) (broker.Config, error) {
		cfg := broker.DefaultConfig()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cleanerFlags(fs, &cfg.Cleaner)
		if err := parseFlags(fs, args, io.Discard, true); err != nil {
			return cfg, err
		}
		return cfg, cfg.ValidateSettings()
	}
	cfg, err := parse()
	require.NoError(t, err)
	require.Equal(t, broker.CleanerConfig{Threads: 1, DedupeBufferBytes: cleaner.DefaultDedupeBytes, Backoff: cleaner.DefaultBackoff}, cfg.Cleaner)

	t.Setenv("STRATA_CLEANER_THREADS", "4")
	t.Setenv("STRATA_CLEANER_BACKOFF", "3s")
	cfg, err = parse("-cleaner-threads", "2", "-cleaner-dedupe-buffer-size", "1048576", "-cleaner-io-max-bytes-per-second", "5e6")
	require.NoError(t, err)
	require.Equal(t, broker.CleanerConfig{Threads: 2, DedupeBufferBytes: 1 << 20, IOBytesPerSecond: 5e6, Backoff: 3 * time.Second}, cfg.Cleaner)

	cfg, err = parse("-cleaner-threads", "0")
	require.NoError(t, err, "0 turns compaction off")
	require.Zero(t, cfg.Cleaner.Threads)

	for _, bad := range [][]string{
		{"-cleaner-threads", "-1"}, {"-cleaner-threads", "65"},
		{"-cleaner-dedupe-buffer-size", "1000"}, {"-cleaner-threads", "4", "-cleaner-dedupe-buffer-size", "131072"},
		{"-cleaner-io-max-bytes-per-second", "-1"}, {"-cleaner-io-max-bytes-per-second", "fast"},
		{"-cleaner-backoff", "-1s"},
	} {
		_, err := parse(bad...)
		require.Error(t, err, "%v", bad)
		require.Contains(t, err.Error(), bad[len(bad)-2][1:], "%v: the message names the flag", bad)
	}
}

// serve refuses a bad cleaner flag with exit status 2 before it starts.
func TestServeRefusesBadCleanerFlags(t *testing.T) {
	var stderr bytes.Buffer
	code := run([]string{"serve", "-data", t.TempDir(), "-listen", "127.0.0.1:0", "-cleaner-threads", "100"}, io.Discard, &stderr)
	require.Equal(t, 2, code, stderr.String())
	require.Contains(t, stderr.String(), "cleaner-threads")
}
