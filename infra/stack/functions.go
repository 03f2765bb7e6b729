package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// KafkaFunctionNames are the functions that talk Kafka to the brokers,
// each as its own SCRAM user.
var KafkaFunctionNames = []string{"trigger", "retryworker", "dlqconsole"}

// FunctionNames are the functions/<name> folders every deployment
// packages: the Kafka functions and the PKI's custom resource.
var FunctionNames = append(append([]string(nil), KafkaFunctionNames...), "certissuer")

// ExampleFunctionName is the example consumer deployed with esmExample.
const ExampleFunctionName = "esmexample"

// Functions are the Kafka functions, on provided.al2023 / arm64, each
// packaged from functions/<name>/bootstrap (built by `make lambdas`). All
// three run in the VPC's private subnets and reach
// brokers.strata.internal over TLS with SCRAM-SHA-512: their environment
// names their own user's secret and the CA secret (functions/kafkaauth
// reads both at cold start), and each role may read those two secrets
// only.
type Functions struct {
	constructs.Construct
	Trigger     awslambda.Function
	RetryWorker awslambda.Function
	DLQConsole  awslambda.Function
	ConsoleURL  awslambda.FunctionUrl
	// Queues are the queue triggers' functions, by queue trigger name.
	Queues map[string]awslambda.Function
	// Users are the functions' SCRAM user secrets, by function name.
	Users map[string]awssecretsmanager.Secret
}

// CheckBootstraps returns an error naming `make lambdas` when a
// function's bootstrap binary is missing from dir.
func CheckBootstraps(dir string, names ...string) error {
	var missing []string
	for _, name := range names {
		p := filepath.Join(dir, name, "bootstrap")
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("lambda bootstrap missing: %s; run `make lambdas` at the repository root first (or set context functionsDir to a folder holding <name>/bootstrap)",
			strings.Join(missing, ", "))
	}
	return nil
}

// fnOptions are the settings of newGoFunction that differ by function.
type fnOptions struct {
	id          string // construct id (default: the function's name)
	description string
	timeout     awscdk.Duration
	env         map[string]*string
	net         *Network // in the VPC's private subnets with its functions' group when set
}

// newGoFunction packages functions/<name>/bootstrap as a provided.al2023
// arm64 function with its own log group.
func newGoFunction(scope constructs.Construct, cfg Config, name string, o fnOptions) awslambda.Function {
	id := o.id
	if id == "" {
		id = name
	}
	logs := awslogs.NewLogGroup(scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	props := &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		// Only the binary: the folder also holds the Go sources.
		Code: awslambda.Code_FromAsset(jsii.String(filepath.Join(cfg.FunctionsDir, name)), &awss3assets.AssetOptions{
			Exclude: jsii.Strings("*", "!bootstrap"),
		}),
		Description: jsii.String(o.description),
		MemorySize:  jsii.Number(256),
		Timeout:     o.timeout,
		LogGroup:    logs,
	}
	if len(o.env) > 0 {
		props.Environment = &o.env
	}
	if o.net != nil {
		props.Vpc, props.VpcSubnets = o.net.Vpc, o.net.PrivateSubnets()
		props.SecurityGroups = &[]awsec2.ISecurityGroup{o.net.FunctionSG}
	}
	return awslambda.NewFunction(scope, jsii.String(id), props)
}

// NewFunctions builds the three functions and their users' secrets
// (encrypted with key). The caller has checked the bootstraps with
// CheckBootstraps and registers Users with the fleet.
func NewFunctions(scope constructs.Construct, id string, cfg Config, net *Network, pki *PKI, key awskms.IKey) *Functions {
	c := constructs.NewConstruct(scope, jsii.String(id))
	f := &Functions{Construct: c, Users: map[string]awssecretsmanager.Secret{}}
	principals := FunctionPrincipals(cfg)
	// fnKey names the function's construct and user; code is its
	// functions/<code> folder.
	newFnFrom := func(fnKey, code string, timeout awscdk.Duration, env map[string]string) awslambda.Function {
		user := NewUserSecret(c, fnKey+"User", principals[fnKey].Name, key)
		f.Users[fnKey] = user
		e := map[string]*string{
			"STRATA_BOOTSTRAP":         jsii.String(Bootstrap),
			"STRATA_SASL_SECRET_ARN":   user.SecretArn(),
			"STRATA_TLS_CA_SECRET_ARN": pki.CASecret.SecretArn(),
			// Changes with the trusted CAs, so a CA rotation updates the
			// function and the next invocations start cold, reading the new
			// bundle.
			"STRATA_TLS_CA_VERSION": pki.TrustFingerprint(),
		}
		for k, v := range env {
			e[k] = jsii.String(v)
		}
		fn := newGoFunction(c, cfg, code, fnOptions{id: fnKey, description: "Strata " + fnKey, timeout: timeout, env: e, net: net})
		user.GrantRead(fn, nil)
		pki.CASecret.GrantRead(fn, nil)
		pki.dependOn(fn)
		return fn
	}
	newFn := func(name string, timeout awscdk.Duration, env map[string]string) awslambda.Function {
		return newFnFrom(name, name, timeout, env)
	}
	// A scheduled poller runs until its deadline minus STRATA_MARGIN
	// (10s), so its timeout is its period, at most Lambda's 15 minutes.
	period := func(minutes int) awscdk.Duration {
		return awscdk.Duration_Seconds(jsii.Number(min(minutes*60, 900)))
	}

	triggerEnv := map[string]string{"STRATA_GROUP": cfg.TriggerGroup}
	if cfg.TriggerTopics != "" {
		triggerEnv["STRATA_TOPICS"] = strings.Join(cfg.TriggerTopicList(), ",")
		triggerEnv["STRATA_FUNCTION"] = cfg.TriggerFunction
	}
	f.Trigger = newFn("trigger", period(cfg.TriggerRateMinutes), triggerEnv)
	if cfg.TriggerTopics != "" {
		invokeTarget(c, "TriggerTarget", cfg.TriggerFunction, f.Trigger)
		schedule(c, "TriggerSchedule", cfg.TriggerRateMinutes, f.Trigger)
	}

	// Queue triggers: functions/trigger again, in queue mode, one function
	// (and user) per share group.
	f.Queues = map[string]awslambda.Function{}
	for _, q := range cfg.QueueTriggerList() {
		env := map[string]string{
			"STRATA_QUEUE":    "true",
			"STRATA_GROUP":    q.Group,
			"STRATA_TOPICS":   strings.Join(q.Topics, ","),
			"STRATA_FUNCTION": q.Function,
		}
		if q.BatchSize > 0 {
			env["STRATA_BATCH_SIZE"] = strconv.Itoa(q.BatchSize)
		}
		if q.MaxAttempts > 0 {
			env["STRATA_MAX_ATTEMPTS"] = strconv.Itoa(q.MaxAttempts)
		}
		fn := newFnFrom(q.FunctionKey(), "trigger", period(q.RateMinutes), env)
		invokeTarget(c, q.FunctionKey()+"Target", q.Function, fn)
		schedule(c, q.FunctionKey()+"Schedule", q.RateMinutes, fn)
		f.Queues[q.Name] = fn
	}

	// Group strata-retryworker, redelivery to the origin topic; it
	// subscribes to the .retry topics it may read (every ^.+\.retry$ topic
	// when none is configured, of which its ACLs then allow none).
	retryEnv := map[string]string{"STRATA_GROUP": RetryWorkerGroup}
	if topics := cfg.RetryTopicList(); len(topics) > 0 {
		retryEnv["STRATA_TOPICS"] = strings.Join(suffixed(topics, ".retry"), ",")
	}
	f.RetryWorker = newFn("retryworker", period(cfg.RetryRateMinutes), retryEnv)
	schedule(c, "RetrySchedule", cfg.RetryRateMinutes, f.RetryWorker)

	f.DLQConsole = newFn("dlqconsole", awscdk.Duration_Seconds(jsii.Number(30)), map[string]string{
		"STRATA_REGISTRY_URL": RegistryURL,
		"STRATA_DLQ_GROUP":    DLQConsoleGroup,
	})
	f.ConsoleURL = f.DLQConsole.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})
	return f
}

// invokeTarget lets fn invoke the function target (a name or an ARN), and
// only that one, by a statement in fn's role. An ARN is imported as of
// this environment: CDK would otherwise try to add a resource policy to a
// function it does not own, and fail (a target in another account also
// needs its own resource policy allowing fn's role).
func invokeTarget(scope constructs.Construct, id, target string, fn awslambda.IFunction) {
	var t awslambda.IFunction
	if strings.HasPrefix(target, "arn:") {
		t = awslambda.Function_FromFunctionAttributes(scope, jsii.String(id), &awslambda.FunctionAttributes{
			FunctionArn: jsii.String(target), SameEnvironment: jsii.Bool(true),
		})
	} else {
		t = awslambda.Function_FromFunctionName(scope, jsii.String(id), jsii.String(target))
	}
	t.GrantInvoke(fn)
}

// schedule invokes fn every minutes minutes, without EventBridge retries
// (the next run picks up where this one stopped).
func schedule(scope constructs.Construct, id string, minutes int, fn awslambda.IFunction) {
	awsevents.NewRule(scope, jsii.String(id), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(minutes))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
		})},
	})
}
