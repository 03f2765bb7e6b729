// Package stack is the Strata CDK stack: small constructs, one per
// concern (network, data, PKI, fleet, functions, observability, Lambda's
// Kafka event source), composed by New into the stack "Strata" and
// configured by a Config read from the CDK context (ConfigFromContext).
// The deployment is secure with no settings: TLS and SCRAM on the one
// Kafka listener, ACLs on, every password and key generated at deploy time
// into Secrets Manager.
package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// StackName is the stack's id in the app.
const StackName = "Strata"

// Strata is the whole deployment.
type Strata struct {
	awscdk.Stack
	Config        Config
	Network       *Network
	Data          *Data
	PKI           *PKI
	Fleet         *Fleet
	Functions     *Functions
	Observability *Observability
	AdminSecret   awssecretsmanager.Secret // the super user strata-admin
	BrokerSecret  awssecretsmanager.Secret // strata-broker, what brokers authenticate to each other as
	// With esmExample: the example consumer and its event source.
	ExampleFunction awslambda.Function
	Example         *KafkaEventSource
}

// New builds the stack in scope from a validated cfg (with RepoRoot and
// FunctionsDir set, as ConfigFromContext leaves them). It fails when a
// Lambda bootstrap is missing.
func New(scope constructs.Construct, id string, cfg Config, props *awscdk.StackProps) (*Strata, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	names := FunctionNames
	if cfg.ESMExample {
		names = append(append([]string(nil), names...), ExampleFunctionName)
	}
	if err := CheckBootstraps(cfg.FunctionsDir, names...); err != nil {
		return nil, err
	}
	if props == nil {
		props = &awscdk.StackProps{}
	}
	if props.Description == nil {
		props.Description = jsii.String("Strata: Kafka-compatible brokers on ECS Fargate with a DynamoDB metastore and an S3 tier")
	}
	s := &Strata{Stack: awscdk.NewStack(scope, jsii.String(id), props), Config: cfg}
	s.Network = NewNetwork(s.Stack, "Network", cfg)
	s.Data = NewData(s.Stack, "Data", cfg)
	s.PKI = NewPKI(s.Stack, "PKI", cfg, s.Data.Key)
	users := constructs.NewConstruct(s.Stack, jsii.String("Users"))
	s.AdminSecret = NewUserSecret(users, "Admin", AdminUser, s.Data.Key)
	s.BrokerSecret = NewUserSecret(users, "Broker", BrokerUser, s.Data.Key)
	s.Fleet = NewFleet(s.Stack, "Fleet", cfg, s.Network, s.Data, s.PKI, s.AdminSecret, s.BrokerSecret)
	s.Functions = NewFunctions(s.Stack, "Functions", cfg, s.Network, s.PKI, s.Data.Key)
	principals := FunctionPrincipals(cfg)
	for _, name := range sortedKeys(principals) {
		s.Fleet.AddPrincipal(principals[name], s.Functions.Users[name])
	}
	if cfg.ESMExample {
		s.addExample()
	}
	s.Observability = NewObservability(s.Stack, "Observability", cfg, s.Fleet)
	s.outputs()
	return s, nil
}

func (s *Strata) outputs() {
	out := func(id string, value *string, description string) {
		awscdk.NewCfnOutput(s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
	}
	out("BootstrapServers", jsii.String(Bootstrap), "Kafka bootstrap address inside the VPC (SASL_SSL, SCRAM-SHA-512)")
	out("SchemaRegistryUrl", jsii.String(RegistryURL), "Confluent-compatible schema registry inside the VPC")
	out("TableName", s.Data.Table.TableName(), "DynamoDB metastore table")
	out("BucketName", s.Data.Bucket.BucketName(), "S3 tier bucket (objects under "+BucketPrefix+"/)")
	out("KeyArn", s.Data.Key.KeyArn(), "KMS key of the table, the bucket and the secrets")
	out("EcsClusterName", s.Fleet.Cluster.ClusterName(), "ECS cluster of the brokers")
	out("BrokerServiceName", s.Fleet.Service.ServiceName(), "ECS service of the brokers")
	out("BrokerLogGroup", s.Fleet.LogGroup.LogGroupName(), "broker logs and EMF metrics")
	out("DlqConsoleUrl", s.Functions.ConsoleURL.Url(), "DLQ console (Function URL, AWS_IAM auth)")
	out("DashboardName", s.Observability.Dashboard.DashboardName(), "CloudWatch dashboard")
	out("CaSecretArn", s.PKI.CASecret.SecretArn(), `the private CA {"certificate": PEM}: what clients trust (SERVER_ROOT_CA_CERTIFICATE)`)
	out("AdminSecretArn", s.AdminSecret.SecretArn(), "the super user "+AdminUser+" {username,password}")
	out("BrokerCertificateNotAfter", s.PKI.NotAfter(), "when the broker certificate expires: deploy with a new tlsRotation before")
	if s.Observability.Topic != nil {
		out("AlarmTopicArn", s.Observability.Topic.TopicArn(), "SNS topic of the alarms")
	}
	if s.ExampleFunction != nil {
		out("EsmExampleFunction", s.ExampleFunction.FunctionName(), "the example consumer of Lambda's Kafka event source on "+s.Config.ESMExampleTopic)
	}
}

// NewFromContext reads and validates the Config from app's context and
// builds the stack "Strata" in app. Errors name the context key at fault
// (or `make lambdas` for a missing bootstrap).
func NewFromContext(app awscdk.App) (*Strata, error) {
	cfg, err := ConfigFromContext(app.Node())
	if err != nil {
		return nil, err
	}
	return New(app, StackName, cfg, nil)
}
