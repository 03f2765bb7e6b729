package topic

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config keys Strata understands.
const (
	RetentionMs          = "retention.ms"
	RetentionBytes       = "retention.bytes"
	LocalRetentionMs     = "local.retention.ms"
	SchemaValidation     = "strata.schema.validation"
	LocalRetentionBytes  = "local.retention.bytes"
	SegmentBytes         = "segment.bytes"
	SegmentMs            = "segment.ms"
	MaxMessageBytes      = "max.message.bytes"
	MinInsyncReplicas    = "min.insync.replicas"
	CleanupPolicy        = "cleanup.policy"
	MessageTimestampType = "message.timestamp.type"
	Durability           = "strata.durability"
	UncleanElection      = "unclean.leader.election.enable"
	MinCleanableRatio    = "min.cleanable.dirty.ratio"
	MinCompactionLagMs   = "min.compaction.lag.ms"
	MaxCompactionLagMs   = "max.compaction.lag.ms"
	DeleteRetentionMs    = "delete.retention.ms"
)

// Cleanup policies (cleanup.policy is a list of them).
const (
	PolicyDelete  = "delete"
	PolicyCompact = "compact"
)

// Durability modes (strata.durability).
const (
	DurabilityReplicated = "replicated"
	DurabilityFsync      = "fsync"
	DurabilityObject     = "object"
)

// MinSegmentBytes is the smallest segment.bytes accepted. Kafka 4 requires
// 1 MiB; Strata accepts down to 1 KiB so tests and small deployments can roll
// segments quickly.
const MinSegmentBytes = 1024

// ErrInvalidConfig is returned when a config key is unknown or its value does
// not parse or is out of range. The message names the key.
var ErrInvalidConfig = errors.New("invalid config")

// Config is a topic's resolved configuration.
type Config struct {
	Retention         time.Duration // < 0: unlimited; 0: delete closed segments at once
	RetentionBytes    int64         // < 0: unlimited
	SegmentBytes      int64
	SegmentAge        time.Duration
	MaxMessageBytes   int32
	MinInsyncReplicas int32
	LogAppendTime     bool
	Durability        string
	UncleanElection   bool // a live out-of-sync replica may lead when no ISR member is live
	// LocalRetention and LocalRetentionBytes bound the local log when an
	// object tier holds the rest (only uploaded segments are deleted);
	// -2 in the config means "as retention.ms / retention.bytes".
	LocalRetention      time.Duration
	LocalRetentionBytes int64
	// SchemaValidation rejects records whose value does not carry the
	// Confluent header with an id registered under <topic>-value.
	SchemaValidation bool

	// Compact and NoDelete are cleanup.policy: Compact when it holds
	// "compact" (the cleaner keeps the latest record of every key, and
	// records need keys), NoDelete when it lacks "delete" (retention.* do
	// not apply). The zero value is "delete".
	Compact, NoDelete bool
	// MinCleanableRatio is the share of the log's bytes that must be dirty
	// (not yet compacted) before the cleaner takes it on.
	MinCleanableRatio float64
	// MinCompactionLag: a record stays uncompacted at least this long;
	// MaxCompactionLag: a dirty record is compacted within about this long,
	// whatever the dirty ratio (MaxDuration: never forced).
	MinCompactionLag, MaxCompactionLag time.Duration
	// DeleteRetention is how long a tombstone (a null value) stays after
	// the cleaner first passed it.
	DeleteRetention time.Duration
}

// MaxDuration is a duration config's "for ever" (Long.MAX_VALUE ms).
const MaxDuration = time.Duration(math.MaxInt64)

// millis converts a millisecond count to a duration, saturating.
func millis(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Millisecond) {
		return MaxDuration
	}
	return time.Duration(n) * time.Millisecond
}

// Kind is a config value's type, as DescribeConfigs reports it.
type Kind int8

// Kinds, numbered as Kafka's ConfigType.
const (
	KindBoolean Kind = 1
	KindString  Kind = 2
	KindInt     Kind = 3
	KindLong    Kind = 5
	KindDouble  Kind = 6
	KindList    Kind = 7
)

// Def describes one config key.
type Def struct {
	Name    string
	Kind    Kind
	Default string
	Doc     string
	// parse validates a value and stores it into c.
	parse func(v string, c *Config) error
}

var defs = []Def{
	{Name: CleanupPolicy, Kind: KindList, Default: "delete",
		Doc: "\"delete\" removes old segments by retention.ms and retention.bytes; \"compact\" keeps the latest record of every key (records need keys); \"compact,delete\" does both.",
		parse: func(v string, c *Config) error {
			var del bool
			c.Compact = false
			for _, p := range strings.Split(v, ",") {
				switch strings.TrimSpace(p) {
				case PolicyDelete:
					del = true
				case PolicyCompact:
					c.Compact = true
				default:
					return fmt.Errorf("%q is not a list of delete and compact", v)
				}
			}
			c.NoDelete = !del
			return nil
		}},
	{Name: DeleteRetentionMs, Kind: KindLong, Default: "86400000",
		Doc: "How long a tombstone (a record with a null value) of a compacted topic is kept after the cleaner first passed it; a consumer reading from the start must finish within it to see every delete.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, 0, math.MaxInt64)
			c.DeleteRetention = millis(n)
			return err
		}},
	{Name: MaxCompactionLagMs, Kind: KindLong, Default: "9223372036854775807",
		Doc: "The longest a record of a compacted topic stays uncompacted: past it the log is cleaned whatever its dirty ratio (the active segment is rolled for it).",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, 1, math.MaxInt64)
			c.MaxCompactionLag = millis(n)
			return err
		}},
	{Name: MinCleanableRatio, Kind: KindDouble, Default: "0.5",
		Doc: "The share of a compacted log's bytes not yet cleaned at which the cleaner takes it on.",
		parse: func(v string, c *Config) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			if !(f >= 0 && f <= 1) {
				return fmt.Errorf("%v is outside [0, 1]", f)
			}
			c.MinCleanableRatio = f
			return nil
		}},
	{Name: MinCompactionLagMs, Kind: KindLong, Default: "0",
		Doc: "The least time a record of a compacted topic stays uncompacted.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, 0, math.MaxInt64)
			c.MinCompactionLag = millis(n)
			return err
		}},
	{Name: MaxMessageBytes, Kind: KindInt, Default: "1048588",
		Doc: "The largest record batch the topic accepts, in bytes.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, 0, math.MaxInt32)
			c.MaxMessageBytes = int32(n)
			return err
		}},
	{Name: MessageTimestampType, Kind: KindString, Default: "CreateTime",
		Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the broker's clock.",
		parse: func(v string, c *Config) error {
			switch v {
			case "CreateTime":
				c.LogAppendTime = false
			case "LogAppendTime":
				c.LogAppendTime = true
			default:
				return fmt.Errorf("%q is not CreateTime or LogAppendTime", v)
			}
			return nil
		}},
	{Name: MinInsyncReplicas, Kind: KindInt, Default: "1",
		Doc: "With acks=all, the fewest in-sync replicas that must hold a batch before it is acknowledged.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, 1, math.MaxInt32)
			c.MinInsyncReplicas = int32(n)
			return err
		}},
	{Name: RetentionBytes, Kind: KindLong, Default: "-1",
		Doc: "Per-partition size above which the oldest segments are deleted; -1 for no limit.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, -1, math.MaxInt64)
			c.RetentionBytes = n
			return err
		}},
	{Name: LocalRetentionBytes, Kind: KindLong, Default: "-2",
		Doc: "With the S3 tier: per-partition size of the local log above which uploaded segments are deleted locally; -2 for retention.bytes, -1 for no limit.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, -2, math.MaxInt64)
			c.LocalRetentionBytes = n
			return err
		}},
	{Name: LocalRetentionMs, Kind: KindLong, Default: "-2",
		Doc: "With the S3 tier: how long uploaded segments stay on local disk; -2 for retention.ms, -1 for ever.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, -2, math.MaxInt64/int64(time.Millisecond))
			c.LocalRetention = time.Duration(n) * time.Millisecond
			return err
		}},
	{Name: RetentionMs, Kind: KindLong, Default: "604800000",
		Doc: "How long a segment is kept after its newest record's timestamp; -1 for ever, 0 deletes closed segments at the next check.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, -1, math.MaxInt64/int64(time.Millisecond))
			c.Retention = time.Duration(n) * time.Millisecond
			return err
		}},
	{Name: SegmentBytes, Kind: KindInt, Default: "1073741824",
		Doc: "The size at which the active segment is closed and a new one started.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, MinSegmentBytes, math.MaxInt32)
			c.SegmentBytes = n
			return err
		}},
	{Name: SegmentMs, Kind: KindLong, Default: "604800000",
		Doc: "The age at which a non-empty active segment is closed, so retention and tiering can act on it.",
		parse: func(v string, c *Config) error {
			n, err := parseInt(v, 1, math.MaxInt64/int64(time.Millisecond))
			c.SegmentAge = time.Duration(n) * time.Millisecond
			return err
		}},
	{Name: SchemaValidation, Kind: KindBoolean, Default: "false",
		Doc: "Reject (INVALID_RECORD) a batch with a record whose value lacks the Confluent schema header (magic byte 0, 4-byte id) or names an id not registered under <topic>-value in the schema registry.",
		parse: func(v string, c *Config) error {
			switch v {
			case "true":
				c.SchemaValidation = true
			case "false":
				c.SchemaValidation = false
			default:
				return fmt.Errorf("%q is not true or false", v)
			}
			return nil
		}},
	{Name: UncleanElection, Kind: KindBoolean, Default: "false",
		Doc: "Whether a replica outside the ISR may become leader when no in-sync replica is live: availability at the price of losing acknowledged records.",
		parse: func(v string, c *Config) error {
			switch strings.TrimSpace(v) {
			case "true":
				c.UncleanElection = true
			case "false":
				c.UncleanElection = false
			default:
				return fmt.Errorf("%q is not true or false", v)
			}
			return nil
		}},
	{Name: Durability, Kind: KindString, Default: DurabilityReplicated,
		Doc: "When a produce with acks=all is acknowledged: \"replicated\" (in memory of min.insync.replicas replicas), \"fsync\" (fsynced on them) or \"object\" (also in an S3 object referenced by the partition's manifest; needs the S3 tier).",
		parse: func(v string, c *Config) error {
			switch v {
			case DurabilityReplicated, DurabilityFsync, DurabilityObject:
				c.Durability = v
			default:
				return fmt.Errorf("%q is not one of replicated, fsync, object", v)
			}
			return nil
		}},
}

var defIndex = func() map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for i := range defs {
		m[defs[i].Name] = &defs[i]
	}
	return m
}()

// Defs returns every config key, sorted by name.
func Defs() []Def {
	out := append([]Def(nil), defs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the definition of key.
func Lookup(key string) (Def, bool) {
	d, ok := defIndex[key]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

func parseInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
	}
	return n, nil
}

// ValidateValue checks one key and value, returning an error wrapping
// ErrInvalidConfig that names the key.
func ValidateValue(key, value string) error {
	var c Config
	return setValue(&c, key, value)
}

func setValue(c *Config, key, value string) error {
	d, ok := defIndex[key]
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, key)
	}
	if err := d.parse(value, c); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, key, err)
	}
	return nil
}

// Defaults holds broker-wide defaults for topic configs: the built-in
// defaults, overridden by the broker's settings.
type Defaults map[string]string

// NewDefaults validates broker overrides and returns the effective defaults.
func NewDefaults(overrides map[string]string) (Defaults, error) {
	d := make(Defaults, len(defs))
	for _, def := range defs {
		d[def.Name] = def.Default
	}
	for k, v := range overrides {
		if err := ValidateValue(k, v); err != nil {
			return nil, err
		}
		d[k] = v
	}
	return d, nil
}

// Resolve validates a topic's overrides and returns the resolved Config.
func (d Defaults) Resolve(overrides map[string]string) (Config, error) {
	var c Config
	for _, def := range defs {
		v, ok := overrides[def.Name]
		if !ok {
			v = d[def.Name]
		}
		if err := setValue(&c, def.Name, v); err != nil {
			return Config{}, err
		}
	}
	for k := range overrides {
		if _, ok := defIndex[k]; !ok {
			return Config{}, fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, k)
		}
	}
	if c.MaxCompactionLag < c.MinCompactionLag {
		return Config{}, fmt.Errorf("%w: %s: %d is below %s %d", ErrInvalidConfig, MaxCompactionLagMs,
			c.MaxCompactionLag.Milliseconds(), MinCompactionLagMs, c.MinCompactionLag.Milliseconds())
	}
	if c.LocalRetention == -2*time.Millisecond {
		c.LocalRetention = c.Retention
	}
	if c.LocalRetentionBytes == -2 {
		c.LocalRetentionBytes = c.RetentionBytes
	}
	return c, nil
}

// Entry is one config as DescribeConfigs shows it.
type Entry struct {
	Def
	Value     string
	IsDefault bool // true when the topic does not override it
}

// Describe lists every config of a topic with its effective value, sorted by
// name.
func (d Defaults) Describe(overrides map[string]string) []Entry {
	out := make([]Entry, 0, len(defs))
	for _, def := range Defs() {
		e := Entry{Def: def, Value: d[def.Name], IsDefault: true}
		if v, ok := overrides[def.Name]; ok {
			e.Value, e.IsDefault = v, false
		}
		out = append(out, e)
	}
	return out
}
