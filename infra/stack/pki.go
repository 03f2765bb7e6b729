package stack

import (
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// PKI is the deployment's private certificate authority: three secrets
// and a custom resource (functions/certissuer, a Go Lambda function) that
// fills them at deploy time, so no key is ever in the template or on a
// developer's machine.
type PKI struct {
	constructs.Construct
	// CAKeySecret holds the CA private keys; only the issuer reads it.
	CAKeySecret awssecretsmanager.Secret
	// CASecret is {"certificate": PEM}, the CAs clients trust: the shape
	// of AWS Lambda's SERVER_ROOT_CA_CERTIFICATE. Not secret, but a secret
	// because that is where Lambda's Kafka event source reads it.
	CASecret awssecretsmanager.Secret
	// TLSSecret is {"certificate","privateKey","caCertificate"}: the
	// brokers' certificate and key, and the CAs they verify each other with.
	TLSSecret awssecretsmanager.Secret
	Issuer    awslambda.Function
	Resource  awscdk.CustomResource
}

// PKI resource types and attributes (functions/certissuer's Handle).
const (
	pkiResourceType = "Custom::StrataPKI"
	attrSerial      = "CertificateSerial"
	attrNotAfter    = "CertificateNotAfter"
	attrTrust       = "TrustFingerprint"
	caValidityDays  = 3650
)

// CertNames are the broker certificate's names: the bootstrap name, the
// private DNS names ECS tasks get in the VPC (the brokers advertise those,
// see `serve -advertise-private-dns`: ip-10-0-1-2.<region>.compute.internal,
// or ip-10-0-1-2.ec2.internal in us-east-1), and cfg.CertNames. region is
// the stack's (a token at synth time).
func CertNames(cfg Config, region string) []string {
	names := []string{ServiceName + "." + Namespace, "*.ec2.internal", "*." + region + ".compute.internal"}
	return append(names, cfg.CertNameList()...)
}

// NewPKI builds the secrets (encrypted with key) and the custom resource.
func NewPKI(scope constructs.Construct, id string, cfg Config, key awskms.IKey) *PKI {
	c := constructs.NewConstruct(scope, jsii.String(id))
	secret := func(id, description string) awssecretsmanager.Secret {
		// Created with a generated placeholder; the issuer overwrites it
		// before anything reads it (the brokers and functions depend on
		// the resource).
		return awssecretsmanager.NewSecret(c, jsii.String(id), &awssecretsmanager.SecretProps{
			Description:   jsii.String(description),
			EncryptionKey: key,
		})
	}
	p := &PKI{
		Construct:   c,
		CAKeySecret: secret("CAKey", "Strata private CA keys (read by the certificate issuer only)"),
		CASecret:    secret("CA", `Strata private CA certificates {"certificate": PEM} (SERVER_ROOT_CA_CERTIFICATE)`),
		TLSSecret:   secret("BrokerTLS", "Strata broker TLS certificate and key {certificate,privateKey,caCertificate}"),
	}
	p.Issuer = newGoFunction(c, cfg, "certissuer", fnOptions{
		id:          "Issuer",
		description: "Strata certificate issuer (CloudFormation custom resource)",
		timeout:     awscdk.Duration_Seconds(jsii.Number(60)),
	})
	p.CAKeySecret.GrantRead(p.Issuer, nil)
	p.CAKeySecret.GrantWrite(p.Issuer)
	p.CASecret.GrantWrite(p.Issuer)
	p.TLSSecret.GrantRead(p.Issuer, nil)
	p.TLSSecret.GrantWrite(p.Issuer)

	names := CertNames(cfg, *awscdk.Aws_REGION())
	p.Resource = awscdk.NewCustomResource(c, jsii.String("Resource"), &awscdk.CustomResourceProps{
		ServiceToken: p.Issuer.FunctionArn(),
		ResourceType: jsii.String(pkiResourceType),
		Properties: &map[string]any{
			"Cluster":          cfg.ClusterName,
			"CAKeySecret":      p.CAKeySecret.SecretArn(),
			"CASecret":         p.CASecret.SecretArn(),
			"TLSSecret":        p.TLSSecret.SecretArn(),
			"DNSNames":         names,
			"CAGeneration":     cfg.CARotation,
			"CertGeneration":   cfg.TLSRotation,
			"CAValidityDays":   strconv.Itoa(caValidityDays),
			"CertValidityDays": strconv.Itoa(cfg.CertValidityDays),
		},
	})
	return p
}

// dependOn makes the CloudFormation resource behind c (its default child:
// a function, a service) wait for the PKI resource; a dependency of the
// whole construct would include its role, which the KMS key's policy
// names, and close a cycle through the key.
func (p *PKI) dependOn(c constructs.IConstruct) {
	c.Node().DefaultChild().Node().AddDependency(p.Resource.Node().DefaultChild())
}

// Serial is the broker certificate's serial (changes on every reissue).
func (p *PKI) Serial() *string { return p.Resource.GetAttString(jsii.String(attrSerial)) }

// NotAfter is when the broker certificate expires (RFC 3339).
func (p *PKI) NotAfter() *string { return p.Resource.GetAttString(jsii.String(attrNotAfter)) }

// TrustFingerprint changes whenever the trusted CAs do.
func (p *PKI) TrustFingerprint() *string { return p.Resource.GetAttString(jsii.String(attrTrust)) }
