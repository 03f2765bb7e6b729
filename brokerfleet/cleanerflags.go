package main

import (
	"flag"
	"fmt"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

// cleanerFlags registers the log cleaner's flags (Kafka's log.cleaner.*),
// shared by serve and dev.
func cleanerFlags(fs *flag.FlagSet, cfg *broker.CleanerConfig) {
	fs.IntVar(&cfg.Threads, "cleaner-threads", cfg.Threads,
		"log cleaner threads compacting topics with cleanup.policy=compact (log.cleaner.threads); 0 turns compaction off")
	fs.Int64Var(&cfg.DedupeBufferBytes, "cleaner-dedupe-buffer-size", cfg.DedupeBufferBytes,
		"memory bound in bytes of the cleaner's key-to-offset maps, all threads together (log.cleaner.dedupe.buffer.size; 24 bytes a key)")
	fs.Func("cleaner-io-max-bytes-per-second", fmt.Sprintf("bytes per second the cleaner reads plus writes, all threads together (log.cleaner.io.max.bytes.per.second; 0: unlimited; default %v)", cfg.IOBytesPerSecond),
		func(s string) error {
			var v float64
			if _, err := fmt.Sscan(s, &v); err != nil || !(v >= 0) {
				return fmt.Errorf("%q is not a byte rate", s)
			}
			cfg.IOBytesPerSecond = v
			return nil
		})
	fs.DurationVar(&cfg.Backoff, "cleaner-backoff", cfg.Backoff,
		"how long an idle cleaner waits before it looks for dirty partitions again (log.cleaner.backoff.ms); config changes wake it")
}
