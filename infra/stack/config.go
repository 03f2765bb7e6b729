package stack

import (
	"fmt"
	"net"
	"net/mail"
	"regexp"
	"strings"
)

// Config is every setting of the Strata stack. Each field is filled from
// the CDK context key named in its comment (cdk.json, or `cdk synth -c
// key=value`); DefaultConfig holds the defaults and Validate the rules.
type Config struct {
	ClusterName           string         // clusterName: STRATA_CLUSTER_ID and the metrics' Cluster dimension
	BrokerCount           int            // brokerCount: Fargate tasks, one broker each
	BrokerCPU             int            // brokerCpu: CPU units per broker task (1024 = 1 vCPU)
	BrokerMemoryMiB       int            // brokerMemoryMiB: memory per broker task
	StorageGiB            int            // storageGiB: Fargate ephemeral storage per task, 21-200
	SegmentBytes          int64          // segmentBytes: segment.bytes topic default
	RetentionDays         int            // retentionDays: retention.ms topic default, in days
	LifecycleMarginDays   int            // lifecycleMarginDays: S3 objects expire after retentionDays plus this
	NATGateways           int            // natGateways: NAT gateways of the VPC, 1-3
	LagAlarmThreshold     int            // lagAlarmThreshold: alarm when MaxConsumerGroupLag is above this
	ProduceErrorThreshold int            // produceErrorThreshold: alarm when ProduceErrors over 5 minutes are above this
	AlarmEmail            string         // alarmEmail: when set, alarms notify this address through SNS
	RetryRateMinutes      int            // retryRateMinutes: how often the retry worker runs
	TriggerTopics         string         // triggerTopics: topics the trigger function consumes (comma-separated)
	TriggerGroup          string         // triggerGroup: the trigger's consumer group
	TriggerFunction       string         // triggerFunction: name or ARN of the function the trigger invokes
	TriggerRateMinutes    int            // triggerRateMinutes: how often the trigger runs (when configured)
	QueueTriggers         []QueueTrigger // queueTriggers: deployments of the trigger in queue mode, each reading through a share group (queue.go)
	QueueAgeAlarmSeconds  int            // queueAgeAlarmSeconds: alarm when a queue trigger's oldest available record is older than this (its ageAlarmSeconds overrides)
	RetryTopics           string         // retryTopics: origin topics whose .retry and .dlq the retry worker and the DLQ console handle (default: triggerTopics)
	ClientSecurityGroups  string         // clientSecurityGroups: security groups (ids, comma-separated) admitted to Kafka and the schema registry
	CertNames             string         // certNames: more DNS names or IP addresses in the broker certificate (comma-separated)
	CertValidityDays      int            // certValidityDays: the broker certificate's lifetime
	TLSRotation           string         // tlsRotation: change it to issue a new broker certificate
	CARotation            string         // caRotation: change it to add a new CA (it signs from the next tlsRotation on)
	NoncurrentVersionDays int            // noncurrentVersionDays: S3 noncurrent object versions expire after this
	ESMExample            bool           // esmExample: deploy an example function fed by Lambda's own Kafka event source
	ESMExampleTopic       string         // esmExampleTopic: the topic the example consumes
	FunctionsDir          string         // functionsDir: folder holding <name>/bootstrap (default: <repo>/functions)
	RepoRoot              string         // repoRoot: the Docker build context (default: found from the working directory)
}

// GiB is 2^30 bytes.
const GiB = 1 << 30

// DefaultConfig is a three-broker cluster of 1 vCPU / 2 GiB tasks with
// 50 GiB of storage each, 1 GiB segments and a week of retention.
func DefaultConfig() Config {
	return Config{
		ClusterName:           "strata",
		BrokerCount:           3,
		BrokerCPU:             1024,
		BrokerMemoryMiB:       2048,
		StorageGiB:            50,
		SegmentBytes:          GiB,
		RetentionDays:         7,
		LifecycleMarginDays:   7,
		NATGateways:           1,
		LagAlarmThreshold:     10000,
		ProduceErrorThreshold: 10,
		RetryRateMinutes:      1,
		TriggerGroup:          "strata-trigger",
		TriggerRateMinutes:    1,
		QueueAgeAlarmSeconds:  900,
		CertValidityDays:      730,
		NoncurrentVersionDays: 7,
		ESMExampleTopic:       "strata-esm-example",
	}
}

// SettingError is returned when a context setting does not parse or is
// out of range.
type SettingError struct {
	Key    string // the context key, e.g. "brokerCount"
	Reason string
}

func (e *SettingError) Error() string { return "context " + e.Key + ": " + e.Reason }

func invalid(key, format string, args ...any) error {
	return &SettingError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// Validate checks every setting and returns the first problem, naming its
// context key.
func (c Config) Validate() error {
	switch {
	case !clusterNameRE.MatchString(c.ClusterName):
		return invalid("clusterName", "want 1-32 lower-case letters, digits or '-', got %q", c.ClusterName)
	case c.BrokerCount < 1:
		return invalid("brokerCount", "must be at least 1, got %d", c.BrokerCount)
	case c.BrokerCount > 99:
		return invalid("brokerCount", "must be at most 99, got %d", c.BrokerCount)
	}
	if err := validateFargateSize(c.BrokerCPU, c.BrokerMemoryMiB); err != nil {
		return err
	}
	switch {
	case c.SegmentBytes < 1<<20:
		return invalid("segmentBytes", "must be at least 1 MiB (1048576), got %d", c.SegmentBytes)
	case c.StorageGiB < 21 || c.StorageGiB > 200:
		return invalid("storageGiB", "Fargate ephemeral storage is 21 to 200 GiB, got %d", c.StorageGiB)
	case int64(c.StorageGiB)*GiB < 2*c.SegmentBytes:
		return invalid("storageGiB", "storage below the segment size: %d GiB holds fewer than two segments of segmentBytes %d (need at least %d GiB)",
			c.StorageGiB, c.SegmentBytes, (2*c.SegmentBytes+GiB-1)/GiB)
	case c.RetentionDays < 1:
		return invalid("retentionDays", "must be at least 1, got %d", c.RetentionDays)
	case c.RetentionDays > 36500:
		return invalid("retentionDays", "must be at most 36500, got %d", c.RetentionDays)
	case c.LifecycleMarginDays < 1:
		return invalid("lifecycleMarginDays", "must be at least 1, got %d", c.LifecycleMarginDays)
	case c.NATGateways < 1 || c.NATGateways > maxAZs:
		return invalid("natGateways", "must be 1 to %d (the brokers and functions need egress), got %d", maxAZs, c.NATGateways)
	case c.LagAlarmThreshold < 1:
		return invalid("lagAlarmThreshold", "must be at least 1, got %d", c.LagAlarmThreshold)
	case c.ProduceErrorThreshold < 0:
		return invalid("produceErrorThreshold", "must not be negative, got %d", c.ProduceErrorThreshold)
	case c.RetryRateMinutes < 1 || c.RetryRateMinutes > 1440:
		return invalid("retryRateMinutes", "must be 1 to 1440, got %d", c.RetryRateMinutes)
	case c.TriggerRateMinutes < 1 || c.TriggerRateMinutes > 1440:
		return invalid("triggerRateMinutes", "must be 1 to 1440, got %d", c.TriggerRateMinutes)
	case c.TriggerGroup == "":
		return invalid("triggerGroup", "must not be empty")
	case (c.TriggerTopics == "") != (c.TriggerFunction == ""):
		key := "triggerTopics"
		if c.TriggerFunction == "" {
			key = "triggerFunction"
		}
		return invalid(key, "triggerTopics and triggerFunction go together: set both or neither")
	}
	if c.AlarmEmail != "" {
		if a, err := mail.ParseAddress(c.AlarmEmail); err != nil || a.Address != c.AlarmEmail {
			return invalid("alarmEmail", "want an e-mail address, got %q", c.AlarmEmail)
		}
	}
	if strings.ContainsAny(c.TriggerFunction, " ,") {
		return invalid("triggerFunction", "want one function name or ARN, got %q", c.TriggerFunction)
	}
	if err := c.validateQueueTriggers(); err != nil {
		return err
	}
	return c.validateSecurity()
}

var (
	// A Kafka topic name short enough to take a ".retry" suffix.
	topicRE    = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,243}$`)
	sgRE       = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	certNameRE = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)
	rotationRE = regexp.MustCompile(`^[a-zA-Z0-9._:-]{0,64}$`)
)

// validateSecurity checks the settings of the TLS, ACL and network rules.
func (c Config) validateSecurity() error {
	for key, topics := range map[string][]string{"triggerTopics": c.TriggerTopicList(), "retryTopics": list(c.RetryTopics), "esmExampleTopic": {c.ESMExampleTopic}} {
		for _, t := range topics {
			if !topicRE.MatchString(t) || t == "." || t == ".." {
				return invalid(key, "%q is not a topic name (1-243 of a-z A-Z 0-9 . _ -)", t)
			}
		}
	}
	for _, sg := range c.ClientSecurityGroupList() {
		if !sgRE.MatchString(sg) {
			return invalid("clientSecurityGroups", "%q is not a security group id (sg-...)", sg)
		}
	}
	for _, n := range c.CertNameList() {
		if !certNameRE.MatchString(n) && net.ParseIP(n) == nil {
			return invalid("certNames", "%q is neither a DNS name (a leading *. allowed) nor an IP address", n)
		}
	}
	switch {
	case c.CertValidityDays < 1 || c.CertValidityDays > 3650:
		return invalid("certValidityDays", "must be 1 to 3650 (the CA's lifetime), got %d", c.CertValidityDays)
	case c.NoncurrentVersionDays < 1 || c.NoncurrentVersionDays > 3650:
		return invalid("noncurrentVersionDays", "must be 1 to 3650, got %d", c.NoncurrentVersionDays)
	case !rotationRE.MatchString(c.TLSRotation):
		return invalid("tlsRotation", "want up to 64 of a-z A-Z 0-9 . _ : -, got %q", c.TLSRotation)
	case !rotationRE.MatchString(c.CARotation):
		return invalid("caRotation", "want up to 64 of a-z A-Z 0-9 . _ : -, got %q", c.CARotation)
	}
	return nil
}

// list splits a comma-separated setting, dropping empty items.
func list(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// TriggerTopicList is triggerTopics as a list.
func (c Config) TriggerTopicList() []string { return list(c.TriggerTopics) }

// RetryTopicList is the origin topics of the retry worker and the DLQ
// console: retryTopics, else triggerTopics.
func (c Config) RetryTopicList() []string {
	if t := list(c.RetryTopics); len(t) > 0 {
		return t
	}
	return c.TriggerTopicList()
}

// ClientSecurityGroupList is clientSecurityGroups as a list.
func (c Config) ClientSecurityGroupList() []string { return list(c.ClientSecurityGroups) }

// CertNameList is certNames as a list.
func (c Config) CertNameList() []string { return list(c.CertNames) }

// fargateSizes lists, per CPU value, the memory sizes (MiB) Fargate accepts:
// https://docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-tasks-services.html#fargate-tasks-size
var fargateSizes = map[int][]int{
	256:   {512, 1024, 2048},
	512:   steps(1024, 4096, 1024),
	1024:  steps(2048, 8192, 1024),
	2048:  steps(4096, 16384, 1024),
	4096:  steps(8192, 30720, 1024),
	8192:  steps(16384, 61440, 4096),
	16384: steps(32768, 122880, 8192),
}

func steps(from, to, step int) []int {
	var s []int
	for m := from; m <= to; m += step {
		s = append(s, m)
	}
	return s
}

func validateFargateSize(cpu, memory int) error {
	mems, ok := fargateSizes[cpu]
	if !ok {
		return invalid("brokerCpu", "Fargate CPU must be 256, 512, 1024, 2048, 4096, 8192 or 16384, got %d", cpu)
	}
	for _, m := range mems {
		if m == memory {
			return nil
		}
	}
	if cpu == 256 {
		return invalid("brokerMemoryMiB", "Fargate does not run %d MiB with brokerCpu %d: want 512, 1024 or 2048", memory, cpu)
	}
	return invalid("brokerMemoryMiB", "Fargate does not run %d MiB with brokerCpu %d: want %d to %d MiB in steps of %d",
		memory, cpu, mems[0], mems[len(mems)-1], mems[1]-mems[0])
}

// ReplicationFactor is the default replication factor of new topics: 3, or
// fewer when the cluster has fewer brokers.
func (c Config) ReplicationFactor() int { return min(3, c.BrokerCount) }

// RetentionMs is retentionDays in milliseconds.
func (c Config) RetentionMs() int64 { return int64(c.RetentionDays) * 24 * 3600 * 1000 }

// MinHealthyPercent is the largest minimum healthy percent that still lets
// ECS stop one broker: ECS keeps ceil(count*percent/100) tasks running, so
// with a maximum of 100% a rolling deploy replaces one broker at a time (0
// for a single broker, which must stop before its replacement starts).
func (c Config) MinHealthyPercent() int {
	p := 0
	for q := 0; q < 100; q++ {
		if (c.BrokerCount*q+99)/100 <= c.BrokerCount-1 {
			p = q
		}
	}
	return p
}
