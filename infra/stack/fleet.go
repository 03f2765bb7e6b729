package stack

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsservicediscovery"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// dockerfile is the broker image's Dockerfile, relative to the repository
// root (the build context).
const dockerfile = "brokerfleet/Dockerfile"

// Names clients use inside the VPC: brokers.strata.internal.
const (
	Namespace   = "strata.internal"
	ServiceName = "brokers"
	// Bootstrap is the address clients and the functions bootstrap from.
	Bootstrap = ServiceName + "." + Namespace + ":9092"
	// RegistryURL is the schema registry of any broker: HTTPS with the
	// brokers' certificate, basic authentication with the SCRAM users.
	RegistryURL = "https://" + ServiceName + "." + Namespace + ":8081"
)

// Fleet is the brokers: an ECS cluster and a Fargate service of
// cfg.BrokerCount ARM64 tasks spread over the VPC's availability zones,
// registered in Cloud Map as brokers.strata.internal (A records).
type Fleet struct {
	constructs.Construct
	Cluster   awsecs.Cluster
	Service   awsecs.FargateService
	TaskDef   awsecs.FargateTaskDefinition
	Container awsecs.ContainerDefinition
	LogGroup  awslogs.LogGroup
	Namespace awsservicediscovery.PrivateDnsNamespace
}

// BrokerEnv is the broker container's environment (every `brokerfleet
// serve` flag can be set as STRATA_<FLAG>) and its secrets: variables ECS
// fills from Secrets Manager when the task starts, so no secret value is
// in the task definition. tableName and bucketName are the data
// construct's (tokens at synth time); region is the stack's.
//
// One SASL_SSL listener serves clients and replication: TLS with the PKI's
// certificate (PEM from the TLS secret), SCRAM-SHA-512, ACLs on with the
// admin and broker principals as super users; brokers authenticate to
// each other as strata-broker and verify each other against the CA. Each
// broker advertises its task's private DNS name, which the certificate
// covers. The admin and broker users come in as STRATA_SCRAM_USER_*
// variables, as the other principals do (Fleet.AddPrincipal), and their
// ACLs as STRATA_ACL_*.
func BrokerEnv(cfg Config, tableName, bucketName, region string) (map[string]string, map[string]BrokerSecret) {
	env := map[string]string{
		"STRATA_NODE_ID":                     "auto", // from the metastore's broker registry
		"STRATA_RACK":                        "auto", // the AZ, from ECS task metadata
		"STRATA_LISTENERS":                   "SASL_SSL://0.0.0.0:" + strconv.Itoa(KafkaPort),
		"STRATA_ADVERTISE_PRIVATE_DNS":       "true",
		"STRATA_SASL_MECHANISMS":             "SCRAM-SHA-512",
		"STRATA_INTER_BROKER_SASL_MECHANISM": "SCRAM-SHA-512",
		"STRATA_INTER_BROKER_USER":           BrokerUser,
		"STRATA_AUTHORIZER":                  "true",
		"STRATA_SUPER_USERS":                 SuperUsers(),
		"STRATA_SCRAM_USERS_FROM_ENV":        userEnvPrefix + "*",
		"STRATA_ACLS_FROM_ENV":               aclEnvPrefix + "*",
		"STRATA_DATA":                        "/data", // in the task's ephemeral storage
		"STRATA_METASTORE":                   "dynamodb://" + tableName,
		"STRATA_BUCKET":                      "s3://" + bucketName + "/" + BucketPrefix,
		"STRATA_AWS_REGION":                  region,
		"STRATA_HTTP":                        "127.0.0.1:" + strconv.Itoa(HTTPPort),
		"STRATA_REGISTRY":                    "0.0.0.0:" + strconv.Itoa(RegistryPort),
		"STRATA_EMF_INTERVAL":                "60s",
		"STRATA_CLUSTER_ID":                  cfg.ClusterName,
		"STRATA_DEFAULT_REPLICATION_FACTOR":  strconv.Itoa(cfg.ReplicationFactor()),
		"STRATA_TOPIC_DEFAULT": fmt.Sprintf("retention.ms=%d,segment.bytes=%d",
			cfg.RetentionMs(), cfg.SegmentBytes),
	}
	admin, broker := AdminPrincipal(), BrokerPrincipal()
	secrets := map[string]BrokerSecret{
		"STRATA_TLS_CERT_PEM":            {Secret: SecretTLS, Field: "certificate"},
		"STRATA_TLS_KEY_PEM":             {Secret: SecretTLS, Field: "privateKey"},
		"STRATA_INTER_BROKER_TLS_CA_PEM": {Secret: SecretTLS, Field: "caCertificate"},
		"STRATA_INTER_BROKER_PASSWORD":   {Secret: broker.Key, Field: "password"},
		admin.UserEnv():                  {Secret: admin.Key},
		broker.UserEnv():                 {Secret: broker.Key},
	}
	return env, secrets
}

// BrokerSecret is a secret value of the broker task: a JSON field of a
// secret, or all of it.
type BrokerSecret struct {
	Secret string // SecretTLS, or the Key of a Principal (its user secret)
	Field  string // "" for the whole secret
}

// SecretTLS names the PKI's TLS secret in a BrokerSecret.
const SecretTLS = "TLS"

// NewFleet builds the cluster and the broker service in net, with access
// to data granted to the task role, TLS from pki, and the admin and broker
// users from their secrets.
func NewFleet(scope constructs.Construct, id string, cfg Config, net *Network, data *Data, pki *PKI, admin, broker awssecretsmanager.ISecret) *Fleet {
	c := constructs.NewConstruct(scope, jsii.String(id))
	cluster := awsecs.NewCluster(c, jsii.String("Cluster"), &awsecs.ClusterProps{Vpc: net.Vpc})
	ns := awsservicediscovery.NewPrivateDnsNamespace(c, jsii.String("Namespace"), &awsservicediscovery.PrivateDnsNamespaceProps{
		Name:        jsii.String(Namespace),
		Vpc:         net.Vpc,
		Description: jsii.String("Strata brokers"),
	})
	logs := awslogs.NewLogGroup(c, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	task := awsecs.NewFargateTaskDefinition(c, jsii.String("Task"), &awsecs.FargateTaskDefinitionProps{
		Cpu:                 jsii.Number(cfg.BrokerCPU),
		MemoryLimitMiB:      jsii.Number(cfg.BrokerMemoryMiB),
		EphemeralStorageGiB: jsii.Number(cfg.StorageGiB),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	env := map[string]*string{}
	plain, secretRefs := BrokerEnv(cfg, *data.Table.TableName(), *data.Bucket.BucketName(), *awscdk.Aws_REGION())
	for k, v := range plain {
		env[k] = jsii.String(v)
	}
	sources := map[string]awssecretsmanager.ISecret{SecretTLS: pki.TLSSecret, AdminPrincipal().Key: admin, BrokerPrincipal().Key: broker}
	secrets := map[string]awsecs.Secret{}
	for k, ref := range secretRefs {
		var field *string
		if ref.Field != "" {
			field = jsii.String(ref.Field)
		}
		secrets[k] = awsecs.Secret_FromSecretsManager(sources[ref.Secret], field)
	}
	// The image builds ./brokerfleet from the repository root; the root
	// .dockerignore keeps the context to the Go sources. Synth only copies
	// the context into cdk.out; `cdk deploy` runs docker build.
	image := awsecs.ContainerImage_FromAsset(jsii.String(cfg.RepoRoot), &awsecs.AssetImageProps{
		File:     jsii.String(dockerfile),
		Platform: awsecrassets.Platform_LINUX_ARM64(),
	})
	container := task.AddContainer(jsii.String("broker"), &awsecs.ContainerDefinitionOptions{
		Image:       image,
		Command:     jsii.Strings("serve"),
		Environment: &env,
		Secrets:     &secrets,
		// A new certificate is a new task definition: ECS replaces the
		// brokers one at a time, and each starts with the new secret.
		DockerLabels: &map[string]*string{"strata.tls-certificate-serial": pki.Serial()},
		Essential:    jsii.Bool(true),
		PortMappings: &[]*awsecs.PortMapping{
			{ContainerPort: jsii.Number(KafkaPort), Name: jsii.String("kafka")},
			{ContainerPort: jsii.Number(RegistryPort), Name: jsii.String("registry")},
			{ContainerPort: jsii.Number(HTTPPort), Name: jsii.String("http")},
		},
		HealthCheck: &awsecs.HealthCheck{
			// No shell in the image: exec form. -ready: healthy only once
			// the broker is in the ISR of every partition it hosts, so a
			// rolling deployment, which replaces the next broker as soon as
			// this one is healthy, never stops the last in-sync replica
			// while its replacement is still copying. Readiness is latched
			// and needs no metastore afterwards: a DynamoDB outage, which
			// costs every broker its lease, never fails the check and never
			// makes ECS replace the fleet (and lose what is not yet in S3).
			// Catching up may take up to the start period plus retries x
			// interval (300 s + 10 x 30 s) before ECS gives up on the task.
			Command:     jsii.Strings("CMD", "/brokerfleet", "health", "-ready", "-http", "127.0.0.1:"+strconv.Itoa(HTTPPort)),
			Interval:    awscdk.Duration_Seconds(jsii.Number(30)),
			Timeout:     awscdk.Duration_Seconds(jsii.Number(5)),
			Retries:     jsii.Number(10),
			StartPeriod: awscdk.Duration_Seconds(jsii.Number(300)),
		},
		// Every partition replica keeps its active segment open, and
		// -max-connections defaults to three quarters of the limit:
		// Fargate's default of 65,535 would be shared by 10,000 partitions
		// and 49,151 connections. Fargate's most instead.
		Ulimits: &[]*awsecs.Ulimit{{Name: awsecs.UlimitName_NOFILE, SoftLimit: jsii.Number(1048576), HardLimit: jsii.Number(1048576)}},
		// Time to hand over partition leadership before SIGKILL (Fargate's most).
		StopTimeout: awscdk.Duration_Seconds(jsii.Number(120)),
		Logging: awsecs.LogDrivers_AwsLogs(&awsecs.AwsLogDriverProps{
			StreamPrefix:  jsii.String("broker"),
			LogGroup:      logs,
			Mode:          awsecs.AwsLogDriverMode_NON_BLOCKING,
			MaxBufferSize: awscdk.Size_Mebibytes(jsii.Number(25)),
		}),
	})
	data.Table.GrantReadWriteData(task.TaskRole())
	// Read, write and delete objects, but not object versions: what a
	// broker deletes stays recoverable in the versioned bucket.
	objects := jsii.String(BucketPrefix + "/*")
	data.Bucket.GrantRead(task.TaskRole(), objects)
	data.Bucket.GrantPut(task.TaskRole(), objects)
	task.TaskRole().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:DeleteObject"),
		Resources: jsii.Strings(*data.Bucket.ArnForObjects(objects)),
	}))

	service := awsecs.NewFargateService(c, jsii.String("Service"), &awsecs.FargateServiceProps{
		Cluster:        cluster,
		TaskDefinition: task,
		DesiredCount:   jsii.Number(cfg.BrokerCount),
		// One broker at a time: ECS keeps ceil(count*min/100) = count-1
		// running and never starts more than count.
		MinHealthyPercent: jsii.Number(cfg.MinHealthyPercent()),
		MaxHealthyPercent: jsii.Number(100),
		CircuitBreaker:    &awsecs.DeploymentCircuitBreaker{Enable: jsii.Bool(true), Rollback: jsii.Bool(true)},
		SecurityGroups:    &[]awsec2.ISecurityGroup{net.BrokerSG},
		VpcSubnets:        net.PrivateSubnets(),
		AssignPublicIp:    jsii.Bool(false),
		PlatformVersion:   awsecs.FargatePlatformVersion_LATEST,
		CloudMapOptions: &awsecs.CloudMapOptions{
			CloudMapNamespace: ns,
			Name:              jsii.String(ServiceName),
			DnsRecordType:     awsservicediscovery.DnsRecordType_A,
			DnsTtl:            awscdk.Duration_Seconds(jsii.Number(10)),
		},
	})
	// The task reads the PKI's secrets at start: they must be filled.
	pki.dependOn(service)
	return &Fleet{Construct: c, Cluster: cluster, Service: service, TaskDef: task, Container: container, LogGroup: logs, Namespace: ns}
}

// AddPrincipal has the brokers create p from its user secret and give it
// exactly p's ACLs at every start (STRATA_SCRAM_USER_<Key> and
// STRATA_ACL_<Key> in the task).
func (f *Fleet) AddPrincipal(p Principal, secret awssecretsmanager.ISecret) {
	f.Container.AddSecret(jsii.String(p.UserEnv()), awsecs.Secret_FromSecretsManager(secret, nil))
	if env := p.ACLEnv(); env != "" {
		f.Container.AddEnvironment(jsii.String(env), jsii.String(p.ACLSpec()))
	}
}
