//go:build chaos

// Package chaos is Strata's fault-injection suite: a Jepsen-style workload,
// nemesis and checker run against three `brokerfleet serve` processes over
// a shared DynamoDB stand-in (minidyn) and S3 stand-in (s3local), with an
// in-process TCP proxy on every link (client↔broker, broker↔broker,
// broker↔DynamoDB, broker↔S3) so any of them can be cut.
//
// The package itself holds what a test needs that is not a test: the
// operation history (History, Op: invoke/ok/fail/info, written as JSON
// lines), the checker (Check, a plain function over a history) and the
// cuttable TCP proxy (Proxy). The cluster, workload, nemesis and scenarios
// live in the _test.go files; `make chaos` runs them:
//
//	go test -tags chaos -count=1 -timeout 40m ./e2e/chaos/ -run TestChaos -v
//
// Every file carries the build tag chaos, so `go test ./...` never builds
// it. See README.md for the scenarios, the environment variables and the
// report.
package chaos
