package stack

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// queueContext is two queue triggers as cdk.json gives them (a JSON list),
// one with every setting, one with the defaults.
var queueContext = map[string]any{
	"queueTriggers": []any{
		map[string]any{"name": "orders", "group": "orders-queue", "topics": []any{"orders", "refunds"},
			"function": "arn:aws:lambda:eu-west-1:123456789012:function:order-handler", "rateMinutes": 5, "batchSize": 50, "maxAttempts": 4, "ageAlarmSeconds": 120},
		map[string]any{"name": "mail", "topics": []any{"mail"}, "function": "mailer"},
	},
	"queueAgeAlarmSeconds": 600,
	"alarmEmail":           "ops@example.com",
}

// TestQueueTriggers: each queue trigger is functions/trigger in queue
// mode with its own share group, topics, target and schedule, wired like
// the other Kafka functions (in the VPC, TLS and SCRAM from its own
// user's secret and the CA, reading those two only, invoking its target
// only), its user and ACLs reach the brokers, and an alarm on the age of
// the oldest available share-group record notifies the alarm topic.
func TestQueueTriggers(t *testing.T) {
	s := synth(t, queueContext)
	_, ca, _ := s.pkiSecrets(t)
	readers := s.roleSecrets()
	fnSG := ""
	for id := range s.resources("AWS::EC2::SecurityGroup") {
		if strings.HasPrefix(id, "NetworkFunctionSG") {
			fnSG = id
		}
	}
	want := map[string]map[string]string{
		"orders": {"STRATA_QUEUE": "true", "STRATA_GROUP": "orders-queue", "STRATA_TOPICS": "orders,refunds",
			"STRATA_FUNCTION": "arn:aws:lambda:eu-west-1:123456789012:function:order-handler", "STRATA_BATCH_SIZE": "50", "STRATA_MAX_ATTEMPTS": "4",
			"STRATA_BOOTSTRAP": Bootstrap},
		"mail": {"STRATA_QUEUE": "true", "STRATA_GROUP": "strata-queue-mail", "STRATA_TOPICS": "mail", "STRATA_FUNCTION": "mailer",
			"STRATA_BOOTSTRAP": Bootstrap},
	}
	timeouts := map[string]float64{"orders": 300, "mail": 60}
	found := map[string]bool{}
	for id, r := range s.resources("AWS::Lambda::Function") {
		p := props(r)
		env, _ := p["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if vars["STRATA_QUEUE"] == nil {
			continue
		}
		name := strings.TrimPrefix(s.secretUser(ref(vars["STRATA_SASL_SECRET_ARN"])), QueueUserPrefix)
		w, ok := want[name]
		if !ok || !strings.HasPrefix(id, "Functionsqueue"+name) {
			t.Errorf("%s: unexpected queue function (user %q)", id, name)
			continue
		}
		found[name] = true
		for k, v := range w {
			if vars[k] != v {
				t.Errorf("%s: %s = %v, want %q", id, k, vars[k], v)
			}
		}
		for _, k := range []string{"STRATA_BATCH_SIZE", "STRATA_MAX_ATTEMPTS"} {
			if _, ok := w[k]; !ok && vars[k] != nil {
				t.Errorf("%s: %s = %v, want the trigger's default", id, k, vars[k])
			}
		}
		if ref(vars["STRATA_TLS_CA_SECRET_ARN"]) != ca || vars["STRATA_TLS_CA_VERSION"] == nil {
			t.Errorf("%s: CA secret %v version %v", id, vars["STRATA_TLS_CA_SECRET_ARN"], vars["STRATA_TLS_CA_VERSION"])
		}
		if own := ref(vars["STRATA_SASL_SECRET_ARN"]); !slices.Equal(readers[ref(p["Role"])], sorted([]string{ca, own})) {
			t.Errorf("%s reads %v, want only the CA and its user", id, readers[ref(p["Role"])])
		}
		vpc, _ := p["VpcConfig"].(map[string]any)
		if sgs, _ := json.Marshal(vpc["SecurityGroupIds"]); vpc == nil || fnSG == "" || !strings.Contains(string(sgs), fnSG) {
			t.Errorf("%s: VPC config %v, want the functions' group %s", id, vpc, fnSG)
		}
		if p["Timeout"] != timeouts[name] || p["Runtime"] != "provided.al2023" {
			t.Errorf("%s: timeout %v runtime %v", id, p["Timeout"], p["Runtime"])
		}
	}
	for name := range want {
		if !found[name] {
			t.Errorf("no queue function %s", name)
		}
	}

	// The schedules: the retry worker's and one per queue trigger.
	rules := map[string]int{}
	for _, r := range s.resources("AWS::Events::Rule") {
		rules[props(r)["ScheduleExpression"].(string)]++
	}
	if rules["rate(5 minutes)"] != 1 || rules["rate(1 minute)"] != 2 {
		t.Errorf("schedules %v", rules)
	}
	// Each queue function may invoke its target, no other function may.
	invokers := map[string][]string{}
	for id, r := range s.resources("AWS::IAM::Policy") {
		for _, st := range statements(r) {
			if slices.Contains(strs(st["Action"]), "lambda:InvokeFunction") {
				b, _ := json.Marshal(st["Resource"])
				invokers[id] = append(invokers[id], string(b))
			}
		}
	}
	if len(invokers) != 2 {
		t.Errorf("invokers %v, want the two queue functions", invokers)
	}
	for id, res := range invokers {
		ok := strings.HasPrefix(id, "Functionsqueueorders") && strings.Contains(strings.Join(res, " "), "function:order-handler") ||
			strings.HasPrefix(id, "Functionsqueuemail") && strings.Contains(strings.Join(res, " "), "function:mailer")
		if !ok {
			t.Errorf("%s invokes %v", id, res)
		}
	}

	// The brokers create the users with their ACLs.
	c := s.container(t)
	env := namedList(c["Environment"], "Value")
	for k, v := range map[string]string{
		"STRATA_ACL_QUEUE_ORDERS": "User:strata-queue-orders group orders-queue read;User:strata-queue-orders topic orders read;User:strata-queue-orders topic refunds read",
		"STRATA_ACL_QUEUE_MAIL":   "User:strata-queue-mail group strata-queue-mail read;User:strata-queue-mail topic mail read",
	} {
		if env[k] != v {
			t.Errorf("%s = %v, want %q", k, env[k], v)
		}
	}
	secrets := namedList(c["Secrets"], "ValueFrom")
	for k, user := range map[string]string{"STRATA_SCRAM_USER_QUEUE_ORDERS": "strata-queue-orders", "STRATA_SCRAM_USER_QUEUE_MAIL": "strata-queue-mail"} {
		if id, _ := secretRef(secrets[k]); s.secretUser(id) != user {
			t.Errorf("%s = %v, want the secret of %s", k, secrets[k], user)
		}
	}

	// An alarm per share group on its oldest available record, with its
	// threshold, notifying the alarm topic like the others.
	topic := ""
	for id := range s.resources("AWS::SNS::Topic") {
		topic = id
	}
	thresholds := map[string]float64{"orders-queue": 120, "strata-queue-mail": 600}
	ages := 0
	for id, r := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(r)
		if p["MetricName"] != MetricShareOldestAge {
			continue
		}
		ages++
		dims := namedList(p["Dimensions"], "Value")
		group, _ := dims[MetricShareGroupDim].(string)
		want, ok := thresholds[group]
		if !ok || len(dims) != 2 || dims["Cluster"] != "strata" {
			t.Errorf("age alarm %s: dimensions %v", id, p["Dimensions"])
			continue
		}
		delete(thresholds, group)
		for k, v := range map[string]any{"Threshold": want, "Statistic": "Maximum", "Namespace": MetricNamespace, "ComparisonOperator": "GreaterThanThreshold",
			"EvaluationPeriods": 3.0, "DatapointsToAlarm": 3.0, "Period": 60.0, "TreatMissingData": "breaching"} {
			if p[k] != v {
				t.Errorf("age alarm %s: %s = %v, want %v", group, k, p[k], v)
			}
		}
		if d, _ := p["AlarmDescription"].(string); !strings.Contains(d, group) {
			t.Errorf("age alarm %s: description %q", group, d)
		}
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if a, _ := p[k].([]any); len(a) != 1 || ref(a[0]) != topic {
				t.Errorf("age alarm %s: %s %v, want the alarm topic %s", group, k, p[k], topic)
			}
		}
	}
	if ages != 2 || len(thresholds) > 0 {
		t.Errorf("%d alarms on %s; groups without one: %v", ages, MetricShareOldestAge, thresholds)
	}
	if problems := iamProblems(s.json); len(problems) > 0 {
		t.Errorf("IAM:\n%s", strings.Join(problems, "\n"))
	}
}

// TestNoQueueTriggersByDefault: without queueTriggers no queue function
// and no age alarm (the metric is 0 without share groups).
func TestNoQueueTriggersByDefault(t *testing.T) {
	s := defaultStack(t)
	for id, r := range s.resources("AWS::Lambda::Function") {
		env, _ := props(r)["Environment"].(map[string]any)
		if vars, _ := env["Variables"].(map[string]any); vars["STRATA_QUEUE"] != nil {
			t.Errorf("%s is a queue trigger", id)
		}
	}
	for id, r := range s.resources("AWS::CloudWatch::Alarm") {
		if props(r)["MetricName"] == MetricShareOldestAge {
			t.Errorf("alarm %s without queue triggers", id)
		}
	}
}

// TestQueueTriggersFromString: `-c queueTriggers='[...]'` gives the list
// as a string; the defaults fill what it leaves out.
func TestQueueTriggersFromString(t *testing.T) {
	cfg, err := ConfigFromContext(mapContext{"queueTriggers": ` [{"name": "jobs", "topics": ["jobs"], "function": "worker"}] `})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.QueueTriggerList()
	if len(got) != 1 || got[0].Group != "strata-queue-jobs" || got[0].RateMinutes != 1 || got[0].Function != "worker" ||
		!slices.Equal(got[0].Topics, []string{"jobs"}) || cfg.QueueAgeAlarmSeconds != 900 {
		t.Errorf("got %+v, age threshold %d", got, cfg.QueueAgeAlarmSeconds)
	}
	if p := FunctionPrincipals(cfg)["queue-jobs"]; p.Name != "strata-queue-jobs" || p.UserEnv() != "STRATA_SCRAM_USER_QUEUE_JOBS" {
		t.Errorf("principal %+v", p)
	}
}
