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
	HTTPPort     = 9644 // metrics and /healthz, on loopback in the task
)

// Network is the VPC: public subnets for the NAT gateways, private
// subnets with egress for brokers and functions, in three availability
// zones, with gateway endpoints so S3 and DynamoDB traffic skips the NAT.
//
// Nothing is admitted from the VPC's CIDR: the brokers' group admits Kafka
// (9092) from itself (replication), from the functions' group and from
// the groups named with AllowClient (clientSecurityGroups, Lambda event
// sources); the schema registry (8081) from the same clients but not the
// brokers. Metrics and health (9644) are bound to loopback in the task:
// the container health check reads them there, and metrics leave as EMF
// through the log driver, so no rule admits that port.
type Network struct {
	constructs.Construct
	Vpc awsec2.Vpc
	// BrokerSG is the brokers' group.
	BrokerSG awsec2.SecurityGroup
	// FunctionSG is the Lambda functions' group (egress only).
	FunctionSG awsec2.SecurityGroup
}

// NewNetwork builds the VPC with cfg.NATGateways NAT gateways, and admits
// the functions and cfg's client security groups.
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
		Description:      jsii.String("Strata brokers: Kafka from the brokers and named client groups, the schema registry from named client groups"),
		AllowAllOutbound: jsii.Bool(true),
	})
	functions := awsec2.NewSecurityGroup(c, jsii.String("FunctionSG"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Strata Lambda functions: egress to the brokers and AWS APIs"),
		AllowAllOutbound: jsii.Bool(true),
	})
	n := &Network{Construct: c, Vpc: vpc, BrokerSG: brokers, FunctionSG: functions}
	brokers.AddIngressRule(brokers, awsec2.Port_Tcp(jsii.Number(KafkaPort)), jsii.String("Kafka replication between brokers"), jsii.Bool(false))
	n.AllowClient(functions, "the Strata functions", true)
	for i, id := range cfg.ClientSecurityGroupList() {
		sg := awsec2.SecurityGroup_FromSecurityGroupId(c, jsii.String(fmt.Sprintf("Client%d", i)), jsii.String(id), &awsec2.SecurityGroupImportOptions{Mutable: jsii.Bool(false)})
		n.AllowClient(sg, "client group "+id+" (clientSecurityGroups)", true)
	}
	return n
}

// AllowClient admits a client security group to Kafka and, with registry,
// to the schema registry.
func (n *Network) AllowClient(peer awsec2.ISecurityGroup, what string, registry bool) {
	n.BrokerSG.AddIngressRule(peer, awsec2.Port_Tcp(jsii.Number(KafkaPort)), jsii.String("Kafka from "+what), jsii.Bool(false))
	if registry {
		n.BrokerSG.AddIngressRule(peer, awsec2.Port_Tcp(jsii.Number(RegistryPort)), jsii.String("schema registry from "+what), jsii.Bool(false))
	}
}

// PrivateSubnets selects the private subnets with egress.
func (n *Network) PrivateSubnets() *awsec2.SubnetSelection {
	return &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
}
