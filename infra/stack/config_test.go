package stack

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// badConfigs are invalid settings and the context key the error must name.
var badConfigs = []struct {
	name   string
	ctx    map[string]any
	key    string
	reason string // a fragment of the message
}{
	{"zero brokers", map[string]any{"brokerCount": 0}, "brokerCount", "must be at least 1, got 0"},
	{"zero brokers as a string", map[string]any{"brokerCount": "0"}, "brokerCount", "must be at least 1"},
	{"brokers not a number", map[string]any{"brokerCount": "three"}, "brokerCount", "whole number"},
	{"fractional brokers", map[string]any{"brokerCount": 2.5}, "brokerCount", "whole number"},
	{"storage below the segment size", map[string]any{"storageGiB": 21, "segmentBytes": 16 * GiB}, "storageGiB", "storage below the segment size"},
	{"storage below Fargate's minimum", map[string]any{"storageGiB": 20}, "storageGiB", "21 to 200"},
	{"storage above Fargate's maximum", map[string]any{"storageGiB": "201"}, "storageGiB", "21 to 200"},
	{"unknown CPU", map[string]any{"brokerCpu": 1000}, "brokerCpu", "Fargate CPU must be"},
	{"unknown CPU/memory pair", map[string]any{"brokerCpu": 1024, "brokerMemoryMiB": 1024}, "brokerMemoryMiB", "Fargate does not run 1024 MiB with brokerCpu 1024"},
	{"memory off the step", map[string]any{"brokerCpu": "8192", "brokerMemoryMiB": "17408"}, "brokerMemoryMiB", "steps of 4096"},
	{"zero retention", map[string]any{"retentionDays": 0}, "retentionDays", "at least 1"},
	{"no NAT", map[string]any{"natGateways": 0}, "natGateways", "must be 1 to 3"},
	{"zero lag threshold", map[string]any{"lagAlarmThreshold": 0}, "lagAlarmThreshold", "at least 1"},
	{"bad cluster name", map[string]any{"clusterName": "Strata_Prod"}, "clusterName", "lower-case"},
	{"bad e-mail", map[string]any{"alarmEmail": "ops"}, "alarmEmail", "e-mail"},
	{"esm example not a bool", map[string]any{"esmExample": "yes please"}, "esmExample", "true or false"},
	{"bad trigger topic", map[string]any{"triggerTopics": "orders,bad topic", "triggerFunction": "f"}, "triggerTopics", "not a topic name"},
	{"bad retry topic", map[string]any{"retryTopics": "a;b"}, "retryTopics", "not a topic name"},
	{"bad security group", map[string]any{"clientSecurityGroups": "sg-0123456789abcdef0,default"}, "clientSecurityGroups", "not a security group id"},
	{"bad certificate name", map[string]any{"certNames": "kafka.example.com,*.*.example.com"}, "certNames", "neither a DNS name"},
	{"certificate outlives the CA", map[string]any{"certValidityDays": 4000}, "certValidityDays", "1 to 3650"},
	{"no noncurrent versions", map[string]any{"noncurrentVersionDays": 0}, "noncurrentVersionDays", "1 to 3650"},
	{"rotation with a space", map[string]any{"tlsRotation": "2026 01"}, "tlsRotation", "up to 64"},
	{"trigger topics without function", map[string]any{"triggerTopics": "orders"}, "triggerFunction", "set both or neither"},
	{"queue triggers not JSON", map[string]any{"queueTriggers": "orders"}, "queueTriggers", "JSON list"},
	{"queue trigger with an unknown field", map[string]any{"queueTriggers": `[{"name": "a", "topics": ["a"], "function": "f", "topic": "a"}]`}, "queueTriggers", "unknown field"},
	{"queue trigger without a name", map[string]any{"queueTriggers": []any{map[string]any{"topics": []any{"a"}, "function": "f"}}}, "queueTriggers", "entry 0: name"},
	{"queue trigger without topics", map[string]any{"queueTriggers": `[{"name": "a", "function": "f"}]`}, "queueTriggers", "at least one topic"},
	{"queue trigger without a function", map[string]any{"queueTriggers": `[{"name": "a", "topics": ["a"]}]`}, "queueTriggers", "function"},
	{"queue trigger with a bad topic", map[string]any{"queueTriggers": `[{"name": "a", "topics": ["a b"], "function": "f"}]`}, "queueTriggers", "not a topic name"},
	{"queue triggers with one name", map[string]any{"queueTriggers": `[{"name": "a", "topics": ["a"], "function": "f"}, {"name": "a", "group": "g", "topics": ["b"], "function": "f"}]`}, "queueTriggers", "entry 1: name \"a\" is used twice"},
	{"queue triggers with one group", map[string]any{"queueTriggers": `[{"name": "a", "group": "g", "topics": ["a"], "function": "f"}, {"name": "b", "group": "g", "topics": ["b"], "function": "f"}]`}, "queueTriggers", "used twice"},
	{"queue group is the trigger's group", map[string]any{"queueTriggers": `[{"name": "a", "group": "strata-trigger", "topics": ["a"], "function": "f"}]`}, "queueTriggers", "consumer group of another function"},
	{"queue trigger rate", map[string]any{"queueTriggers": `[{"name": "a", "topics": ["a"], "function": "f", "rateMinutes": 1441}]`}, "queueTriggers", "1 to 1440"},
	{"queue trigger batch", map[string]any{"queueTriggers": `[{"name": "a", "topics": ["a"], "function": "f", "batchSize": 10001}]`}, "queueTriggers", "batchSize"},
	{"negative queue age threshold", map[string]any{"queueTriggers": `[{"name": "a", "topics": ["a"], "function": "f", "ageAlarmSeconds": -1}]`}, "queueTriggers", "ageAlarmSeconds"},
	{"zero queue age threshold", map[string]any{"queueAgeAlarmSeconds": 0}, "queueAgeAlarmSeconds", "at least 1"},
}

// TestValidate checks Validate on configs built the way ConfigFromContext
// builds them.
func TestValidate(t *testing.T) {
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			r := reader{ctx: mapContext(tc.ctx)}
			readSettings(&r, &cfg)
			err := r.err
			if err == nil {
				err = cfg.Validate()
			}
			checkSettingError(t, err, tc.key, tc.reason)
		})
	}
}

// TestAppRejectsBadContext goes through the app build path main uses.
func TestAppRejectsBadContext(t *testing.T) {
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			ctx := map[string]any{"functionsDir": filepath.Join(testDir, "functions")}
			for k, v := range tc.ctx {
				ctx[k] = v
			}
			app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
			s, err := NewFromContext(app)
			if s != nil {
				t.Errorf("got a stack")
			}
			checkSettingError(t, err, tc.key, tc.reason)
		})
	}
}

func TestAppNeedsBootstraps(t *testing.T) {
	empty := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"functionsDir": empty}})
	_, err := NewFromContext(app)
	if err == nil {
		t.Fatal("no error without bootstrap files")
	}
	for _, want := range []string{"make lambdas", filepath.Join(empty, "trigger", "bootstrap"), filepath.Join(empty, "dlqconsole", "bootstrap")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func checkSettingError(t *testing.T, err error, key, reason string) {
	t.Helper()
	var se *SettingError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *SettingError for %s", err, key)
	}
	if se.Key != key {
		t.Errorf("error names %q, want %q: %v", se.Key, key, err)
	}
	if !strings.HasPrefix(err.Error(), "context "+key+": ") || !strings.Contains(err.Error(), reason) {
		t.Errorf("error %q: want it to start with %q and contain %q", err, "context "+key+": ", reason)
	}
}

// mapContext serves context from a map, as an App does.
type mapContext map[string]any

func (m mapContext) TryGetContext(key *string) any { return m[*key] }

func TestContextTypes(t *testing.T) {
	// cdk.json gives JSON numbers and booleans, `-c key=value` strings.
	for _, ctx := range []map[string]any{
		{"brokerCount": float64(5), "esmExample": true, "storageGiB": float64(100), "segmentBytes": float64(512 << 20)},
		{"brokerCount": "5", "esmExample": "true", "storageGiB": " 100 ", "segmentBytes": "536870912"},
	} {
		cfg, err := ConfigFromContext(mapContext(ctx))
		if err != nil {
			t.Fatalf("%v: %v", ctx, err)
		}
		if cfg.BrokerCount != 5 || !cfg.ESMExample || cfg.StorageGiB != 100 || cfg.SegmentBytes != 512<<20 {
			t.Errorf("%v: got %+v", ctx, cfg)
		}
		if cfg.BrokerCPU != 1024 || cfg.RetentionDays != 7 || cfg.ClusterName != "strata" {
			t.Errorf("%v: defaults lost: %+v", ctx, cfg)
		}
		if !filepath.IsAbs(cfg.RepoRoot) || cfg.FunctionsDir != filepath.Join(cfg.RepoRoot, "functions") {
			t.Errorf("paths: repo %q, functions %q", cfg.RepoRoot, cfg.FunctionsDir)
		}
	}
}

func TestMinHealthyPercent(t *testing.T) {
	for n := 1; n <= 99; n++ {
		c := DefaultConfig()
		c.BrokerCount = n
		p := c.MinHealthyPercent()
		// ECS keeps ceil(n*p/100) tasks; with a maximum of 100% it may
		// stop n minus that many at once. Exactly one.
		keep := (n*p + 99) / 100
		if n-keep != 1 {
			t.Errorf("%d brokers: min healthy %d%% keeps %d, stops %d at once", n, p, keep, n-keep)
		}
	}
	c := DefaultConfig()
	if got := c.MinHealthyPercent(); got != 66 {
		t.Errorf("3 brokers: min healthy %d, want 66", got)
	}
}

func TestFargateSizes(t *testing.T) {
	ok := [][2]int{{256, 512}, {256, 2048}, {512, 4096}, {1024, 2048}, {1024, 8192}, {2048, 16384}, {4096, 30720}, {8192, 61440}, {16384, 122880}}
	bad := [][2]int{{256, 4096}, {512, 512}, {1024, 9216}, {2048, 3072}, {4096, 31744}, {8192, 18432}, {16384, 36864}, {3072, 8192}}
	for _, s := range ok {
		if err := validateFargateSize(s[0], s[1]); err != nil {
			t.Errorf("%v: %v", s, err)
		}
	}
	for _, s := range bad {
		if err := validateFargateSize(s[0], s[1]); err == nil {
			t.Errorf("%v accepted", s)
		}
	}
}
