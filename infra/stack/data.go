package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// BucketPrefix is where the brokers keep the S3 tier inside the bucket
// (STRATA_BUCKET=s3://<bucket>/strata).
const BucketPrefix = "strata"

// Data is the durable state: the metastore table, the S3 tier bucket and
// the customer-managed KMS key encrypting both (and the secrets). All
// three are retained when the stack is deleted; the table also has
// deletion protection, and the bucket is versioned, so what a broker (or
// anyone with its role) deletes or overwrites stays recoverable for
// noncurrentVersionDays.
type Data struct {
	constructs.Construct
	Key    awskms.Key
	Table  awsdynamodb.Table
	Bucket awss3.Bucket
}

// NewData builds the key, the table and the bucket.
//
// The table has the metastore's layout (partition key pk, sort key sk,
// both strings; TTL on ttl), on-demand billing, point-in-time recovery
// and deletion protection.
//
// Topic retention is enforced by the brokers, which delete expired
// segments from the bucket; the bucket's lifecycle is only a backstop for
// objects the brokers never cleaned up (a deleted cluster, a lost
// manifest): objects under strata/ expire retentionDays +
// lifecycleMarginDays after creation, and incomplete multipart uploads are
// aborted after a day; noncurrent versions expire after
// noncurrentVersionDays, and delete markers left alone are removed. A
// topic configured with a longer retention.ms than retentionDays loses its
// older S3 segments to that backstop, so raise retentionDays (or
// lifecycleMarginDays) to the longest retention in use.
func NewData(scope constructs.Construct, id string, cfg Config) *Data {
	c := constructs.NewConstruct(scope, jsii.String(id))
	key := awskms.NewKey(c, jsii.String("Key"), &awskms.KeyProps{
		Description:       jsii.String("Strata: encrypts the metastore table, the S3 tier and the secrets (SCRAM users, TLS)"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
	table := awsdynamodb.NewTable(c, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("ttl"),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Encryption:         awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:      key,
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	bucket := awss3.NewBucket(c, jsii.String("Bucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_KMS,
		EncryptionKey:     key,
		BucketKeyEnabled:  jsii.Bool(true), // one KMS call per object key, not per PUT
		EnforceSSL:        jsii.Bool(true),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Versioned:         jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules: &[]*awss3.LifecycleRule{
			{
				Id:                                  jsii.String("abort-incomplete-multipart-uploads"),
				AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
			},
			{
				Id:         jsii.String("retention-backstop"),
				Prefix:     jsii.String(BucketPrefix + "/"),
				Expiration: awscdk.Duration_Days(jsii.Number(cfg.RetentionDays + cfg.LifecycleMarginDays)),
			},
			{
				// What the brokers delete (and what the backstop expires)
				// stays recoverable for noncurrentVersionDays, then goes.
				Id:                          jsii.String("noncurrent-versions"),
				NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(cfg.NoncurrentVersionDays)),
				ExpiredObjectDeleteMarker:   jsii.Bool(true),
			},
		},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	return &Data{Construct: c, Key: key, Table: table, Bucket: bucket}
}
