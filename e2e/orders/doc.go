// Package orders is the order pipeline end to end: an order service, a
// billing consumer with PostgreSQL behind it and an analytics consumer
// with ClickHouse behind it, the retry path and the dead-letter console,
// over a Strata cluster. Its test (TestOrderPipeline) runs it on three
// `brokerfleet serve` processes with consumer and broker crashes; cmd/orders
// runs each piece as its own process, or all of them against `brokerfleet
// dev` (`orders demo`).
//
// The flow:
//
//	order service --orders (Avro, Confluent wire format, key = order id)--> billing   (group billing)
//	                                                                    \-> analytics (group analytics)
//	billing: good order -> one PostgreSQL transaction (invoice + record position), then offset commit
//	         poison order -> pkg/retry Router -> orders.retry -> retry worker -> orders (again)
//	                         ... after 3 attempts -> orders.dlq (history in headers) -> DLQ console
//	analytics: each poll -> one ClickHouse INSERT (ReplacingMergeTree by order id), then offset commit
//
// File map:
//
//	order.go       Order, its Avro schema, Generate (deterministic orders, 1% poison), Codec (registry + wire format)
//	produce.go     Produce: the order service (idempotent producer, acks=all)
//	billing.go     ConsumerConfig; RunBilling: per-record transactions, manual commits, failures to the retry path
//	analytics.go   RunAnalytics: one INSERT per poll, then the commit
//	store.go       billing's PostgreSQL schema and queries (Migrate, Bill, totals, invoices per customer)
//	facts.go       analytics' ClickHouse table and queries (OpenClickHouse, MigrateFacts, LoadFacts, collapsed totals, snapshots)
//	kafka.go       topics, consumer group timing, lag and end offsets
//	supervise.go   Supervise (restart on error) and RunRetryWorker (functions/retryworker)
//	demo.go        RunDemo: everything in one process with a one-line summary per second
//	postgres.go    StartPostgres: a throwaway server from Debian's postgresql package
//	clickhouse.go  StartClickHouse: a throwaway server from Debian's clickhouse-server package
//
// Non-obvious:
//   - Billing is idempotent by record position (billing.processed) and by
//     order id (the invoice's key). A failed record's position is recorded
//     only after the broker acknowledged its routing, so a crash between the
//     two sends it down the retry path twice: the DLQ may hold a poison
//     order more than once, never zero times.
//   - Analytics has no transaction: ClickHouse stores every copy it is
//     given (a record loaded again after a crash or a failed commit, the
//     retried copies of a poison order, which the retry worker redelivers
//     to orders, so every group sees them, and every record again after a
//     rewind). Exactly-once results come from the table engine:
//     ReplacingMergeTree ordered by order id, versioned by the record's
//     offset, so merges and FINAL keep the copy at the highest offset. An
//     order's copies all sit in its key's partition (the retry worker keeps
//     the origin partition), so that copy does not depend on arrival order,
//     and a rewind rebuilds the same rows. Every reader must read the
//     collapsed view (FINAL, or argMax over src_offset with GROUP BY
//     order_id): the stored rows include copies no merge has reached yet.
//     Deleting and recreating the orders topic restarts offsets: truncate
//     the facts with it.
//   - ClickHouse is reached with clickhouse-go over the native protocol
//     only. Debian 12's server (18.16.1, revision 54412) is far older than
//     clickhouse-go v2.51's stated minimum (25.8; its debug log warns) but
//     works for what this package does, with two limits found here: clickhouse-go's
//     HTTP mode fails before the first query (18.16 rejects its
//     client_protocol_version setting), and an INSERT without a column list
//     gets a header of no columns back, so LoadFacts names them. 18.16 has
//     neither DateTime64 nor Bool: created_at_ms is an Int64 (created_at a
//     DateTime ALIAS of it), poison a UInt8.
//   - A commit that fails (a rebalance, a coordinator failover: membership
//     lives in the coordinator's memory) is not fatal; the records come
//     again and change nothing.
package orders
