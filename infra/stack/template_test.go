package stack

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

func TestResourceCounts(t *testing.T) {
	s := defaultStack(t)
	for typ, n := range map[string]int{
		"AWS::DynamoDB::Table":                       1,
		"AWS::S3::Bucket":                            1,
		"AWS::KMS::Key":                              1,
		"AWS::Lambda::Function":                      4, // trigger, retryworker, dlqconsole, the certificate issuer
		"AWS::Lambda::Url":                           1,
		"AWS::ECS::Cluster":                          1,
		"AWS::ECS::Service":                          1,
		"AWS::ECS::TaskDefinition":                   1,
		"AWS::CloudWatch::Dashboard":                 1,
		"AWS::EC2::VPC":                              1,
		"AWS::EC2::NatGateway":                       1,
		"AWS::EC2::VPCEndpoint":                      2,
		"AWS::ServiceDiscovery::PrivateDnsNamespace": 1,
		"AWS::ServiceDiscovery::Service":             1,
		"AWS::Events::Rule":                          1, // the retry worker; the trigger is not configured
		"AWS::SecretsManager::Secret":                8, // CA key, CA, broker TLS; admin, broker and three function users
		"Custom::StrataPKI":                          1,
		"AWS::Lambda::EventSourceMapping":            0,
		"AWS::SNS::Topic":                            0,
	} {
		s.template.ResourceCountIs(jsii.String(typ), jsii.Number(n))
	}
	if n := len(s.resources("AWS::CloudWatch::Alarm")); n < 4 {
		t.Errorf("%d alarms, want at least 4", n)
	}
}

func TestNetwork(t *testing.T) {
	s := defaultStack(t)
	// Three AZs: a public and a private subnet in each.
	s.template.ResourceCountIs(jsii.String("AWS::EC2::Subnet"), jsii.Number(6))
	for _, svc := range []string{"s3", "dynamodb"} {
		found := false
		for _, r := range s.resources("AWS::EC2::VPCEndpoint") {
			b, _ := json.Marshal(props(r)["ServiceName"])
			found = found || props(r)["VpcEndpointType"] == "Gateway" && strings.Contains(string(b), "."+svc+"\"")
		}
		if !found {
			t.Errorf("no gateway endpoint for %s", svc)
		}
	}
	// natGateways from context.
	s3 := synth(t, map[string]any{"natGateways": "3"})
	s3.template.ResourceCountIs(jsii.String("AWS::EC2::NatGateway"), jsii.Number(3))
}

func TestTable(t *testing.T) {
	s := defaultStack(t)
	s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
		"DeletionPolicy":      "Retain",
		"UpdateReplacePolicy": "Retain",
		"Properties": map[string]any{
			"KeySchema": []any{
				map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
				map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
			},
			"AttributeDefinitions": []any{
				map[string]any{"AttributeName": "pk", "AttributeType": "S"},
				map[string]any{"AttributeName": "sk", "AttributeType": "S"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": "ttl", "Enabled": true},
			"DeletionProtectionEnabled":        true,
			"SSESpecification": map[string]any{
				"SSEEnabled":     true,
				"SSEType":        "KMS",
				"KMSMasterKeyId": assertions.Match_AnyValue(),
			},
		},
	})
	s.template.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{"EnableKeyRotation": true})
	s.template.HasResource(jsii.String("AWS::KMS::Key"), map[string]any{"DeletionPolicy": "Retain"})
}

func TestBucket(t *testing.T) {
	s := defaultStack(t)
	s.template.HasResource(jsii.String("AWS::S3::Bucket"), map[string]any{
		"DeletionPolicy": "Retain",
		"Properties": map[string]any{
			"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{map[string]any{
				"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": assertions.Match_AnyValue()},
				"BucketKeyEnabled":              true,
			}}},
			"PublicAccessBlockConfiguration": map[string]any{
				"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
			},
			"VersioningConfiguration": map[string]any{"Status": "Enabled"},
			"LifecycleConfiguration": map[string]any{"Rules": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1}, "Status": "Enabled"}),
				assertions.Match_ObjectLike(&map[string]any{"ExpirationInDays": 14, "Prefix": "strata/", "Status": "Enabled"}),
				assertions.Match_ObjectLike(&map[string]any{"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": 7}, "ExpiredObjectDeleteMarker": true, "Status": "Enabled"}),
			})},
		},
	})
	s.template.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), map[string]any{
		"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
			"Effect":    "Deny",
			"Action":    "s3:*",
			"Principal": map[string]any{"AWS": "*"},
			"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
		})})},
	})
	// The lifecycle follows retentionDays + lifecycleMarginDays.
	s30 := synth(t, map[string]any{"retentionDays": 30, "lifecycleMarginDays": "2", "brokerCount": 1, "storageGiB": 21, "noncurrentVersionDays": 3})
	s30.template.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
		"LifecycleConfiguration": map[string]any{"Rules": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(&map[string]any{"ExpirationInDays": 32, "Prefix": "strata/", "Status": "Enabled"}),
			assertions.Match_ObjectLike(&map[string]any{"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": 3}}),
		})},
	})
	s30.template.HasResourceProperties(jsii.String("AWS::ECS::Service"), map[string]any{
		"DesiredCount":            1,
		"DeploymentConfiguration": map[string]any{"MinimumHealthyPercent": 0, "MaximumPercent": 100},
	})
	s30.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
		"EphemeralStorage": map[string]any{"SizeInGiB": 21},
		"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{"Environment": assertions.Match_ArrayWith(&[]any{
			map[string]any{"Name": "STRATA_DEFAULT_REPLICATION_FACTOR", "Value": "1"},
			map[string]any{"Name": "STRATA_TOPIC_DEFAULT", "Value": "retention.ms=2592000000,segment.bytes=1073741824"},
		})})},
	})
}

func TestFunctions(t *testing.T) {
	s := defaultStack(t)
	fns := s.resources("AWS::Lambda::Function")
	if len(fns) != 4 {
		t.Fatalf("%d functions", len(fns))
	}
	kafka := 0
	for id, r := range fns {
		p := props(r)
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v handler %v", id, p["Runtime"], p["Handler"])
		}
		if a, _ := json.Marshal(p["Architectures"]); string(a) != `["arm64"]` {
			t.Errorf("%s: architectures %s", id, a)
		}
		if strings.HasPrefix(id, "PKIIssuer") {
			if _, ok := p["VpcConfig"]; ok {
				t.Errorf("%s: the issuer needs only Secrets Manager, not the VPC", id)
			}
			continue
		}
		kafka++
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		if env["STRATA_BOOTSTRAP"] != Bootstrap {
			t.Errorf("%s: STRATA_BOOTSTRAP %v", id, env["STRATA_BOOTSTRAP"])
		}
		if _, ok := p["VpcConfig"]; !ok {
			t.Errorf("%s: not in the VPC", id)
		}
	}
	if kafka != 3 {
		t.Errorf("%d Kafka functions", kafka)
	}
	s.template.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{"AuthType": "AWS_IAM"})
	s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
		"Environment": map[string]any{"Variables": map[string]any{"STRATA_BOOTSTRAP": Bootstrap, "STRATA_REGISTRY_URL": RegistryURL}},
	})
	s.template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
		"ScheduleExpression": "rate(1 minute)",
		"State":              "ENABLED",
	})

	// The assets hold the bootstrap only.
	files := readAssets(t, s.outdir).Files
	for id, r := range fns {
		code, _ := props(r)["Code"].(map[string]any)
		key, _ := code["S3Key"].(string)
		asset, ok := files[strings.TrimSuffix(key, ".zip")]
		if !ok {
			t.Errorf("%s: no file asset for %q", id, key)
			continue
		}
		entries, err := os.ReadDir(filepath.Join(s.outdir, asset.Source.Path))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) != 1 || names[0] != "bootstrap" {
			t.Errorf("%s: asset %s holds %v, want [bootstrap]", id, asset.Source.Path, names)
		}
	}
}

// assetManifest is the part of <stack>.assets.json the tests read.
type assetManifest struct {
	Files map[string]struct {
		Source struct{ Path, Packaging string }
	}
	DockerImages map[string]struct {
		Source struct{ Directory, DockerFile, Platform string }
	}
}

func readAssets(t *testing.T, outdir string) assetManifest {
	t.Helper()
	var am assetManifest
	raw, err := os.ReadFile(filepath.Join(outdir, StackName+".assets.json"))
	if err == nil {
		err = json.Unmarshal(raw, &am)
	}
	if err != nil {
		t.Fatal(err)
	}
	return am
}

func TestFleet(t *testing.T) {
	s := defaultStack(t)
	s.template.HasResourceProperties(jsii.String("AWS::ECS::Service"), map[string]any{
		"DesiredCount": 3,
		"LaunchType":   "FARGATE",
		"DeploymentConfiguration": map[string]any{
			"DeploymentCircuitBreaker": map[string]any{"Enable": true, "Rollback": true},
			"MinimumHealthyPercent":    66,
			"MaximumPercent":           100,
		},
		"NetworkConfiguration": map[string]any{"AwsvpcConfiguration": map[string]any{"AssignPublicIp": "DISABLED"}},
	})
	svc := props(only(t, s.resources("AWS::ECS::Service")))
	vpcConf := svc["NetworkConfiguration"].(map[string]any)["AwsvpcConfiguration"].(map[string]any)
	if subnets, _ := vpcConf["Subnets"].([]any); len(subnets) != 3 {
		t.Errorf("service in %d subnets, want 3 (one per AZ)", len(subnets))
	}
	if regs, _ := svc["ServiceRegistries"].([]any); len(regs) != 1 {
		t.Errorf("service registries %v", svc["ServiceRegistries"])
	}
	s.template.HasResourceProperties(jsii.String("AWS::ServiceDiscovery::PrivateDnsNamespace"), map[string]any{"Name": Namespace})
	s.template.HasResourceProperties(jsii.String("AWS::ServiceDiscovery::Service"), map[string]any{
		"Name":      ServiceName,
		"DnsConfig": map[string]any{"DnsRecords": []any{map[string]any{"Type": "A", "TTL": 10}}},
	})
	// arrayWith keeps order; CDK sorts the variables given at creation by
	// name (the principals' ACL variables, added later, follow).
	env := []any{}
	vars := map[string]any{}
	for k, v := range map[string]string{
		"STRATA_NODE_ID": "auto", "STRATA_RACK": "auto", "STRATA_LISTENERS": "SASL_SSL://0.0.0.0:9092", "STRATA_DATA": "/data",
		"STRATA_HTTP": "127.0.0.1:9644", "STRATA_REGISTRY": "0.0.0.0:8081", "STRATA_EMF_INTERVAL": "60s",
		"STRATA_CLUSTER_ID": "strata", "STRATA_DEFAULT_REPLICATION_FACTOR": "3",
		"STRATA_TOPIC_DEFAULT": "retention.ms=604800000,segment.bytes=1073741824",
	} {
		vars[k] = map[string]any{"Name": k, "Value": v}
	}
	for _, k := range []string{"STRATA_METASTORE", "STRATA_BUCKET"} {
		vars[k] = assertions.Match_ObjectLike(&map[string]any{"Name": k})
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, vars[k])
	}
	s.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
		"Cpu":              "1024",
		"Memory":           "2048",
		"EphemeralStorage": map[string]any{"SizeInGiB": 50},
		"RuntimePlatform":  map[string]any{"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"},
		"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{
			"Environment":      assertions.Match_ArrayWith(&env),
			"HealthCheck":      map[string]any{"Command": []any{"CMD", "/brokerfleet", "health", "-ready", "-http", "127.0.0.1:9644"}},
			"LogConfiguration": map[string]any{"LogDriver": "awslogs"},
			"Ulimits":          []any{map[string]any{"Name": "nofile", "SoftLimit": 1048576, "HardLimit": 1048576}},
		})},
	})
	td := props(only(t, s.resources("AWS::ECS::TaskDefinition")))
	b, _ := json.Marshal(td["ContainerDefinitions"])
	for _, want := range []string{`"dynamodb://",{"Ref":"DataTable`, `"s3://",{"Ref":"DataBucket`, `"/strata"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("container definition lacks %s: %s", want, b)
		}
	}
	s.template.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{"RetentionInDays": 30})

	// The Docker build context is the repository root, filtered by the
	// root .dockerignore: Go sources, no node_modules, bootstraps or tests.
	var asset string
	am := readAssets(t, s.outdir)
	if len(am.DockerImages) != 1 {
		t.Fatalf("docker images %v", am.DockerImages)
	}
	for _, img := range am.DockerImages {
		asset = filepath.Join(s.outdir, img.Source.Directory)
		if img.Source.DockerFile != "brokerfleet/Dockerfile" || img.Source.Platform != "linux/arm64" {
			t.Errorf("image source %+v", img.Source)
		}
	}
	for _, p := range []string{"go.mod", "go.sum", "brokerfleet/Dockerfile", "brokerfleet/main.go", "pkg", "functions/dlqconsole/templates"} {
		if _, err := os.Stat(filepath.Join(asset, p)); err != nil {
			t.Errorf("build context lacks %s", p)
		}
	}
	filepath.WalkDir(asset, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(asset, p)
		switch {
		case d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "cdk.out" || d.Name() == "infra",
			d.Name() == "bootstrap", strings.HasSuffix(d.Name(), "_test.go"):
			t.Errorf("build context holds %s", rel)
		}
		return nil
	})
}

func TestObservability(t *testing.T) {
	s := defaultStack(t)
	alarms := map[string]map[string]any{}
	for _, r := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(r)
		alarms[p["MetricName"].(string)+"/"+p["Statistic"].(string)] = p
		if p["Namespace"] != MetricNamespace {
			t.Errorf("alarm namespace %v", p["Namespace"])
		}
		dims, _ := json.Marshal(p["Dimensions"])
		if string(dims) != `[{"Name":"Cluster","Value":"strata"}]` {
			t.Errorf("alarm dimensions %s", dims)
		}
	}
	for key, want := range map[string]map[string]any{
		MetricMaxLag + "/Maximum":              {"Threshold": 10000.0, "TreatMissingData": "notBreaching"},
		MetricUnderReplicated + "/Maximum":     {"Threshold": 0.0, "EvaluationPeriods": 5.0, "Period": 60.0, "TreatMissingData": "notBreaching"},
		MetricOffline + "/Maximum":             {"Threshold": 0.0, "EvaluationPeriods": 1.0, "Period": 60.0, "TreatMissingData": "notBreaching"},
		MetricProduceErrors + "/Sum":           {"Threshold": 10.0, "ComparisonOperator": "GreaterThanThreshold"},
		MetricUnderReplicated + "/SampleCount": {"ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching"},
	} {
		p, ok := alarms[key]
		if !ok {
			t.Errorf("no alarm on %s", key)
			continue
		}
		for k, v := range want {
			if p[k] != v {
				t.Errorf("alarm %s: %s = %v, want %v", key, k, p[k], v)
			}
		}
	}
	dash := props(only(t, s.resources("AWS::CloudWatch::Dashboard")))
	body, _ := json.Marshal(dash["DashboardBody"])
	for _, m := range []string{MetricMaxLag, MetricUnderReplicated, MetricOffline, MetricUnderMinIsr, MetricProduceErrors, MetricProduceBytes, MetricFetchBytes, MetricS3UploadLag} {
		if !strings.Contains(string(body), m) {
			t.Errorf("dashboard lacks %s", m)
		}
	}
}

// TestOptions synthesizes the optional parts: SCRAM secret, alarm e-mail,
// a configured trigger, another broker count and sizes.
func TestOptions(t *testing.T) {
	s := synth(t, map[string]any{
		"alarmEmail":    "ops@example.com",
		"triggerTopics": "orders,payments", "triggerFunction": "order-handler", "triggerRateMinutes": 5,
		"brokerCount": 5, "brokerCpu": "2048", "brokerMemoryMiB": 8192, "storageGiB": 200, "lagAlarmThreshold": "500",
		"clusterName": "prod",
	})
	s.template.HasOutput(jsii.String("AlarmTopicArn"), map[string]any{})
	s.template.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{"Protocol": "email", "Endpoint": "ops@example.com"})
	for id, r := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(r)
		if a, _ := p["AlarmActions"].([]any); len(a) != 1 {
			t.Errorf("alarm %s: actions %v", id, p["AlarmActions"])
		}
		if dims, _ := json.Marshal(p["Dimensions"]); !strings.Contains(string(dims), `"prod"`) {
			t.Errorf("alarm %s: dimensions %s", id, dims)
		}
	}
	s.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{"MetricName": MetricMaxLag, "Threshold": 500})
	s.template.ResourceCountIs(jsii.String("AWS::Events::Rule"), jsii.Number(2))
	s.template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{"ScheduleExpression": "rate(5 minutes)"})
	s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
		"Timeout": 300,
		"Environment": map[string]any{"Variables": map[string]any{
			"STRATA_TOPICS": "orders,payments", "STRATA_FUNCTION": "order-handler", "STRATA_GROUP": "strata-trigger",
		}},
	})
	// The trigger may invoke its target (and read its two secrets:
	// TestFunctionRolesReadOnlyTheirSecrets).
	s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
		"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{map[string]any{
			"Action": "lambda:InvokeFunction", "Effect": "Allow", "Resource": assertions.Match_AnyValue(),
		}})},
	})
	for id, r := range s.resources("AWS::IAM::Policy") {
		for _, st := range statements(r) {
			for _, a := range strs(st["Action"]) {
				if a == "lambda:InvokeFunction" && !strings.HasPrefix(id, "FunctionstriggerServiceRole") {
					t.Errorf("%s may invoke functions", id)
				}
			}
		}
	}
	s.template.HasResourceProperties(jsii.String("AWS::ECS::Service"), map[string]any{
		"DesiredCount":            5,
		"DeploymentConfiguration": map[string]any{"MinimumHealthyPercent": 80, "MaximumPercent": 100},
	})
	s.template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), map[string]any{
		"Cpu": "2048", "Memory": "8192", "EphemeralStorage": map[string]any{"SizeInGiB": 200},
		"ContainerDefinitions": []any{assertions.Match_ObjectLike(&map[string]any{"Environment": assertions.Match_ArrayWith(&[]any{
			map[string]any{"Name": "STRATA_CLUSTER_ID", "Value": "prod"},
		})})},
	})
	if problems := iamProblems(s.json); len(problems) > 0 {
		t.Errorf("IAM:\n%s", strings.Join(problems, "\n"))
	}
}

func TestOutputs(t *testing.T) {
	s := defaultStack(t)
	for _, o := range []string{"BootstrapServers", "SchemaRegistryUrl", "TableName", "BucketName", "DlqConsoleUrl", "DashboardName", "EcsClusterName", "BrokerServiceName",
		"CaSecretArn", "AdminSecretArn", "BrokerCertificateNotAfter"} {
		s.template.HasOutput(jsii.String(o), map[string]any{})
	}
	s.template.HasOutput(jsii.String("BootstrapServers"), map[string]any{"Value": "brokers.strata.internal:9092"})
}

func only(t *testing.T, m map[string]map[string]any) map[string]any {
	t.Helper()
	if len(m) != 1 {
		t.Fatalf("%d resources, want 1", len(m))
	}
	for _, r := range m {
		return r
	}
	return nil
}

// TestTriggerFunctionARN: a trigger target given as an ARN is granted by
// a statement in the trigger's role (CDK panicked adding a resource
// policy to the imported function before).
func TestTriggerFunctionARN(t *testing.T) {
	const arn = "arn:aws:lambda:eu-west-1:123456789012:function:order-handler"
	s := synth(t, map[string]any{"triggerTopics": "orders", "triggerFunction": arn})
	found := false
	for id, r := range s.resources("AWS::IAM::Policy") {
		for _, st := range statements(r) {
			if slices.Contains(strs(st["Action"]), "lambda:InvokeFunction") {
				b, _ := json.Marshal(st["Resource"])
				found = found || strings.HasPrefix(id, "FunctionstriggerServiceRole") && strings.Contains(string(b), arn)
			}
		}
	}
	if !found {
		t.Errorf("the trigger may not invoke %s", arn)
	}
}
