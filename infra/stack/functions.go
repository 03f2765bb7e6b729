package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// FunctionNames are the functions/<name> folders packaged as Lambdas.
var FunctionNames = []string{"trigger", "retryworker", "dlqconsole"}

// Functions are the Lambda functions, on provided.al2023 / arm64, each
// packaged from functions/<name>/bootstrap (built by `make lambdas`). All
// three run in the VPC's private subnets: they talk Kafka to
// brokers.strata.internal.
type Functions struct {
	constructs.Construct
	Trigger     awslambda.Function
	RetryWorker awslambda.Function
	DLQConsole  awslambda.Function
	ConsoleURL  awslambda.FunctionUrl
}

// CheckBootstraps returns an error naming `make lambdas` when a
// function's bootstrap binary is missing from dir.
func CheckBootstraps(dir string) error {
	var missing []string
	for _, name := range FunctionNames {
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

// NewFunctions builds the three functions. The caller has checked the
// bootstraps with CheckBootstraps.
func NewFunctions(scope constructs.Construct, id string, cfg Config, net *Network) *Functions {
	c := constructs.NewConstruct(scope, jsii.String(id))
	newFn := func(name string, timeout awscdk.Duration, env map[string]string) awslambda.Function {
		logs := awslogs.NewLogGroup(c, jsii.String(name+"Logs"), &awslogs.LogGroupProps{
			Retention:     awslogs.RetentionDays_ONE_MONTH,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		e := map[string]*string{"STRATA_BOOTSTRAP": jsii.String(Bootstrap)}
		for k, v := range env {
			e[k] = jsii.String(v)
		}
		return awslambda.NewFunction(c, jsii.String(name), &awslambda.FunctionProps{
			Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture: awslambda.Architecture_ARM_64(),
			Handler:      jsii.String("bootstrap"),
			// Only the binary: the folder also holds the Go sources.
			Code: awslambda.Code_FromAsset(jsii.String(filepath.Join(cfg.FunctionsDir, name)), &awss3assets.AssetOptions{
				Exclude: jsii.Strings("*", "!bootstrap"),
			}),
			Description:    jsii.String("Strata " + name),
			MemorySize:     jsii.Number(256),
			Timeout:        timeout,
			Environment:    &e,
			LogGroup:       logs,
			Vpc:            net.Vpc,
			VpcSubnets:     net.PrivateSubnets(),
			SecurityGroups: &[]awsec2.ISecurityGroup{net.FunctionSG},
		})
	}
	// A scheduled poller runs until its deadline minus STRATA_MARGIN
	// (10s), so its timeout is its period, at most Lambda's 15 minutes.
	period := func(minutes int) awscdk.Duration {
		return awscdk.Duration_Seconds(jsii.Number(min(minutes*60, 900)))
	}

	triggerEnv := map[string]string{"STRATA_GROUP": cfg.TriggerGroup}
	if cfg.TriggerTopics != "" {
		triggerEnv["STRATA_TOPICS"] = cfg.TriggerTopics
		triggerEnv["STRATA_FUNCTION"] = cfg.TriggerFunction
	}
	trigger := newFn("trigger", period(cfg.TriggerRateMinutes), triggerEnv)
	if cfg.TriggerTopics != "" {
		var target awslambda.IFunction
		if strings.HasPrefix(cfg.TriggerFunction, "arn:") {
			target = awslambda.Function_FromFunctionArn(c, jsii.String("TriggerTarget"), jsii.String(cfg.TriggerFunction))
		} else {
			target = awslambda.Function_FromFunctionName(c, jsii.String("TriggerTarget"), jsii.String(cfg.TriggerFunction))
		}
		target.GrantInvoke(trigger)
		schedule(c, "TriggerSchedule", cfg.TriggerRateMinutes, trigger)
	}

	// Defaults: every ^.+\.retry$ topic, group strata-retryworker,
	// redelivery to the origin topic.
	retry := newFn("retryworker", period(cfg.RetryRateMinutes), nil)
	schedule(c, "RetrySchedule", cfg.RetryRateMinutes, retry)

	console := newFn("dlqconsole", awscdk.Duration_Seconds(jsii.Number(30)), map[string]string{
		"STRATA_REGISTRY_URL": RegistryURL,
	})
	url := console.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})
	return &Functions{Construct: c, Trigger: trigger, RetryWorker: retry, DLQConsole: console, ConsoleURL: url}
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
