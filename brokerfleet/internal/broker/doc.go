// Package broker is the composition root and Kafka front end of a Strata
// broker. New builds the components and wires their hooks: the catalog
// (the broker's view of the cluster and its registration), the controller,
// replication, the tier, the group coordinator, security and metrics.
// This package accepts connections, frames and decodes requests with kmsg,
// and answers them in order per connection through the route registry.
//
// Each API key has its own handler file named after the key
// (00_produce.go, 01_fetch.go, ...), opening with the versions it serves;
// its init registers the key, the versions, the handler and its ACL rule
// in one call (routes.go). ApiVersions is built from the registry, and a
// key without an authorization rule can be neither registered nor served.
//
// A connection has a reader and a writer goroutine. The reader decodes a
// request and runs the part of its handler that must happen in arrival order
// (Produce appends, so pipelined idempotent batches keep their order); what
// may wait (acks=all, a Fetch long poll) is returned as a function the
// writer runs in request order before encoding the response. Responses on a
// connection therefore leave in the order their requests came, as Kafka
// clients require.
//
// Lock order across the components is in docs/locks.md.
package broker
