package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// QueueTrigger is one deployment of functions/trigger in queue mode
// (STRATA_QUEUE=true): it reads Topics through the share group Group
// (KIP-932) and invokes Function with each batch, acknowledging every
// record from the function's batchItemFailures answer. Each queue
// trigger is its own Lambda function with its own SCRAM user
// (strata-queue-<name>), on its own schedule. The context key
// queueTriggers holds a JSON list of them (in cdk.json a list, with -c
// the list as a JSON string):
//
//	[{"name": "orders", "topics": ["orders"], "function": "order-handler"}]
type QueueTrigger struct {
	Name        string   `json:"name"`        // 1-24 of a-z 0-9 -: the construct and the user strata-queue-<name>
	Group       string   `json:"group"`       // the share group (default strata-queue-<name>)
	Topics      []string `json:"topics"`      // topics it reads, at least one
	Function    string   `json:"function"`    // name or ARN of the function it invokes
	RateMinutes int      `json:"rateMinutes"` // schedule (default 1, 1-1440); its timeout is the period, at most 15 min
	BatchSize   int      `json:"batchSize"`   // STRATA_BATCH_SIZE, records per invocation (default: the trigger's 100)
	MaxAttempts int      `json:"maxAttempts"` // STRATA_MAX_ATTEMPTS, deliveries before REJECT (default: the trigger's 3)
	// AgeAlarmSeconds is the threshold of the group's alarm on its oldest
	// available record (default: queueAgeAlarmSeconds).
	AgeAlarmSeconds int `json:"ageAlarmSeconds"`
}

// QueueUserPrefix starts the SCRAM user name of every queue trigger.
const QueueUserPrefix = "strata-queue-"

var queueNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,22}[a-z0-9])?$`)

// FunctionKey is the queue trigger's key among the functions (and their
// users): "queue-<name>".
func (q QueueTrigger) FunctionKey() string { return "queue-" + q.Name }

// User is the queue trigger's SCRAM user.
func (q QueueTrigger) User() string { return QueueUserPrefix + q.Name }

// QueueTriggerList is queueTriggers with the defaults filled in.
func (c Config) QueueTriggerList() []QueueTrigger {
	out := make([]QueueTrigger, len(c.QueueTriggers))
	for i, q := range c.QueueTriggers {
		out[i] = q.withDefaults()
	}
	return out
}

// withDefaults fills Group and RateMinutes.
func (q QueueTrigger) withDefaults() QueueTrigger {
	if q.Group == "" {
		q.Group = q.User()
	}
	if q.RateMinutes == 0 {
		q.RateMinutes = 1
	}
	return q
}

// validateQueueTriggers checks the queue triggers: names and groups
// unique, groups other than the consumer groups of the other functions
// (Kafka groups of both kinds share one namespace), the trigger's own
// rules on batch size and attempts.
func (c Config) validateQueueTriggers() error {
	bad := func(i int, format string, args ...any) error {
		return invalid("queueTriggers", "entry %d: %s", i, fmt.Sprintf(format, args...))
	}
	names, groups := map[string]bool{}, map[string]bool{}
	taken := map[string]bool{c.TriggerGroup: true, RetryWorkerGroup: true, DLQConsoleGroup: true}
	for i, q := range c.QueueTriggerList() {
		switch {
		case !queueNameRE.MatchString(q.Name):
			return bad(i, "name: want 1-24 lower-case letters, digits or '-', got %q", q.Name)
		case names[q.Name]:
			return bad(i, "name %q is used twice", q.Name)
		case strings.TrimSpace(q.Group) != q.Group || q.Group == "":
			return bad(i, "group: want a share group name, got %q", q.Group)
		case groups[q.Group]:
			return bad(i, "group %q is used twice", q.Group)
		case taken[q.Group]:
			return bad(i, "group %q is the consumer group of another function", q.Group)
		case len(q.Topics) == 0:
			return bad(i, "topics: want at least one topic")
		case q.Function == "" || strings.ContainsAny(q.Function, " ,"):
			return bad(i, "function: want one function name or ARN, got %q", q.Function)
		case q.RateMinutes < 1 || q.RateMinutes > 1440:
			return bad(i, "rateMinutes must be 1 to 1440, got %d", q.RateMinutes)
		case q.BatchSize < 0 || q.BatchSize > 10000:
			return bad(i, "batchSize must be 1 to 10000 (0: the trigger's default), got %d", q.BatchSize)
		case q.MaxAttempts < 0:
			return bad(i, "maxAttempts must be at least 1 (0: the trigger's default), got %d", q.MaxAttempts)
		case q.AgeAlarmSeconds < 0:
			return bad(i, "ageAlarmSeconds must be at least 1 (0: queueAgeAlarmSeconds), got %d", q.AgeAlarmSeconds)
		}
		for _, t := range q.Topics {
			if !topicRE.MatchString(t) || t == "." || t == ".." {
				return bad(i, "%q is not a topic name (1-243 of a-z A-Z 0-9 . _ -)", t)
			}
		}
		names[q.Name], groups[q.Group] = true, true
	}
	if c.QueueAgeAlarmSeconds < 1 {
		return invalid("queueAgeAlarmSeconds", "must be at least 1, got %d", c.QueueAgeAlarmSeconds)
	}
	return nil
}

// queueTriggers reads the queue triggers: a JSON list (cdk.json) or a
// string holding one (-c queueTriggers='[...]'). Unknown fields are
// errors, so a misspelt setting is not silently dropped.
func (r *reader) queueTriggers(dst *[]QueueTrigger, key string) {
	v, ok := r.get(key)
	if !ok {
		return
	}
	raw, isString := v.(string)
	if !isString {
		b, err := json.Marshal(v)
		if err != nil {
			r.fail(key, v, "a JSON list of queue triggers")
			return
		}
		raw = string(b)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var qs []QueueTrigger
	if err := dec.Decode(&qs); err != nil {
		r.err = invalid(key, "want a JSON list of {name, group, topics, function, rateMinutes, batchSize, maxAttempts, ageAlarmSeconds}: %v", err)
		return
	}
	*dst = qs
}

// QueuePrincipal reads the queue trigger's topics through its share
// group: READ on the group (ShareGroupHeartbeat, ShareFetch and
// ShareAcknowledge check it) and on each topic (which implies DESCRIBE,
// what the heartbeat checks). It writes nothing: the share group itself
// archives what the trigger rejects and copies it to the group's
// dead-letter topic when one is configured.
func QueuePrincipal(q QueueTrigger) Principal {
	acls := []ACL{{Resource: "group", Name: q.Group, Ops: []string{"read"}}}
	acls = append(acls, topicACLs(q.Topics, "read")...)
	key := "QUEUE_" + strings.ToUpper(strings.ReplaceAll(q.Name, "-", "_"))
	return Principal{Key: key, Name: q.User(), ACLs: acls}
}
