package dlqconsole

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
)

// Partition sizes on disk and in S3: Kafka's protocol carries neither (no
// DescribeLogDirs, and nothing for a tier), so each broker serves what it
// stores beside its registry (GET /strata/v1/topics/{topic}/sizes); the
// console asks every broker once per distinct host and adds them up.

type topicSizes struct {
	Partitions []struct {
		Broker       int32 `json:"broker"`
		Partition    int32 `json:"partition"`
		Leader       bool  `json:"leader"`
		LocalBytes   int64 `json:"localBytes"`
		Tiered       bool  `json:"tiered"`
		TierBytes    int64 `json:"tierBytes"`
		TierSegments int   `json:"tierSegments"`
	} `json:"partitions"`
}

// partSize is what the brokers store of one partition.
type partSize struct {
	leaderBytes, allBytes int64 // the leader's log; all replicas' logs
	replicas              int   // replicas that answered
	tiered                bool
	tierBytes             int64
	tierSegments          int
}

// sizesOf asks the brokers at hosts for topic's sizes; note says what is
// missing (no registry URL, a broker that did not answer).
func (c *Console) sizesOf(ctx context.Context, topic string, hosts []string) (map[int32]*partSize, string) {
	if c.opts.RegistryURL == "" {
		return nil, "sizes unknown: the console has no schema registry URL, beside which the brokers serve them"
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var answers []topicSizes
	var fails []string
	for _, h := range hosts {
		if seen[h] {
			continue
		}
		seen[h] = true
		wg.Go(func() {
			var ts topicSizes
			err := c.adminGet(ctx, h, "/strata/v1/topics/"+url.PathEscape(topic)+"/sizes", &ts)
			mu.Lock()
			defer mu.Unlock()
			var ae *adminError
			switch {
			case err == nil:
				answers = append(answers, ts)
			case errors.As(err, &ae) && ae.status == 404: // hosts nothing of it
			default:
				fails = append(fails, err.Error())
			}
		})
	}
	wg.Wait()
	out := map[int32]*partSize{}
	type rep struct{ broker, partition int32 }
	counted := map[rep]bool{}
	for _, a := range answers {
		for _, p := range a.Partitions {
			if counted[rep{p.Broker, p.Partition}] {
				continue
			}
			counted[rep{p.Broker, p.Partition}] = true
			s := out[p.Partition]
			if s == nil {
				s = &partSize{}
				out[p.Partition] = s
			}
			s.allBytes += p.LocalBytes
			s.replicas++
			if p.Leader {
				s.leaderBytes = p.LocalBytes
				if p.Tiered {
					s.tiered, s.tierBytes, s.tierSegments = true, p.TierBytes, p.TierSegments
				}
			}
		}
	}
	note := ""
	if len(fails) > 0 {
		note = "sizes incomplete: " + strings.Join(fails, "; ")
	}
	return out, note
}

// humanBytes writes n bytes as B, KiB, MiB, ...
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for f /= 1024; f >= 1024 && u < len(units)-1; u++ {
		f /= 1024
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}
