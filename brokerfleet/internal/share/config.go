package share

// The share group configs a group may set with IncrementalAlterConfigs
// on its GROUP resource, as Kafka names them (GroupConfig), with the
// broker-wide defaults (group.share.*) behind them.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is a share group's effective configuration.
type Config struct {
	LockDuration      time.Duration // share.record.lock.duration.ms
	DeliveryLimit     int           // share.delivery.count.limit
	AutoReset         string        // share.auto.offset.reset: latest, earliest, by_duration:<ISO-8601>
	ReadCommitted     bool          // share.isolation.level
	SessionTimeout    time.Duration // share.session.timeout.ms
	HeartbeatInterval time.Duration // share.heartbeat.interval.ms
	// DeadLetterTopic is errors.deadletterqueue.topic.name (KIP-1191):
	// archived records are copied there. It must start with "dlq."
	// (Kafka's errors.deadletterqueue.topic.name.prefix) or end with
	// ".dlq" (Strata's convention), so a group cannot make the broker
	// write into an arbitrary topic.
	DeadLetterTopic string
	// DeadLetters is errors.deadletterqueue.enable (Strata's): copy
	// archived records to <topic>.dlq unless DeadLetterTopic names
	// another topic.
	DeadLetters bool
}

// DeadLetterTopicFor is where archived records of origin go, or "".
func (c Config) DeadLetterTopicFor(origin string) string {
	switch {
	case c.DeadLetterTopic != "":
		return c.DeadLetterTopic
	case c.DeadLetters:
		return origin + ".dlq"
	}
	return ""
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryLimit: 5, AutoReset: "latest",
		SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second}
}

// Group config names.
const (
	CfgLockDuration  = "share.record.lock.duration.ms"
	CfgDeliveryLimit = "share.delivery.count.limit"
	CfgAutoReset     = "share.auto.offset.reset"
	CfgIsolation     = "share.isolation.level"
	CfgSession       = "share.session.timeout.ms"
	CfgHeartbeat     = "share.heartbeat.interval.ms"
	CfgDeadLetter    = "errors.deadletterqueue.topic.name"
	CfgDeadLetterOn  = "errors.deadletterqueue.enable"
)

// ConfigNames lists the group configs, sorted.
func ConfigNames() []string {
	n := []string{CfgLockDuration, CfgDeliveryLimit, CfgAutoReset, CfgIsolation, CfgSession, CfgHeartbeat, CfgDeadLetter, CfgDeadLetterOn}
	slices.Sort(n)
	return n
}

// canonical maps the broker-level spelling (group.share.x) to the group
// config's (share.x).
func canonical(name string) string {
	if strings.HasPrefix(name, "group.share.") {
		return strings.TrimPrefix(name, "group.")
	}
	return name
}

// Canonical returns the group config name name stands for (the
// broker-wide "group.share.*" spelling is accepted too), and whether it
// is one.
func Canonical(name string) (string, bool) {
	c := canonical(name)
	return c, slices.Contains(ConfigNames(), c)
}

// Value returns c's value of a group config, as DescribeConfigs shows it.
func (c Config) Value(name string) string {
	switch canonical(name) {
	case CfgLockDuration:
		return strconv.FormatInt(c.LockDuration.Milliseconds(), 10)
	case CfgDeliveryLimit:
		return strconv.Itoa(c.DeliveryLimit)
	case CfgAutoReset:
		return c.AutoReset
	case CfgIsolation:
		if c.ReadCommitted {
			return "read_committed"
		}
		return "read_uncommitted"
	case CfgSession:
		return strconv.FormatInt(c.SessionTimeout.Milliseconds(), 10)
	case CfgHeartbeat:
		return strconv.FormatInt(c.HeartbeatInterval.Milliseconds(), 10)
	case CfgDeadLetter:
		return c.DeadLetterTopic
	case CfgDeadLetterOn:
		return strconv.FormatBool(c.DeadLetters)
	}
	return ""
}

// Validate checks one group config value (Kafka's bounds).
func Validate(name, value string) error {
	c := DefaultConfig()
	return c.set(canonical(name), value)
}

// With returns c overridden by a group's stored configs; invalid stored
// values (none get stored) are ignored.
func (c Config) With(vals map[string]string) Config {
	for k, v := range vals {
		_ = c.set(canonical(k), v)
	}
	return c
}

func (c *Config) set(name, v string) error {
	ms := func(lo, hi int64) (time.Duration, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%s must be an integer in [%d, %d]", name, lo, hi)
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	var err error
	switch name {
	case CfgLockDuration:
		c.LockDuration, err = ms(1000, 3600000)
	case CfgSession:
		c.SessionTimeout, err = ms(1000, 3600000)
	case CfgHeartbeat:
		c.HeartbeatInterval, err = ms(1000, 3600000)
	case CfgDeliveryLimit:
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 2 || n > 10 {
			return fmt.Errorf("%s must be an integer in [2, 10]", name)
		}
		c.DeliveryLimit = n
	case CfgAutoReset:
		switch {
		case v == "latest" || v == "earliest":
		case strings.HasPrefix(v, "by_duration:"):
			if _, perr := parseISODuration(strings.TrimPrefix(v, "by_duration:")); perr != nil {
				return fmt.Errorf("%s: %v", name, perr)
			}
		default:
			return fmt.Errorf("%s must be latest, earliest or by_duration:<ISO-8601 duration>", name)
		}
		c.AutoReset = v
	case CfgIsolation:
		switch v {
		case "read_committed":
			c.ReadCommitted = true
		case "read_uncommitted":
			c.ReadCommitted = false
		default:
			return fmt.Errorf("%s must be read_committed or read_uncommitted", name)
		}
	case CfgDeadLetter:
		if v != "" && !strings.HasPrefix(v, "dlq.") && !strings.HasSuffix(v, ".dlq") {
			return fmt.Errorf("%s must start with \"dlq.\" or end with \".dlq\"", name)
		}
		c.DeadLetterTopic = v
	case CfgDeadLetterOn:
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			return fmt.Errorf("%s must be true or false", name)
		}
		c.DeadLetters = b
	default:
		return fmt.Errorf("unknown group config %s", name)
	}
	return err
}

// ResetDuration is the duration of a by_duration reset, or false.
func (c Config) ResetDuration() (time.Duration, bool) {
	v, ok := strings.CutPrefix(c.AutoReset, "by_duration:")
	if !ok {
		return 0, false
	}
	d, err := parseISODuration(v)
	return d, err == nil
}

// parseISODuration parses the PnDTnHnMnS subset of ISO-8601 durations.
func parseISODuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, fmt.Errorf("duration %q is not ISO-8601 (PnDTnHnMnS)", s)
	}
	var d time.Duration
	inTime := false
	num := ""
	for _, r := range rest {
		switch {
		case r >= '0' && r <= '9' || r == '.':
			num += string(r)
		case r == 'T':
			inTime = true
		default:
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("duration %q is not ISO-8601 (PnDTnHnMnS)", s)
			}
			num = ""
			unit := map[rune]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}[r]
			if r == 'D' && inTime || r != 'D' && !inTime || unit == 0 {
				return 0, fmt.Errorf("duration %q is not ISO-8601 (PnDTnHnMnS)", s)
			}
			d += time.Duration(f * float64(unit))
		}
	}
	if num != "" {
		return 0, fmt.Errorf("duration %q is not ISO-8601 (PnDTnHnMnS)", s)
	}
	return d, nil
}
