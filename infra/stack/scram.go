package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// ScramUser is the user name in the generated SCRAM secret.
const ScramUser = "strata"

// NewScramSecret builds a Secrets Manager secret holding
// {"username":"strata","password":<generated>}, encrypted with key: the
// credentials for SASL/SCRAM-SHA-512 clients, among them AWS Lambda's
// self-managed Kafka event source (SASL_SCRAM_512_AUTH). Self-managed
// Kafka needs no AmazonMSK_ name prefix, so CDK names it. Nothing is
// granted here: a consumer's role needs secretsmanager:GetSecretValue on
// the secret and kms:Decrypt on the key (secret.GrantRead(role)).
func NewScramSecret(scope constructs.Construct, id string, key awskms.IKey) awssecretsmanager.Secret {
	return awssecretsmanager.NewSecret(scope, jsii.String(id), &awssecretsmanager.SecretProps{
		Description:   jsii.String("Strata SASL/SCRAM-SHA-512 credentials {username,password}"),
		EncryptionKey: key,
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			SecretStringTemplate: jsii.String(`{"username":"` + ScramUser + `"}`),
			GenerateStringKey:    jsii.String("password"),
			PasswordLength:       jsii.Number(32),
			ExcludePunctuation:   jsii.Bool(true),
		},
	})
}
