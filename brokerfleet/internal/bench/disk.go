package bench

import (
	"crypto/rand"
	"fmt"
	"os"
	"time"
)

// SeqWrite measures the sequential write bandwidth of the disk under dir:
// it writes size bytes in 1 MiB blocks to a new file, syncing every 64 MiB
// and at the end (as a broker's log flushes), and returns bytes per
// second. The file is removed afterwards.
func SeqWrite(dir string, size int64) (float64, error) {
	f, err := os.CreateTemp(dir, "strata-bench-disk-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 1<<20)
	rand.Read(block)
	start := time.Now()
	for done := int64(0); done < size; {
		n := min(int64(len(block)), size-done)
		if _, err := f.Write(block[:n]); err != nil {
			return 0, fmt.Errorf("disk bandwidth: %w", err)
		}
		done += n
		if done%(64<<20) == 0 {
			if err := f.Sync(); err != nil {
				return 0, fmt.Errorf("disk bandwidth: %w", err)
			}
		}
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("disk bandwidth: %w", err)
	}
	return float64(size) / time.Since(start).Seconds(), nil
}
