// Package orders is the order pipeline end to end: an order service, a
// billing and an analytics consumer with PostgreSQL behind them, the retry
// path and the dead-letter console, over a Strata cluster. Its test
// (TestOrderPipeline) runs it on three `brokerfleet serve` processes with
// consumer and broker crashes; cmd/orders runs each piece as its own
// process, or all of them against `brokerfleet dev` (`orders demo`).
//
// The flow:
//
//	order service --orders (Avro, Confluent wire format, key = order id)--> billing   (group billing)
//	                                                                    \-> analytics (group analytics)
//	billing: good order -> one PostgreSQL transaction (invoice + record position), then offset commit
//	         poison order -> pkg/retry Router -> orders.retry -> retry worker -> orders (again)
//	                         ... after 3 attempts -> orders.dlq (history in headers) -> DLQ console
//
// File map:
//
//	order.go      Order, its Avro schema, Generate (deterministic orders, 1% poison), Codec (registry + wire format)
//	produce.go    Produce: the order service (idempotent producer, acks=all)
//	billing.go    RunBilling: per-record transactions, manual commits, failures to the retry path
//	analytics.go  RunAnalytics: facts loaded per poll, idempotently
//	store.go      the PostgreSQL schemas and every query (Migrate, Bill, LoadFacts, totals, snapshots)
//	kafka.go      topics, consumer group timing, lag and end offsets
//	supervise.go  Supervise (restart on error) and RunRetryWorker (functions/retryworker)
//	demo.go       RunDemo: everything in one process with a one-line summary per second
//	postgres.go   StartPostgres: a throwaway server from Debian's postgresql package
//
// Non-obvious:
//   - Billing is idempotent by record position (billing.processed) and by
//     order id (the invoice's key). A failed record's position is recorded
//     only after the broker acknowledged its routing, so a crash between the
//     two sends it down the retry path twice: the DLQ may hold a poison
//     order more than once, never zero times.
//   - The retry worker redelivers to the origin topic, so every group on
//     orders (analytics too) sees a poison order up to three times; analytics
//     keeps the first copy (ON CONFLICT DO NOTHING), which is the one at the
//     lowest offset of its partition, so a rewind rebuilds the same rows.
//   - A commit that fails (a rebalance, a coordinator failover: membership
//     lives in the coordinator's memory) is not fatal; the records come
//     again and change nothing.
package orders
