// Package dynamolocal serves the DynamoDB API in process, in memory:
// minidyn (github.com/truora/minidyn) behind a mutex. It is the DynamoDB
// half of `go run ./localstack` and the server behind
// dynamotest.StartMinidyn.
//
// minidyn's tables are not safe for concurrent requests (DescribeTable
// reads what UpdateItem writes: the race detector caught it when a broker
// process created the table while others heartbeated), so the handler
// passes requests to it one at a time.
//
// What minidyn (v0.8.2) does, as relied on by pkg/metastore/dynamo:
// conditional writes, Query paging and TransactWriteItems work;
// DescribeTable reports no TableStatus (skip the SDK's table-exists
// waiter); TTL operations are answered 400 "unsupported operation" and
// nothing expires; REMOVE in update expressions is ignored; empty binary
// values are rejected. Nothing survives the process.
package dynamolocal

import (
	"net/http"
	"sync"

	miniserver "github.com/truora/minidyn/server"
)

// TargetPrefix starts the X-Amz-Target header of every DynamoDB request
// (the JSON protocol names the operation there, for instance
// "DynamoDB_20120810.PutItem").
const TargetPrefix = "DynamoDB_20120810."

// NewHandler returns a fresh, empty DynamoDB that serves the JSON
// protocol (POST, operation in X-Amz-Target) one request at a time.
// Signatures are not checked.
func NewHandler() http.Handler {
	return &handler{mini: miniserver.NewServer()}
}

type handler struct {
	mu   sync.Mutex // one request at a time
	mini *miniserver.Server
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mini.ServeHTTP(w, r)
}
