package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// NewUserSecret builds the Secrets Manager secret of a SCRAM user:
// {"username": user, "password": <32 generated letters and digits>},
// encrypted with key. Secrets Manager generates the password at deploy
// time, so it is never in the template; the shape is what AWS Lambda's
// Kafka event source reads for SASL_SCRAM_512_AUTH (self-managed Kafka
// needs no AmazonMSK_ name prefix, so CDK names it). The brokers read it
// through their task's secrets; a client's role needs secret.GrantRead.
func NewUserSecret(scope constructs.Construct, id, user string, key awskms.IKey) awssecretsmanager.Secret {
	return awssecretsmanager.NewSecret(scope, jsii.String(id), &awssecretsmanager.SecretProps{
		Description:   jsii.String("Strata SASL/SCRAM-SHA-512 user " + user + " {username,password}"),
		EncryptionKey: key,
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			SecretStringTemplate: jsii.String(`{"username":"` + user + `"}`),
			GenerateStringKey:    jsii.String("password"),
			PasswordLength:       jsii.Number(32),
			ExcludePunctuation:   jsii.Bool(true),
		},
	})
}
