package dynamolocal_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stratamq/strata/pkg/metastore/dynamo"
	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamolocal"
)

// TestConcurrentRequests writes and describes the table from several
// goroutines at once: the race detector fails this test if requests reach
// minidyn concurrently.
func TestConcurrentRequests(t *testing.T) {
	srv := httptest.NewServer(dynamolocal.NewHandler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := dynamo.NewClient(ctx, srv.URL, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamo.CreateTable(ctx, client, "strata"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
					TableName: aws.String("strata"),
					Item: map[string]types.AttributeValue{
						dynamo.AttrPK: &types.AttributeValueMemberS{Value: fmt.Sprintf("g%d", g)},
						dynamo.AttrSK: &types.AttributeValueMemberS{Value: fmt.Sprintf("%03d", i)},
					},
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range 20 {
				if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("strata")}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	out, err := client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String("strata"),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "g2"}},
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if len(out.Items) != 20 {
		t.Fatalf("query found %d items, want 20", len(out.Items))
	}
}
