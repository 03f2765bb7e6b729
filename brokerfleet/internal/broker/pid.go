package broker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// pidBlockSize is how many producer ids one durable write reserves.
const pidBlockSize = 1000

// pidAllocator hands out producer ids from blocks reserved durably in a file
// (the metastore's atomic counter replaces it), so ids never repeat across
// restarts even after a crash: a crash wastes at most the rest of a block.
type pidAllocator struct {
	fs   segment.FS
	file string
	mu   sync.Mutex
	next int64
	end  int64 // exclusive end of the reserved block
}

func newPIDAllocator(fs segment.FS, file string) (*pidAllocator, error) {
	a := &pidAllocator{fs: fs, file: file}
	f, err := fs.OpenFile(file, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open producer ids: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 32)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read producer ids: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	if err != nil || v < 0 {
		return nil, fmt.Errorf("read producer ids %s: corrupt content %q", file, buf[:n])
	}
	a.next, a.end = v, v
	return a, nil
}

// next returns a producer id never returned before.
func (a *pidAllocator) allocate() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == a.end {
		end := a.end + pidBlockSize
		if err := topic.WriteFileAtomic(a.fs, a.file, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
			return 0, fmt.Errorf("reserve producer ids: %w", err)
		}
		a.end = end
	}
	id := a.next
	a.next++
	return id, nil
}
