package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// maxAZs is how many availability zones the VPC spans.
const maxAZs = 3

// Ports the brokers serve. Replication between brokers uses the Kafka
// port.
const (
	KafkaPort    = 9092
	RegistryPort = 8081
	HTTPPort     = 9644 // metrics and /healthz
)

// Network is the VPC: public subnets for the NAT gateways, private
// subnets with egress for brokers and functions, in three availability
// zones, with gateway endpoints so S3 and DynamoDB traffic skips the NAT.
type Network struct {
	constructs.Construct
	Vpc awsec2.Vpc
	// BrokerSG admits the broker ports from inside the VPC only.
	BrokerSG awsec2.SecurityGroup
	// FunctionSG is the Lambda functions' group (egress only).
	FunctionSG awsec2.SecurityGroup
}

// NewNetwork builds the VPC with cfg.NATGateways NAT gateways.
func NewNetwork(scope constructs.Construct, id string, cfg Config) *Network {
	c := constructs.NewConstruct(scope, jsii.String(id))
	// An environment-agnostic stack only knows two AZ names; Fn::GetAZs
	// tokens give the VPC three whatever the region.
	var azs []*string
	for i := range maxAZs {
		azs = append(azs, awscdk.Fn_Select(jsii.Number(i), awscdk.Fn_GetAzs(jsii.String(""))))
	}
	vpc := awsec2.NewVpc(c, jsii.String("Vpc"), &awsec2.VpcProps{
		AvailabilityZones: &azs,
		NatGateways:       jsii.Number(cfg.NATGateways),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24)},
			{Name: jsii.String("private"), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(20)},
		},
		GatewayEndpoints: &map[string]*awsec2.GatewayVpcEndpointOptions{
			"S3":       {Service: awsec2.GatewayVpcEndpointAwsService_S3()},
			"DynamoDB": {Service: awsec2.GatewayVpcEndpointAwsService_DYNAMODB()},
		},
		RestrictDefaultSecurityGroup: jsii.Bool(false),
	})
	brokers := awsec2.NewSecurityGroup(c, jsii.String("BrokerSG"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Strata brokers: Kafka, schema registry and metrics from inside the VPC"),
		AllowAllOutbound: jsii.Bool(true),
	})
	for _, p := range []struct {
		port int
		what string
	}{{KafkaPort, "Kafka and replication"}, {RegistryPort, "schema registry"}, {HTTPPort, "metrics and health"}} {
		brokers.AddIngressRule(awsec2.Peer_Ipv4(vpc.VpcCidrBlock()), awsec2.Port_Tcp(jsii.Number(p.port)),
			jsii.String(fmt.Sprintf("%s from the VPC", p.what)), jsii.Bool(false))
	}
	functions := awsec2.NewSecurityGroup(c, jsii.String("FunctionSG"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Strata Lambda functions: egress to the brokers and AWS APIs"),
		AllowAllOutbound: jsii.Bool(true),
	})
	return &Network{Construct: c, Vpc: vpc, BrokerSG: brokers, FunctionSG: functions}
}

// PrivateSubnets selects the private subnets with egress.
func (n *Network) PrivateSubnets() *awsec2.SubnetSelection {
	return &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
}
