// Package broker is the Kafka side of a Strata broker: it accepts
// connections, frames and decodes requests with kmsg, answers them in order
// per connection, and owns the topics and partitions this broker serves.
//
// Each API key has its own handler file named after the key
// (00_produce.go, 01_fetch.go, ...), opening with the versions it serves.
//
// A connection has a reader and a writer goroutine. The reader decodes a
// request and runs the part of its handler that must happen in arrival order
// (Produce appends, so pipelined idempotent batches keep their order); what
// may wait (acks=all, a Fetch long poll) is returned as a function the
// writer runs in request order before encoding the response. Responses on a
// connection therefore leave in the order their requests came, as Kafka
// clients require.
package broker
