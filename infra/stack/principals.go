package stack

import (
	"fmt"
	"sort"
	"strings"
)

// Principal is a SCRAM user of the cluster with the ACLs it needs: the
// brokers create it at every start from its Secrets Manager secret
// (`serve -scram-users-from-env`) and give it exactly these ACLs
// (`-acls-from-env`). Key names its variables in the broker task:
// STRATA_SCRAM_USER_<Key> (the secret) and STRATA_ACL_<Key> (the ACLs).
type Principal struct {
	Key  string // A-Z 0-9 _
	Name string // the SCRAM user name
	ACLs []ACL
}

// ACL allows Ops on the resources of one type matching Name (literally, or
// as a prefix when Prefixed).
type ACL struct {
	Resource string // "topic", "group" or "cluster"
	Name     string // the cluster is "kafka-cluster"
	Prefixed bool
	Ops      []string // "read", "write", "create", "describe", "describe_configs", ...
}

// ClusterResource is the name of Kafka's one cluster resource.
const ClusterResource = "kafka-cluster"

// The principals of every deployment. The admin and the brokers are super
// users; the broker principal is also how brokers authenticate to each
// other.
const (
	AdminUser       = "strata-admin"
	BrokerUser      = "strata-broker"
	TriggerUser     = "strata-trigger"
	RetryWorkerUser = "strata-retryworker"
	DLQConsoleUser  = "strata-dlqconsole"
)

// Consumer groups of the functions (their defaults in functions/).
const (
	RetryWorkerGroup = "strata-retryworker"
	DLQConsoleGroup  = "strata-dlq-console"
)

// Variables of the broker task the principals come through.
const (
	userEnvPrefix = "STRATA_SCRAM_USER_"
	aclEnvPrefix  = "STRATA_ACL_"
)

// UserEnv is the broker task variable holding p's secret.
func (p Principal) UserEnv() string { return userEnvPrefix + p.Key }

// ACLEnv is the broker task variable holding p's ACLs ("" without ACLs).
func (p Principal) ACLEnv() string {
	if len(p.ACLs) == 0 {
		return ""
	}
	return aclEnvPrefix + p.Key
}

// ACLSpec is p's ACLs in the syntax of `serve -acls-from-env`: entries
// "User:NAME RESOURCE[:prefixed] NAME OPS" separated by ";".
func (p Principal) ACLSpec() string {
	var entries []string
	for _, a := range p.ACLs {
		res := a.Resource
		if a.Prefixed {
			res += ":prefixed"
		}
		entries = append(entries, fmt.Sprintf("User:%s %s %s %s", p.Name, res, a.Name, strings.Join(a.Ops, ",")))
	}
	return strings.Join(entries, ";")
}

// SuperUsers is the brokers' -super-users.
func SuperUsers() string { return "User:" + AdminUser + ";User:" + BrokerUser }

// AdminPrincipal and BrokerPrincipal are the super users (no ACLs).
func AdminPrincipal() Principal  { return Principal{Key: "ADMIN", Name: AdminUser} }
func BrokerPrincipal() Principal { return Principal{Key: "BROKER", Name: BrokerUser} }

// topicACLs allows ops on each of the topics.
func topicACLs(topics []string, ops ...string) []ACL {
	var out []ACL
	for _, t := range topics {
		out = append(out, ACL{Resource: "topic", Name: t, Ops: ops})
	}
	return out
}

func suffixed(topics []string, suffix string) []string {
	out := make([]string, len(topics))
	for i, t := range topics {
		out[i] = t + suffix
	}
	return out
}

// TriggerPrincipal reads the trigger's topics in its group and routes
// failures to <topic>.retry and <topic>.dlq, which it may create.
func TriggerPrincipal(cfg Config) Principal {
	topics := cfg.TriggerTopicList()
	acls := []ACL{{Resource: "group", Name: cfg.TriggerGroup, Ops: []string{"read"}}}
	acls = append(acls, topicACLs(topics, "read")...)
	acls = append(acls, topicACLs(suffixed(topics, ".retry"), "write", "create")...)
	acls = append(acls, topicACLs(suffixed(topics, ".dlq"), "write", "create")...)
	return Principal{Key: "TRIGGER", Name: TriggerUser, ACLs: acls}
}

// RetryWorkerPrincipal reads <topic>.retry and writes back to <topic> or
// on to <topic>.dlq, for the origin topics of cfg.RetryTopicList. Kafka
// ACLs have no suffix patterns, so "every *.retry topic" is spelled out
// per origin topic.
func RetryWorkerPrincipal(cfg Config) Principal {
	topics := cfg.RetryTopicList()
	acls := []ACL{{Resource: "group", Name: RetryWorkerGroup, Ops: []string{"read"}}}
	acls = append(acls, topicACLs(suffixed(topics, ".retry"), "read")...)
	acls = append(acls, topicACLs(topics, "write")...)
	acls = append(acls, topicACLs(suffixed(topics, ".dlq"), "write")...)
	return Principal{Key: "RETRYWORKER", Name: RetryWorkerUser, ACLs: acls}
}

// DLQConsolePrincipal reads <topic>.dlq (its group's commits record what it
// handled) and replays to <topic>; for the console's other pages it may
// describe the cluster, every topic (and its configs and sizes) and every
// group (members, offsets, lag history), but read no other topic's
// records: grant READ on a topic to browse its messages.
func DLQConsolePrincipal(cfg Config) Principal {
	topics := cfg.RetryTopicList()
	acls := []ACL{
		{Resource: "group", Name: DLQConsoleGroup, Ops: []string{"read"}},
		{Resource: "cluster", Name: ClusterResource, Ops: []string{"describe"}},
		{Resource: "topic", Name: "*", Ops: []string{"describe", "describe_configs"}},
		{Resource: "group", Name: "*", Ops: []string{"describe"}},
	}
	acls = append(acls, topicACLs(suffixed(topics, ".dlq"), "read")...)
	acls = append(acls, topicACLs(topics, "write")...)
	return Principal{Key: "DLQCONSOLE", Name: DLQConsoleUser, ACLs: acls}
}

// EventSourcePrincipal has what AWS documents for Lambda's self-managed
// Kafka event source (DescribeConfigs on the cluster, Describe and Read on
// the group and the topic), plus Write on its on-failure destination
// <topic>.dlq.
func EventSourcePrincipal(key, user, topic, group string) Principal {
	return Principal{Key: key, Name: user, ACLs: []ACL{
		{Resource: "cluster", Name: ClusterResource, Ops: []string{"describe_configs"}},
		{Resource: "group", Name: group, Ops: []string{"describe", "read"}},
		{Resource: "topic", Name: topic, Ops: []string{"describe", "read"}},
		{Resource: "topic", Name: topic + ".dlq", Ops: []string{"describe", "write"}},
	}}
}

// FunctionPrincipals are the functions' principals, by function name:
// the three functions of every deployment and each queue trigger (as
// "queue-<name>").
func FunctionPrincipals(cfg Config) map[string]Principal {
	m := map[string]Principal{
		"trigger":     TriggerPrincipal(cfg),
		"retryworker": RetryWorkerPrincipal(cfg),
		"dlqconsole":  DLQConsolePrincipal(cfg),
	}
	for _, q := range cfg.QueueTriggerList() {
		m[q.FunctionKey()] = QueuePrincipal(q)
	}
	return m
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
