package stack

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/constructs-go/constructs/v10"
)

// Contexter is what ConfigFromContext reads: a construct's node
// (app.Node()).
type Contexter interface {
	TryGetContext(key *string) any
}

var _ Contexter = constructs.Node(nil)

// ConfigFromContext starts from DefaultConfig, overrides every setting
// whose context key is set, and validates the result. Values arrive as
// JSON numbers and booleans from cdk.json and as strings from `-c
// key=value`; both are accepted. Errors name the context key.
func ConfigFromContext(ctx Contexter) (Config, error) {
	c := DefaultConfig()
	r := reader{ctx: ctx}
	readSettings(&r, &c)
	if r.err != nil {
		return c, r.err
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c.withPaths()
}

// readSettings overrides c's fields whose context key is set.
func readSettings(r *reader, c *Config) {
	r.str(&c.ClusterName, "clusterName")
	r.integer(&c.BrokerCount, "brokerCount")
	r.integer(&c.BrokerCPU, "brokerCpu")
	r.integer(&c.BrokerMemoryMiB, "brokerMemoryMiB")
	r.integer(&c.StorageGiB, "storageGiB")
	r.int64(&c.SegmentBytes, "segmentBytes")
	r.integer(&c.RetentionDays, "retentionDays")
	r.integer(&c.LifecycleMarginDays, "lifecycleMarginDays")
	r.integer(&c.NATGateways, "natGateways")
	r.integer(&c.LagAlarmThreshold, "lagAlarmThreshold")
	r.integer(&c.ProduceErrorThreshold, "produceErrorThreshold")
	r.str(&c.AlarmEmail, "alarmEmail")
	r.integer(&c.RetryRateMinutes, "retryRateMinutes")
	r.str(&c.TriggerTopics, "triggerTopics")
	r.str(&c.TriggerGroup, "triggerGroup")
	r.str(&c.TriggerFunction, "triggerFunction")
	r.integer(&c.TriggerRateMinutes, "triggerRateMinutes")
	r.queueTriggers(&c.QueueTriggers, "queueTriggers")
	r.integer(&c.QueueAgeAlarmSeconds, "queueAgeAlarmSeconds")
	r.str(&c.RetryTopics, "retryTopics")
	r.str(&c.ClientSecurityGroups, "clientSecurityGroups")
	r.str(&c.CertNames, "certNames")
	r.integer(&c.CertValidityDays, "certValidityDays")
	r.str(&c.TLSRotation, "tlsRotation")
	r.str(&c.CARotation, "caRotation")
	r.integer(&c.NoncurrentVersionDays, "noncurrentVersionDays")
	r.boolean(&c.ESMExample, "esmExample")
	r.str(&c.ESMExampleTopic, "esmExampleTopic")
	r.str(&c.FunctionsDir, "functionsDir")
	r.str(&c.RepoRoot, "repoRoot")
}

// withPaths fills RepoRoot (the nearest folder at or above the working
// directory holding brokerfleet/Dockerfile) and FunctionsDir
// (<RepoRoot>/functions) when they are not set, as absolute paths.
func (c Config) withPaths() (Config, error) {
	if c.RepoRoot == "" {
		dir, err := os.Getwd()
		if err != nil {
			return c, fmt.Errorf("context repoRoot: %w", err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, dockerfile)); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				return c, invalid("repoRoot", "no %s at or above the working directory; set repoRoot to the repository root", dockerfile)
			}
			dir = parent
		}
		c.RepoRoot = dir
	}
	root, err := filepath.Abs(c.RepoRoot)
	if err != nil {
		return c, fmt.Errorf("context repoRoot: %w", err)
	}
	c.RepoRoot = root
	if _, err := os.Stat(filepath.Join(root, dockerfile)); err != nil {
		return c, invalid("repoRoot", "%s has no %s", root, dockerfile)
	}
	if c.FunctionsDir == "" {
		c.FunctionsDir = filepath.Join(root, "functions")
	}
	if c.FunctionsDir, err = filepath.Abs(c.FunctionsDir); err != nil {
		return c, fmt.Errorf("context functionsDir: %w", err)
	}
	return c, nil
}

// reader reads context values, remembering the first error.
type reader struct {
	ctx Contexter
	err error
}

func (r *reader) get(key string) (any, bool) {
	if r.err != nil {
		return nil, false
	}
	v := r.ctx.TryGetContext(&key)
	if v == nil {
		return nil, false
	}
	if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
		return nil, false
	}
	return v, true
}

func (r *reader) fail(key string, v any, want string) {
	r.err = invalid(key, "want %s, got %#v", want, v)
}

func (r *reader) str(dst *string, key string) {
	if v, ok := r.get(key); ok {
		s, ok := v.(string)
		if !ok {
			r.fail(key, v, "a string")
			return
		}
		*dst = strings.TrimSpace(s)
	}
}

func (r *reader) int64(dst *int64, key string) {
	v, ok := r.get(key)
	if !ok {
		return
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			r.fail(key, v, "a whole number")
			return
		}
		*dst = n
		return
	default:
		r.fail(key, v, "a whole number")
		return
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		r.fail(key, v, "a whole number")
		return
	}
	*dst = int64(f)
}

func (r *reader) integer(dst *int, key string) {
	n := int64(*dst)
	r.int64(&n, key)
	if r.err == nil {
		if n > math.MaxInt32 || n < math.MinInt32 {
			r.fail(key, n, "a number below 2^31")
			return
		}
		*dst = int(n)
	}
}

func (r *reader) boolean(dst *bool, key string) {
	v, ok := r.get(key)
	if !ok {
		return
	}
	switch x := v.(type) {
	case bool:
		*dst = x
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			r.fail(key, v, "true or false")
			return
		}
		*dst = b
	default:
		r.fail(key, v, "true or false")
	}
}
