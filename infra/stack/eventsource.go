package stack

import (
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// KafkaEventSourceProps configure AddKafkaEventSource.
type KafkaEventSourceProps struct {
	// Function is the function the mapping invokes.
	Function awslambda.IFunction
	// Topic is the topic it consumes; failed batches go to <Topic>.dlq.
	Topic string
	// User is the SCRAM user of the mapping (default strata-esm-<topic>),
	// Group its consumer group (default the same name). Both are fixed, so
	// its ACLs can name them: AWS would otherwise use the mapping's UUID.
	User, Group string
	// BatchSize is the most records per invocation (default 100).
	BatchSize int
	// StartingPosition is where a new group starts (default TRIM_HORIZON).
	StartingPosition awslambda.StartingPosition
	// MaxPollers caps the mapping's provisioned pollers (default 2). A
	// Kafka on-failure destination needs provisioned mode; each poller is
	// billed while the mapping is enabled.
	MaxPollers int
}

// KafkaEventSource is AWS Lambda's own event source mapping for
// self-managed Kafka, reading a Strata topic: SASL/SCRAM-SHA-512 with a
// user of its own (SASL_SCRAM_512_AUTH), the private CA
// (SERVER_ROOT_CA_CERTIFICATE), pollers in the VPC's private subnets with
// a security group the brokers admit, and an on-failure destination
// <topic>.dlq.
type KafkaEventSource struct {
	constructs.Construct
	Principal     Principal
	Secret        awssecretsmanager.Secret
	SecurityGroup awsec2.SecurityGroup
}

var nonKey = regexp.MustCompile(`[^A-Z0-9]+`)

// AddKafkaEventSource attaches the mapping to props.Function: it creates
// the user (registered with the brokers with the ACLs AWS documents, see
// EventSourcePrincipal), admits the pollers' security group to Kafka, and
// grants the function's role what the pollers need: reading the user and
// CA secrets, and the VPC network interface actions.
func (s *Strata) AddKafkaEventSource(id string, props KafkaEventSourceProps) *KafkaEventSource {
	c := constructs.NewConstruct(s.Stack, jsii.String(id))
	user := props.User
	if user == "" {
		user = "strata-esm-" + props.Topic
	}
	group := props.Group
	if group == "" {
		group = user
	}
	batch := props.BatchSize
	if batch == 0 {
		batch = 100
	}
	start := props.StartingPosition
	if start == "" {
		start = awslambda.StartingPosition_TRIM_HORIZON
	}
	pollers := props.MaxPollers
	if pollers == 0 {
		pollers = 2
	}
	key := "ESM_" + nonKey.ReplaceAllString(strings.ToUpper(id), "_")
	es := &KafkaEventSource{
		Construct: c,
		Principal: EventSourcePrincipal(key, user, props.Topic, group),
		Secret:    NewUserSecret(c, "User", user, s.Data.Key),
		SecurityGroup: awsec2.NewSecurityGroup(c, jsii.String("Pollers"), &awsec2.SecurityGroupProps{
			Vpc:              s.Network.Vpc,
			Description:      jsii.String("Strata: Lambda event source " + id + " (Kafka pollers)"),
			AllowAllOutbound: jsii.Bool(true),
		}),
	}
	s.Fleet.AddPrincipal(es.Principal, es.Secret)
	s.Network.AllowClient(es.SecurityGroup, "Lambda event source "+id, false)

	props.Function.AddEventSource(awslambdaeventsources.NewSelfManagedKafkaEventSource(&awslambdaeventsources.SelfManagedKafkaEventSourceProps{
		BootstrapServers:     jsii.Strings(Bootstrap),
		Topic:                jsii.String(props.Topic),
		ConsumerGroupId:      jsii.String(group),
		StartingPosition:     start,
		BatchSize:            jsii.Number(batch),
		AuthenticationMethod: awslambdaeventsources.AuthenticationMethod_SASL_SCRAM_512_AUTH,
		Secret:               es.Secret, // CDK grants the role read on it
		RootCACertificate:    s.PKI.CASecret,
		Vpc:                  s.Network.Vpc,
		VpcSubnets:           s.Network.PrivateSubnets(),
		SecurityGroup:        es.SecurityGroup,
		OnFailure:            awslambdaeventsources.NewKafkaDlq(jsii.String(props.Topic + ".dlq")),
		ProvisionedPollerConfig: &awslambdaeventsources.ProvisionedPollerConfig{
			MinimumPollers: jsii.Number(1),
			MaximumPollers: jsii.Number(pollers),
		},
	}))
	s.PKI.CASecret.GrantRead(props.Function, nil)
	// What AWS lists for a self-managed Kafka event source in a VPC; these
	// actions take no narrower resource.
	props.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
			"ec2:DeleteNetworkInterface", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"),
		Resources: jsii.Strings("*"),
	}))
	return es
}

// addExample deploys functions/esmexample fed by a KafkaEventSource on
// cfg.ESMExampleTopic (esmExample=true).
func (s *Strata) addExample() {
	fn := newGoFunction(s.Stack, s.Config, ExampleFunctionName, fnOptions{
		id:          "EsmExample",
		description: "Strata example consumer of Lambda's Kafka event source",
		timeout:     awscdk.Duration_Seconds(jsii.Number(60)),
	})
	s.ExampleFunction = fn
	s.Example = s.AddKafkaEventSource("EsmExampleSource", KafkaEventSourceProps{Function: fn, Topic: s.Config.ESMExampleTopic, User: "strata-esm-example"})
}
