package group

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The run loop forgets idle groups while requests may be about to lock
// them; a request must learn the group is gone (under the group's lock)
// and look it up again. The race detector catches a gone flag set without
// the lock, often but not always in one run.
func TestIdleGroupForgottenWhileLookedUp(t *testing.T) {
	h := newHarness(t)
	var names []string
	for i := range 64 {
		names = append(names, fmt.Sprintf("idle-%d", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = names[w:]
			for {
				select {
				case <-stop:
					return
				default:
				}
				h.c.Describe(h.ctx, r)
			}
		}()
	}
	for range 100 {
		h.advance(10*time.Minute + tickInterval)
	}
	close(stop)
	wg.Wait()
}
