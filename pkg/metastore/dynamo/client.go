package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AttemptTimeout bounds one HTTP attempt of a client made by NewClient, so
// a hung connection becomes a retried timeout rather than a hung call.
const AttemptTimeout = 10 * time.Second

// DefaultRegion is the region NewClient uses with an endpoint override and
// no region.
const DefaultRegion = "us-east-1"

// NewClient builds a DynamoDB client with Retryer(retries) and
// AttemptTimeout. With an endpoint override (LocalStack, dynalite,
// minidyn) it uses static dummy credentials and the region given (default
// DefaultRegion) and reads no AWS configuration; without one it loads the
// default AWS configuration (environment, shared files, instance role).
// opts apply last (tests replace the HTTP client through them). Only main
// packages and test helpers should call it: libraries take the client.
func NewClient(ctx context.Context, endpoint, region string, retries int, opts ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	httpClient := awshttp.NewBuildableClient().WithTimeout(AttemptTimeout)
	if endpoint != "" {
		if region == "" {
			region = DefaultRegion
		}
		o := dynamodb.Options{
			Region:       region,
			BaseEndpoint: aws.String(endpoint),
			Credentials:  credentials.NewStaticCredentialsProvider("strata", "strata", ""),
			Retryer:      Retryer(retries),
			HTTPClient:   httpClient,
		}
		return dynamodb.New(o, opts...), nil
	}
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return Retryer(retries) }),
		config.WithHTTPClient(httpClient),
	}
	if region != "" {
		load = append(load, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("dynamodb client: load aws config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("dynamodb client: no region (set AWS_REGION or pass one)")
	}
	return dynamodb.NewFromConfig(cfg, opts...), nil
}

// CreateTable creates table with the Store's key schema (pk S hash, sk S
// range, on-demand billing) unless it exists, waits until it is usable,
// and enables TTL deletion on the ttl attribute where the service supports
// it (stand-ins that lack TTL are accepted as they are). It is safe to call
// concurrently from several processes.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return classify("create table "+table, err, false)
	}
	if err := waitActive(ctx, client, table); err != nil {
		return err
	}
	if err := enableTTL(ctx, client, table); err != nil && !isUnsupported(err) {
		return err
	}
	return nil
}

// waitActive polls DescribeTable until the table is ACTIVE. minidyn
// reports no status at all, which counts as usable; the SDK's
// table-exists waiter would wait forever there.
func waitActive(ctx context.Context, client *dynamodb.Client, table string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	delay := 20 * time.Millisecond
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
			// Just created: DescribeTable may lag behind CreateTable.
		case err != nil:
			return classify("describe table "+table, err, false)
		case out.Table == nil:
			return fmt.Errorf("describe table %s: no description", table)
		default:
			switch out.Table.TableStatus {
			case types.TableStatusActive, "":
				return nil
			case types.TableStatusCreating, types.TableStatusUpdating:
			default:
				return fmt.Errorf("table %s is %s", table, out.Table.TableStatus)
			}
		}
		if err := sleep(ctx, delay); err != nil {
			return classify("wait for table "+table, err, false)
		}
		delay = min(2*delay, time.Second)
	}
}

// enableTTL turns on TTL deletion on the ttl attribute unless it is on.
func enableTTL(ctx context.Context, client *dynamodb.Client, table string) error {
	d, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return classify("describe ttl of "+table, err, false)
	}
	if t := d.TimeToLiveDescription; t != nil && aws.ToString(t.AttributeName) == AttrTTL &&
		(t.TimeToLiveStatus == types.TimeToLiveStatusEnabled || t.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(AttrTTL),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return classify("enable ttl on "+table, err, false)
	}
	return nil
}
