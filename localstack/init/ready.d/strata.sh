#!/bin/bash
# LocalStack ready hook (mounted at /etc/localstack/init/ready.d by
# localstack/docker-compose.yml): creates what `brokerfleet serve
# -metastore dynamodb://strata -bucket s3://strata/...` needs, the way
# `-create-table` and the CDK app do: the DynamoDB table (pk S hash, sk S
# range, on-demand, TTL on the ttl attribute) and the S3 bucket. Safe to
# run again (with PERSISTENCE both may exist already).
set -euo pipefail

table="${STRATA_TABLE:-strata}"
bucket="${STRATA_BUCKET:-strata}"

if ! awslocal dynamodb describe-table --table-name "$table" >/dev/null 2>&1; then
  awslocal dynamodb create-table \
    --table-name "$table" \
    --attribute-definitions AttributeName=pk,AttributeType=S AttributeName=sk,AttributeType=S \
    --key-schema AttributeName=pk,KeyType=HASH AttributeName=sk,KeyType=RANGE \
    --billing-mode PAY_PER_REQUEST >/dev/null
  awslocal dynamodb wait table-exists --table-name "$table"
  # Fails only when TTL is on already.
  awslocal dynamodb update-time-to-live --table-name "$table" \
    --time-to-live-specification Enabled=true,AttributeName=ttl >/dev/null || true
fi

if ! awslocal s3api head-bucket --bucket "$bucket" >/dev/null 2>&1; then
  awslocal s3api create-bucket --bucket "$bucket" >/dev/null
fi

echo "strata: table $table and bucket $bucket ready"
