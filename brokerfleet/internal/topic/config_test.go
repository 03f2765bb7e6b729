package topic_test

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
)

// maxMs is the largest millisecond count that fits a time.Duration.
const maxMs = math.MaxInt64 / int64(time.Millisecond)

type valueCase struct {
	key     string
	value   string
	wantErr string // substring of the error after the key; "" means valid
	check   func(t *testing.T, c topic.Config)
}

func valueCases() []valueCase {
	i32 := fmt.Sprint(math.MaxInt32)
	i32p1 := fmt.Sprint(int64(math.MaxInt32) + 1)
	return []valueCase{
		// cleanup.policy
		{key: topic.CleanupPolicy, value: "delete", check: func(t *testing.T, c topic.Config) { require.True(t, !c.NoDelete && !c.Compact) }},
		{key: topic.CleanupPolicy, value: " delete "},
		{key: topic.CleanupPolicy, value: "compact", check: func(t *testing.T, c topic.Config) { require.True(t, c.Compact && c.NoDelete) }},
		{key: topic.CleanupPolicy, value: "compact,delete", check: func(t *testing.T, c topic.Config) { require.True(t, c.Compact && !c.NoDelete) }},
		{key: topic.CleanupPolicy, value: "delete, compact", check: func(t *testing.T, c topic.Config) { require.True(t, c.Compact && !c.NoDelete) }},
		{key: topic.CleanupPolicy, value: "Delete", wantErr: `not a list of delete and compact`},
		{key: topic.CleanupPolicy, value: "", wantErr: `not a list of delete and compact`},
		{key: topic.CleanupPolicy, value: "compact,", wantErr: `not a list of delete and compact`},

		// min.cleanable.dirty.ratio: a double in [0, 1]
		{key: topic.MinCleanableRatio, value: "0.5", check: func(t *testing.T, c topic.Config) { require.Equal(t, 0.5, c.MinCleanableRatio) }},
		{key: topic.MinCleanableRatio, value: "0"},
		{key: topic.MinCleanableRatio, value: "1"},
		{key: topic.MinCleanableRatio, value: "1.01", wantErr: "outside [0, 1]"},
		{key: topic.MinCleanableRatio, value: "-0.1", wantErr: "outside [0, 1]"},
		{key: topic.MinCleanableRatio, value: "NaN", wantErr: "outside [0, 1]"},
		{key: topic.MinCleanableRatio, value: "half", wantErr: "not a number"},

		// min/max.compaction.lag.ms, delete.retention.ms
		{key: topic.MinCompactionLagMs, value: "0"},
		{key: topic.MinCompactionLagMs, value: "-1", wantErr: "outside"},
		{key: topic.MaxCompactionLagMs, value: "9223372036854775807", check: func(t *testing.T, c topic.Config) { require.Equal(t, topic.MaxDuration, c.MaxCompactionLag) }},
		{key: topic.MaxCompactionLagMs, value: "0", wantErr: "outside"},
		{key: topic.DeleteRetentionMs, value: "1000", check: func(t *testing.T, c topic.Config) { require.Equal(t, time.Second, c.DeleteRetention) }},
		{key: topic.DeleteRetentionMs, value: "-1", wantErr: "outside"},
		{key: topic.DeleteRetentionMs, value: "day", wantErr: "not an integer"},

		// max.message.bytes: [0, MaxInt32]
		{key: topic.MaxMessageBytes, value: "0", check: func(t *testing.T, c topic.Config) { require.Zero(t, c.MaxMessageBytes) }},
		{key: topic.MaxMessageBytes, value: "1048588", check: func(t *testing.T, c topic.Config) { require.EqualValues(t, 1048588, c.MaxMessageBytes) }},
		{key: topic.MaxMessageBytes, value: " 42 ", check: func(t *testing.T, c topic.Config) { require.EqualValues(t, 42, c.MaxMessageBytes) }},
		{key: topic.MaxMessageBytes, value: i32, check: func(t *testing.T, c topic.Config) { require.EqualValues(t, math.MaxInt32, c.MaxMessageBytes) }},
		{key: topic.MaxMessageBytes, value: i32p1, wantErr: "outside [0, 2147483647]"},
		{key: topic.MaxMessageBytes, value: "-1", wantErr: "outside [0, 2147483647]"},
		{key: topic.MaxMessageBytes, value: "1.5", wantErr: "not an integer"},
		{key: topic.MaxMessageBytes, value: "1e6", wantErr: "not an integer"},
		{key: topic.MaxMessageBytes, value: "", wantErr: "not an integer"},
		{key: topic.MaxMessageBytes, value: "abc", wantErr: "not an integer"},

		// message.timestamp.type
		{key: topic.MessageTimestampType, value: "CreateTime", check: func(t *testing.T, c topic.Config) { require.False(t, c.LogAppendTime) }},
		{key: topic.MessageTimestampType, value: "LogAppendTime", check: func(t *testing.T, c topic.Config) { require.True(t, c.LogAppendTime) }},
		{key: topic.MessageTimestampType, value: "logappendtime", wantErr: "is not CreateTime or LogAppendTime"},
		{key: topic.MessageTimestampType, value: " CreateTime", wantErr: "is not CreateTime or LogAppendTime"},
		{key: topic.MessageTimestampType, value: "", wantErr: "is not CreateTime or LogAppendTime"},

		// min.insync.replicas: [1, MaxInt32]
		{key: topic.MinInsyncReplicas, value: "1", check: func(t *testing.T, c topic.Config) { require.EqualValues(t, 1, c.MinInsyncReplicas) }},
		{key: topic.MinInsyncReplicas, value: "3", check: func(t *testing.T, c topic.Config) { require.EqualValues(t, 3, c.MinInsyncReplicas) }},
		{key: topic.MinInsyncReplicas, value: i32, check: func(t *testing.T, c topic.Config) { require.EqualValues(t, math.MaxInt32, c.MinInsyncReplicas) }},
		{key: topic.MinInsyncReplicas, value: "0", wantErr: "outside [1, 2147483647]"},
		{key: topic.MinInsyncReplicas, value: "-1", wantErr: "outside [1, 2147483647]"},
		{key: topic.MinInsyncReplicas, value: i32p1, wantErr: "outside [1, 2147483647]"},
		{key: topic.MinInsyncReplicas, value: "two", wantErr: "not an integer"},

		// retention.bytes: [-1, MaxInt64]
		{key: topic.RetentionBytes, value: "-1", check: func(t *testing.T, c topic.Config) { require.EqualValues(t, -1, c.RetentionBytes) }},
		{key: topic.RetentionBytes, value: "0", check: func(t *testing.T, c topic.Config) { require.Zero(t, c.RetentionBytes) }},
		{key: topic.RetentionBytes, value: fmt.Sprint(int64(math.MaxInt64)), check: func(t *testing.T, c topic.Config) { require.EqualValues(t, int64(math.MaxInt64), c.RetentionBytes) }},
		{key: topic.RetentionBytes, value: "-2", wantErr: "outside [-1, 9223372036854775807]"},
		{key: topic.RetentionBytes, value: "9223372036854775808", wantErr: "not an integer"},
		{key: topic.RetentionBytes, value: "1GB", wantErr: "not an integer"},

		// retention.ms: [-1, MaxInt64/1e6]
		{key: topic.RetentionMs, value: "-1", check: func(t *testing.T, c topic.Config) { require.Equal(t, -time.Millisecond, c.Retention) }},
		{key: topic.RetentionMs, value: "0", check: func(t *testing.T, c topic.Config) { require.Zero(t, c.Retention) }},
		{key: topic.RetentionMs, value: "604800000", check: func(t *testing.T, c topic.Config) { require.Equal(t, 7*24*time.Hour, c.Retention) }},
		{key: topic.RetentionMs, value: fmt.Sprint(maxMs), check: func(t *testing.T, c topic.Config) {
			require.Equal(t, time.Duration(maxMs)*time.Millisecond, c.Retention)
		}},
		{key: topic.RetentionMs, value: fmt.Sprint(maxMs + 1), wantErr: fmt.Sprintf("outside [-1, %d]", maxMs)},
		{key: topic.RetentionMs, value: "-2", wantErr: "outside [-1,"},
		{key: topic.RetentionMs, value: "7d", wantErr: "not an integer"},

		// segment.bytes: [MinSegmentBytes, MaxInt32]
		{key: topic.SegmentBytes, value: fmt.Sprint(topic.MinSegmentBytes), check: func(t *testing.T, c topic.Config) { require.EqualValues(t, topic.MinSegmentBytes, c.SegmentBytes) }},
		{key: topic.SegmentBytes, value: "1073741824", check: func(t *testing.T, c topic.Config) { require.EqualValues(t, 1<<30, c.SegmentBytes) }},
		{key: topic.SegmentBytes, value: i32, check: func(t *testing.T, c topic.Config) { require.EqualValues(t, math.MaxInt32, c.SegmentBytes) }},
		{key: topic.SegmentBytes, value: fmt.Sprint(topic.MinSegmentBytes - 1), wantErr: "outside [1024, 2147483647]"},
		{key: topic.SegmentBytes, value: "0", wantErr: "outside [1024, 2147483647]"},
		{key: topic.SegmentBytes, value: i32p1, wantErr: "outside [1024, 2147483647]"},
		{key: topic.SegmentBytes, value: "1MiB", wantErr: "not an integer"},

		// segment.ms: [1, MaxInt64/1e6]
		{key: topic.SegmentMs, value: "1", check: func(t *testing.T, c topic.Config) { require.Equal(t, time.Millisecond, c.SegmentAge) }},
		{key: topic.SegmentMs, value: "3600000", check: func(t *testing.T, c topic.Config) { require.Equal(t, time.Hour, c.SegmentAge) }},
		{key: topic.SegmentMs, value: fmt.Sprint(maxMs), check: func(t *testing.T, c topic.Config) {
			require.Equal(t, time.Duration(maxMs)*time.Millisecond, c.SegmentAge)
		}},
		{key: topic.SegmentMs, value: "0", wantErr: "outside [1,"},
		{key: topic.SegmentMs, value: "-1", wantErr: "outside [1,"},
		{key: topic.SegmentMs, value: fmt.Sprint(maxMs + 1), wantErr: fmt.Sprintf("outside [1, %d]", maxMs)},

		// strata.durability
		{key: topic.Durability, value: topic.DurabilityReplicated, check: func(t *testing.T, c topic.Config) { require.Equal(t, topic.DurabilityReplicated, c.Durability) }},
		{key: topic.Durability, value: topic.DurabilityFsync, check: func(t *testing.T, c topic.Config) { require.Equal(t, topic.DurabilityFsync, c.Durability) }},
		{key: topic.Durability, value: topic.DurabilityObject, check: func(t *testing.T, c topic.Config) { require.Equal(t, topic.DurabilityObject, c.Durability) }},
		{key: topic.Durability, value: "s3", wantErr: `"s3" is not one of replicated, fsync, object`},
		{key: topic.Durability, value: "FSYNC", wantErr: "is not one of replicated, fsync"},
		{key: topic.Durability, value: "", wantErr: "is not one of replicated, fsync"},
	}
}

func TestValidateValue(t *testing.T) {
	for _, tc := range valueCases() {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			err := topic.ValidateValue(tc.key, tc.value)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, topic.ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.key)
			require.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestValidateValueUnknownKey(t *testing.T) {
	for _, key := range []string{"", "retention", "RETENTION.MS", "compression.type", "strata.durability "} {
		t.Run(key, func(t *testing.T) {
			err := topic.ValidateValue(key, "1")
			require.ErrorIs(t, err, topic.ErrInvalidConfig)
			require.Contains(t, err.Error(), fmt.Sprintf("unknown topic config %q", key))
		})
	}
}

// Resolve with one override applies it on top of the built-in defaults.
func TestResolveOneOverride(t *testing.T) {
	d, err := topic.NewDefaults(nil)
	require.NoError(t, err)
	for _, tc := range valueCases() {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			c, err := d.Resolve(map[string]string{tc.key: tc.value})
			if tc.wantErr != "" {
				require.ErrorIs(t, err, topic.ErrInvalidConfig)
				require.Contains(t, err.Error(), tc.key)
				require.Contains(t, err.Error(), tc.wantErr)
				require.Equal(t, topic.Config{}, c)
				return
			}
			require.NoError(t, err)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// NewDefaults with one broker override validates it like ValidateValue.
func TestNewDefaultsOneOverride(t *testing.T) {
	for _, tc := range valueCases() {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			d, err := topic.NewDefaults(map[string]string{tc.key: tc.value})
			if tc.wantErr != "" {
				require.ErrorIs(t, err, topic.ErrInvalidConfig)
				require.Contains(t, err.Error(), tc.key)
				require.Contains(t, err.Error(), tc.wantErr)
				require.Nil(t, d)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.value, d[tc.key])
			c, err := d.Resolve(nil)
			require.NoError(t, err)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func builtinConfig() topic.Config {
	return topic.Config{
		Retention:           7 * 24 * time.Hour,
		RetentionBytes:      -1,
		LocalRetention:      7 * 24 * time.Hour,
		LocalRetentionBytes: -1,
		SegmentBytes:        1 << 30,
		SegmentAge:          7 * 24 * time.Hour,
		MaxMessageBytes:     1048588,
		MinInsyncReplicas:   1,
		LogAppendTime:       false,
		Durability:          topic.DurabilityReplicated,
		MinCleanableRatio:   0.5,
		MaxCompactionLag:    topic.MaxDuration,
		DeleteRetention:     24 * time.Hour,
	}
}

func TestNewDefaults(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		wantErr   string
		want      map[string]string // expected entries besides the built-ins
	}{
		{name: "nil", overrides: nil},
		{name: "empty", overrides: map[string]string{}},
		{name: "several", overrides: map[string]string{topic.RetentionMs: "1000", topic.Durability: "fsync"},
			want: map[string]string{topic.RetentionMs: "1000", topic.Durability: "fsync"}},
		{name: "unknown key", overrides: map[string]string{"log.retention.hours": "1"}, wantErr: `unknown topic config "log.retention.hours"`},
		{name: "bad value", overrides: map[string]string{topic.SegmentBytes: "100"}, wantErr: "segment.bytes: 100 is outside [1024, 2147483647]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := topic.NewDefaults(tt.overrides)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, topic.ErrInvalidConfig)
				require.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			want := topic.Defaults{}
			for _, def := range topic.Defs() {
				want[def.Name] = def.Default
			}
			for k, v := range tt.want {
				want[k] = v
			}
			require.Equal(t, want, d)
		})
	}
}

func TestNewDefaultsDoesNotAliasOverrides(t *testing.T) {
	o := map[string]string{topic.RetentionMs: "1000"}
	d, err := topic.NewDefaults(o)
	require.NoError(t, err)
	o[topic.RetentionMs] = "2000"
	o["bogus"] = "x"
	require.Equal(t, "1000", d[topic.RetentionMs])
	require.NotContains(t, d, "bogus")
}

func TestResolve(t *testing.T) {
	broker := map[string]string{
		topic.RetentionMs:          "3600000",
		topic.MessageTimestampType: "LogAppendTime",
		topic.Durability:           "fsync",
	}
	d, err := topic.NewDefaults(broker)
	require.NoError(t, err)

	brokerCfg := builtinConfig()
	brokerCfg.Retention = time.Hour
	brokerCfg.LocalRetention = time.Hour // follows retention.ms
	brokerCfg.LogAppendTime = true
	brokerCfg.Durability = topic.DurabilityFsync

	tests := []struct {
		name      string
		defaults  topic.Defaults
		overrides map[string]string
		want      topic.Config
		wantErr   string
	}{
		{name: "built-in defaults", defaults: mustDefaults(t, nil), want: builtinConfig()},
		{name: "broker defaults", defaults: d, want: brokerCfg},
		{name: "empty overrides", defaults: d, overrides: map[string]string{}, want: brokerCfg},
		{name: "topic overrides win over broker defaults", defaults: d,
			overrides: map[string]string{
				topic.RetentionMs:          "-1",
				topic.MessageTimestampType: "CreateTime",
				topic.Durability:           "replicated",
				topic.SegmentBytes:         "1048576",
				topic.MinInsyncReplicas:    "2",
			},
			want: func() topic.Config {
				c := builtinConfig()
				c.Retention = -time.Millisecond
				c.LocalRetention = -time.Millisecond // follows retention.ms
				c.SegmentBytes = 1 << 20
				c.MinInsyncReplicas = 2
				return c
			}()},
		{name: "every key overridden", defaults: mustDefaults(t, nil),
			overrides: map[string]string{
				topic.CleanupPolicy:        "delete",
				topic.MaxMessageBytes:      "100",
				topic.MessageTimestampType: "LogAppendTime",
				topic.MinInsyncReplicas:    "2",
				topic.RetentionBytes:       "5000",
				topic.RetentionMs:          "60000",
				topic.SegmentBytes:         "2048",
				topic.SegmentMs:            "1000",
				topic.Durability:           "fsync",
			},
			want: topic.Config{
				Retention:           time.Minute,
				RetentionBytes:      5000,
				LocalRetention:      time.Minute,
				LocalRetentionBytes: 5000,
				SegmentBytes:        2048,
				SegmentAge:          time.Second,
				MaxMessageBytes:     100,
				MinInsyncReplicas:   2,
				LogAppendTime:       true,
				Durability:          topic.DurabilityFsync,
				MinCleanableRatio:   0.5,
				MaxCompactionLag:    topic.MaxDuration,
				DeleteRetention:     24 * time.Hour,
			}},
		{name: "max.compaction.lag.ms below min", defaults: d,
			overrides: map[string]string{topic.MinCompactionLagMs: "5000", topic.MaxCompactionLagMs: "4000"},
			wantErr:   "max.compaction.lag.ms: 4000 is below min.compaction.lag.ms 5000"},
		{name: "unknown key", defaults: d, overrides: map[string]string{"retention.hours": "1"},
			wantErr: `unknown topic config "retention.hours"`},
		{name: "unknown key beside valid keys", defaults: d,
			overrides: map[string]string{topic.RetentionMs: "1", "compression.type": "zstd"},
			wantErr:   `unknown topic config "compression.type"`},
		{name: "bad value", defaults: d, overrides: map[string]string{topic.MinInsyncReplicas: "0"},
			wantErr: "min.insync.replicas: 0 is outside [1, 2147483647]"},
		// A Defaults not built by NewDefaults lacks every key; the missing
		// values are empty strings, which no key accepts.
		{name: "empty defaults", defaults: topic.Defaults{}, wantErr: "invalid config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.defaults.Resolve(tt.overrides)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, topic.ErrInvalidConfig)
				require.Contains(t, err.Error(), tt.wantErr)
				require.Equal(t, topic.Config{}, c)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, c)
		})
	}
}

func mustDefaults(t *testing.T, o map[string]string) topic.Defaults {
	t.Helper()
	d, err := topic.NewDefaults(o)
	require.NoError(t, err)
	return d
}

func TestDefsAndLookup(t *testing.T) {
	keys := []string{
		topic.RetentionMs, topic.RetentionBytes, topic.SegmentBytes, topic.SegmentMs,
		topic.MaxMessageBytes, topic.MinInsyncReplicas, topic.CleanupPolicy,
		topic.MessageTimestampType, topic.Durability, topic.UncleanElection,
		topic.LocalRetentionMs, topic.LocalRetentionBytes, topic.SchemaValidation,
		topic.MinCleanableRatio, topic.MinCompactionLagMs, topic.MaxCompactionLagMs, topic.DeleteRetentionMs,
	}
	defs := topic.Defs()
	require.Len(t, defs, len(keys))
	require.True(t, sort.SliceIsSorted(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name }))
	for _, def := range defs {
		require.Contains(t, keys, def.Name)
		require.NotEmpty(t, def.Doc, def.Name)
		require.NoError(t, topic.ValidateValue(def.Name, def.Default), "default of %s", def.Name)
	}
	kinds := map[string]topic.Kind{
		topic.CleanupPolicy:        topic.KindList,
		topic.MaxMessageBytes:      topic.KindInt,
		topic.MessageTimestampType: topic.KindString,
		topic.MinInsyncReplicas:    topic.KindInt,
		topic.RetentionBytes:       topic.KindLong,
		topic.RetentionMs:          topic.KindLong,
		topic.SegmentBytes:         topic.KindInt,
		topic.SegmentMs:            topic.KindLong,
		topic.Durability:           topic.KindString,
		topic.UncleanElection:      topic.KindBoolean,
		topic.LocalRetentionMs:     topic.KindLong,
		topic.LocalRetentionBytes:  topic.KindLong,
		topic.SchemaValidation:     topic.KindBoolean,
		topic.MinCleanableRatio:    topic.KindDouble,
		topic.MinCompactionLagMs:   topic.KindLong,
		topic.MaxCompactionLagMs:   topic.KindLong,
		topic.DeleteRetentionMs:    topic.KindLong,
	}
	for _, key := range keys {
		def, ok := topic.Lookup(key)
		require.True(t, ok, key)
		require.Equal(t, key, def.Name)
		require.Equal(t, kinds[key], def.Kind, key)
	}
	_, ok := topic.Lookup("no.such.key")
	require.False(t, ok)

	// Defs returns a copy: changing it does not change the package's table.
	defs[0].Default = "changed"
	def, _ := topic.Lookup(defs[0].Name)
	require.NotEqual(t, "changed", def.Default)
}

func TestDescribe(t *testing.T) {
	d := mustDefaults(t, map[string]string{topic.RetentionMs: "1000"})
	tests := []struct {
		name      string
		overrides map[string]string
		want      map[string]string // key -> value of the overridden (IsDefault=false) entries
	}{
		{name: "no overrides", overrides: nil, want: map[string]string{}},
		{name: "one override", overrides: map[string]string{topic.SegmentBytes: "2048"},
			want: map[string]string{topic.SegmentBytes: "2048"}},
		{name: "override equal to the default is still an override", overrides: map[string]string{topic.CleanupPolicy: "delete"},
			want: map[string]string{topic.CleanupPolicy: "delete"}},
		{name: "override of a broker default", overrides: map[string]string{topic.RetentionMs: "5"},
			want: map[string]string{topic.RetentionMs: "5"}},
		{name: "unknown keys are not listed", overrides: map[string]string{"bogus": "1", topic.Durability: "fsync"},
			want: map[string]string{topic.Durability: "fsync"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := d.Describe(tt.overrides)
			require.Len(t, entries, len(topic.Defs()))
			require.True(t, sort.SliceIsSorted(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name }))
			for _, e := range entries {
				if v, ok := tt.want[e.Name]; ok {
					require.False(t, e.IsDefault, e.Name)
					require.Equal(t, v, e.Value, e.Name)
					continue
				}
				require.True(t, e.IsDefault, e.Name)
				require.Equal(t, d[e.Name], e.Value, e.Name)
				def, _ := topic.Lookup(e.Name)
				require.Equal(t, def.Kind, e.Kind)
				require.Equal(t, def.Default, e.Default)
			}
		})
	}
	// The broker default shows as the value of a non-overridden key.
	for _, e := range d.Describe(nil) {
		if e.Name == topic.RetentionMs {
			require.Equal(t, "1000", e.Value)
			require.Equal(t, "604800000", e.Default)
		}
	}
}
