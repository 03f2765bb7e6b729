#!/usr/bin/env bash
# Start dynalite (an in-memory DynamoDB API) on 127.0.0.1:${PORT:-4567} for
# manual runs, e.g.
#   localstack/dynalite.sh &
#   brokerfleet serve --metastore dynamodb://strata --aws-endpoint http://127.0.0.1:4567 --create-table
# Set DYNALITE_PATH to keep the data in a LevelDB directory instead of memory.
# Installs the pinned module (npm ci) on first use. Tests start their own.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cli="$here/node_modules/dynalite/cli.js"
if [ ! -f "$cli" ]; then
  npm ci --prefix "$here" --no-audit --no-fund
fi
args=(--host 127.0.0.1 --port "${PORT:-4567}" --createTableMs 0 --deleteTableMs 0 --updateTableMs 0)
if [ -n "${DYNALITE_PATH:-}" ]; then
  args+=(--path "$DYNALITE_PATH")
fi
exec node "$cli" "${args[@]}"
